// Test hook, not user API (the contract of include/sluice/testing/: exported, unstable, may
// change in any release): zeroing counters, which an application never needs (it subtracts two
// snapshots) and which would make the published counters (sluice stats) go backwards.
#pragma once

#include "sluice/export.hpp"
#include "sluice/stats.hpp"

namespace sluice {

/// Zeroes every counter of `s` (and of its published segment, for stats()); only while no
/// transfer runs.
SLUICE_API void reset_stats(Stats& s) noexcept;

}  // namespace sluice
