// `sluice load` across the processes of a parallel job: each process loads its share of the
// checkpoint's tensors (LoadOptions::rank/world), the ranks start together, and rank 0 combines
// their bytes and wall-clock windows the way IOR does (all bytes over the latest end minus the
// earliest start, the slowest rank named). As for bench (bench_cluster.hpp), the communicator
// comes from the caller (make_mpi_communicator, sluice/tools/mpi.hpp, or another). Part of
// libsluice_tools: libsluice never links MPI. docs/mpi.md.
#pragma once

#include <optional>

#include "sluice/export.hpp"
#include "sluice/load.hpp"
#include "sluice/tools/cluster.hpp"

namespace sluice {

/// This process's share of a load.
struct LoadShare {
  unsigned rank = 0;
  unsigned world = 1;
  bool from_env = false;  ///< the launcher's variables gave it (a job of several processes)
};

/// The share from an explicit rank and world (`rank` and `world` >= 0: both or neither; -1 for
/// neither), else from the launcher's variables when they say more than one process, else 0 of
/// 1. Throws a usage Error for a rank without a world or the reverse, a world below 1, or a rank
/// not below the world.
[[nodiscard]] SLUICE_API LoadShare load_share(int rank, int world, const ClusterEnv& env);

struct ClusterLoad {
  LoadedTensors loaded;
  /// At rank 0 of a communicator: every rank's bytes over the common window. nullopt on the
  /// other ranks and without a communicator.
  std::optional<SpanAggregate> aggregate;
};

/// Loads this process's share (options.rank and world). With `comm` (every process of it calls
/// this), the ranks start after a barrier, each one's bytes and wall-clock window of its load()
/// travel to rank 0, and rank 0 gets the aggregate. Without, a plain load(). An exception (bad
/// file, failed read) propagates on the rank that threw: the caller must end the job
/// (Communicator::abort), as the others wait for it in a collective call.
[[nodiscard]] SLUICE_API ClusterLoad load_on_cluster(Communicator* comm, const ClusterEnv& where,
                                                     const Checkpoint& checkpoint,
                                                     const LoadOptions& options);

}  // namespace sluice
