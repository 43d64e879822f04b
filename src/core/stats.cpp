#include "sluice/stats.hpp"

#include <pthread.h>

#include "core/shared_stats.hpp"

namespace sluice {

void Stats::record(Path p, Direction d, std::uint64_t bytes, std::uint64_t ios, std::uint64_t ns,
                   bool error) noexcept {
  const auto pi = static_cast<std::size_t>(p);
  const auto di = static_cast<std::size_t>(d);
  auto& c = paths_[pi][di];
  constexpr auto relaxed = std::memory_order_relaxed;
  c.bytes.fetch_add(bytes, relaxed);
  c.ops.fetch_add(1, relaxed);
  c.ios.fetch_add(ios, relaxed);
  c.nanoseconds.fetch_add(ns, relaxed);
  if (error) c.errors.fetch_add(1, relaxed);
  if (shared_ != nullptr) {
    auto& s = shared_->paths[pi][di];
    s.bytes.fetch_add(bytes, relaxed);
    s.ops.fetch_add(1, relaxed);
    s.ios.fetch_add(ios, relaxed);
    s.nanoseconds.fetch_add(ns, relaxed);
    if (error) s.errors.fetch_add(1, relaxed);
    shared_->updated_unix_ns.store(detail::unix_ns(), relaxed);
  }
}

void Stats::count_staging_wait() noexcept {
  staging_waits_.fetch_add(1, std::memory_order_relaxed);
  if (shared_ != nullptr) shared_->staging_waits.fetch_add(1, std::memory_order_relaxed);
}

StatsSnapshot Stats::snapshot() const noexcept {
  StatsSnapshot s;
  constexpr auto relaxed = std::memory_order_relaxed;
  for (std::size_t p = 0; p < path_count; ++p) {
    for (std::size_t d = 0; d < 2; ++d) {
      const auto& a = paths_[p][d];
      s.paths[p][d] = {a.bytes.load(relaxed), a.ops.load(relaxed), a.ios.load(relaxed),
                       a.errors.load(relaxed), a.nanoseconds.load(relaxed)};
    }
  }
  s.staging_waits = staging_waits_.load(relaxed);
  return s;
}

void Stats::reset() noexcept {
  for (auto& row : paths_) {
    for (auto& a : row) {
      a.bytes = 0;
      a.ops = 0;
      a.ios = 0;
      a.errors = 0;
      a.nanoseconds = 0;
    }
  }
  staging_waits_ = 0;
  if (shared_ != nullptr) {
    for (auto& row : shared_->paths) {
      for (auto& a : row) {
        a.bytes = 0;
        a.ops = 0;
        a.ios = 0;
        a.errors = 0;
        a.nanoseconds = 0;
      }
    }
    shared_->staging_waits = 0;
  }
}

Stats& stats() noexcept {
  static Stats s;
  static const bool attached = [] {
    s.shared_ = detail::attach_published_stats();
    // A forked child must not add its counts to its parent's segment.
    if (s.shared_ != nullptr) ::pthread_atfork(nullptr, nullptr, [] { stats().shared_ = nullptr; });
    return true;
  }();
  (void)attached;
  return s;
}

namespace {
// Publishing starts when the library loads, so a publisher is visible before its first transfer.
[[maybe_unused]] const bool publish_at_load = (stats(), true);
}  // namespace

}  // namespace sluice
