#include "loader_memory.hpp"

#include <algorithm>
#include <functional>

#include <fmt/format.h>

#include "arena.hpp"
#include "sluice/error.hpp"
#include "sluice/units.hpp"

namespace sluice::detail {
namespace {

// Staging one sample may need beyond its bytes: its covering reads start and end on the file's
// alignment, and each read starts on a page of staging.
std::uint64_t staging_slack(std::uint64_t bytes, std::uint64_t reads_hint, const BatchPlanner& planner) {
  const std::uint64_t a = std::max(planner.max_alignment(), arena_granule);
  const std::uint64_t reads = reads_hint + bytes / planner.max_read() + 1;
  return reads * 3 * a;
}

// The sum of the `b` largest values.
std::uint64_t top_sum(std::vector<std::uint64_t>& v, std::uint64_t b) {
  const auto k = static_cast<std::ptrdiff_t>(std::min<std::uint64_t>(b, v.size()));
  std::nth_element(v.begin(), v.begin() + k - (k > 0 ? 1 : 0), v.end(), std::greater<>());
  std::uint64_t sum = 0;
  for (std::ptrdiff_t i = 0; i < k; ++i) sum += v[static_cast<std::size_t>(i)];
  return sum;
}

}  // namespace

MemoryPlan plan_memory(const Dataset& ds, const IngestOptions& o, const BatchPlanner& planner) {
  MemoryPlan m;
  m.prefetch_asked = std::max(o.prefetch, 1U);
  m.budget = o.memory_budget;
  const std::uint64_t n = ds.size();
  const std::uint64_t b = std::min<std::uint64_t>(o.batch_size, std::max<std::uint64_t>(n, 1));
  std::uint64_t batch = 0;
  std::uint64_t reads = 0;  // staging of one batch's reads
  const bool fixed = ds.sample_shape().has_value();
  if (n == 0) {
    m.prefetch = m.prefetch_asked;
    return m;
  }
  if (fixed) {
    const std::uint64_t each = ds.sample_bytes(0);
    batch = b * each;
    reads = b * (each + staging_slack(each, 1, planner));
  } else {
    std::vector<std::uint64_t> bytes(n);
    std::vector<std::uint64_t> staged(n);
    std::vector<SampleExtent> ex;
    for (std::uint64_t k = 0; k < n; ++k) {
      ex.clear();
      ds.extents(k, ex);
      bytes[k] = ds.sample_bytes(k);
      // Members of a sample sit apart by their tar headers (512 bytes each, and padding).
      staged[k] = bytes[k] + ex.size() * 1024 + staging_slack(bytes[k], ex.size(), planner);
    }
    batch = top_sum(bytes, b);
    reads = top_sum(staged, b);
  }
  batch = round_up(std::max<std::uint64_t>(batch, 1), arena_granule);
  const std::uint64_t stage = round_up(reads, arena_granule) + (o.target == LoadTarget::device ? batch : 0);
  m.batch_bytes = batch;
  for (unsigned k = m.prefetch_asked; k >= 1; --k) {
    if (k * stage + (k + 1) * batch <= o.memory_budget) {
      m.prefetch = k;
      m.staging_bytes = k * stage;
      m.buffer_bytes = (k + 1) * batch;
      return m;
    }
  }
  m.prefetch = 1;
  if (stage + batch <= o.memory_budget) {
    // Room for one batch only: the consumer must drop each before asking for the next.
    m.staging_bytes = stage;
    m.buffer_bytes = batch;
    return m;
  }
  if (fixed) {
    throw_usage_error({.op = "ingest"},
                      fmt::format("a batch of {} samples ({}) needs {} of staging and {} of batch buffer, {} in all: "
                                  "more than the memory budget of {}",
                                  b, format_size(batch), format_size(stage), format_size(batch),
                                  format_size(stage + batch), format_size(o.memory_budget)));
  }
  // WebDataset: the largest samples may never meet in one batch; split what there is.
  const long double share = static_cast<long double>(stage) / static_cast<long double>(stage + batch);
  m.staging_bytes = static_cast<std::uint64_t>(static_cast<long double>(o.memory_budget) * share) / arena_granule * arena_granule;
  m.buffer_bytes = (o.memory_budget - m.staging_bytes) / arena_granule * arena_granule;
  return m;
}

}  // namespace sluice::detail
