// How the Loader splits its memory budget: a staging region (reads land there, aligned) and a
// batch-buffer region (what the consumer's batches live in), both allocated once.
#pragma once

#include "batch_plan.hpp"
#include "ingest_stats.hpp"
#include "sluice/ingest.hpp"

namespace sluice::detail {

/// The regions for `prefetch` batches ahead plus one the consumer holds, prefetch shrunk to what
/// fits `memory_budget`. Throws a usage Error when one fixed-shape batch cannot fit at all.
/// WebDataset batches vary: they are sized by the B largest samples, and a budget too small for
/// that is split in proportion (a batch that then does not fit fails when it comes, naming it).
[[nodiscard]] MemoryPlan plan_memory(const Dataset& ds, const IngestOptions& o, const BatchPlanner& planner);

}  // namespace sluice::detail
