#include "sluice/stats.hpp"

namespace sluice {

void Stats::record(Path p, Direction d, std::uint64_t bytes, std::uint64_t ios, std::uint64_t ns,
                   bool error) noexcept {
  auto& c = paths_[static_cast<std::size_t>(p)][static_cast<std::size_t>(d)];
  constexpr auto relaxed = std::memory_order_relaxed;
  c.bytes.fetch_add(bytes, relaxed);
  c.ops.fetch_add(1, relaxed);
  c.ios.fetch_add(ios, relaxed);
  c.nanoseconds.fetch_add(ns, relaxed);
  if (error) c.errors.fetch_add(1, relaxed);
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
}

Stats& stats() noexcept {
  static Stats s;
  return s;
}

}  // namespace sluice
