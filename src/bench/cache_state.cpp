// The page cache a benchmark run starts from (issue 37). A buffered type that finds the file
// cached measures memory while an O_DIRECT type beside it measures the storage, and the table
// then tells a newcomer that the naive path beats the pipelined one. So before each run that
// reads, the data set is put in one state, cold (written back and dropped, fio's invalidate=1)
// or warm (read through the cache), and the state is then measured with the residency probe,
// never assumed: a file system that keeps its pages (tmpfs) or a page another process has
// mapped shows up as "NOT cold" in the row instead of a wrong figure passing for a cold one.
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "sluice/error.hpp"
#include "sluice/page_cache.hpp"
#include "sluice/residency.hpp"
#include "worker.hpp"

namespace sluice::bench {
namespace {

constexpr double held_margin = 0.01;  // cold: at most 1% cached; warm: at least 99%

// Pages the cache holds of every span, summed; `known` false where no probe answered.
void probe_spans(const std::vector<detail::CacheSpan>& spans, std::uint64_t& pages,
                 std::uint64_t& cached, bool& known) {
  pages = cached = 0;
  known = !spans.empty();
  for (const auto& s : spans) {
    const Residency r = page_cache_residency(s.file->fd(), s.lo, s.hi - s.lo);
    pages += r.pages;
    cached += r.cached;
    known = known && r.method != ResidencyMethod::none;
  }
}

std::string errno_text(const char* what, const std::string& path, int e) {
  return fmt::format("{} of {} failed: {}", what, path, std::strerror(e));
}

std::string percent(double f) {
  return fmt::format("{:.0f}%", std::floor(f * 100 + 0.5));
}

}  // namespace

std::string_view to_string(CacheState c) noexcept {
  switch (c) {
    case CacheState::cold:
      return "cold";
    case CacheState::warm:
      return "warm";
    case CacheState::as_is:
      return "as-is";
  }
  return "as-is";
}

CacheState parse_cache_state(std::string_view text) {
  for (const CacheState c : {CacheState::cold, CacheState::warm, CacheState::as_is}) {
    if (text == to_string(c)) return c;
  }
  throw_usage_error({.op = "bench"}, fmt::format("cache state '{}': cold, warm or as-is", text));
}

double CacheRecord::start_fraction() const noexcept {
  return pages == 0 ? 0.0 : static_cast<double>(cached_start) / static_cast<double>(pages);
}

double CacheRecord::end_fraction() const noexcept {
  return pages == 0 ? 0.0 : static_cast<double>(cached_end) / static_cast<double>(pages);
}

bool CacheRecord::held() const noexcept {
  if (!known || state == CacheState::as_is) return true;
  return state == CacheState::cold ? start_fraction() <= held_margin
                                   : start_fraction() >= 1.0 - held_margin;
}

std::string CacheRecord::label() const {
  const std::string name(to_string(state));
  if (!known) return name + " ?";
  if (!held()) return "NOT " + name + " " + percent(start_fraction());
  if (rewarmed) return "cold->warm";
  return name + " " + percent(start_fraction());
}

namespace detail {

CacheRecord prepare_cache(CacheState state, const std::vector<CacheSpan>& spans) {
  CacheRecord rec;
  rec.state = state;
  for (const auto& s : spans) {
    if (!rec.error.empty() || state == CacheState::as_is) break;
    if (state == CacheState::cold) {
      if (const int e = evict_range(s.file->fd(), s.lo, s.hi - s.lo); e != 0)
        rec.error = errno_text("fdatasync + posix_fadvise(DONTNEED)", s.file->path(), e);
      continue;
    }
    // Pages already cached cost a memory copy to read again; a file wholly cached is left be.
    const Residency r = page_cache_residency(s.file->fd(), s.lo, s.hi - s.lo);
    if (r.method != ResidencyMethod::none && r.cached == r.pages) continue;
    if (const int e = read_into_cache(s.file->fd(), s.lo, s.hi - s.lo); e != 0)
      rec.error = errno_text("reading it through the page cache", s.file->path(), e);
  }
  if (state == CacheState::cold)
    rec.how = "fdatasync, then posix_fadvise(DONTNEED) of the data set";
  if (state == CacheState::warm) rec.how = "the data set read through the page cache";
  probe_spans(spans, rec.pages, rec.cached_start, rec.known);
  return rec;
}

void finish_cache(CacheRecord& rec, const std::vector<CacheSpan>& spans, const RunResult& res) {
  std::uint64_t pages = 0;
  bool known = false;
  probe_spans(spans, pages, rec.cached_end, known);
  rec.known = rec.known && known;
  // Read more than once (a time-bound run wrapped around) while the cache filled up behind it.
  rec.rewarmed = rec.known && rec.state == CacheState::cold &&
                 res.reads.bytes > res.dataset_bytes && 2 * rec.cached_end >= rec.pages &&
                 rec.cached_end > rec.cached_start;
}

}  // namespace detail
}  // namespace sluice::bench
