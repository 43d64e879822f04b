// `sluice load --fanout` across the processes of a job: every rank ends holding the whole
// checkpoint in host memory while the job reads each byte from storage once (scope job) or once
// per node (scope node). Every rank computes the same plan (plan_fanout, sluice/fanout.hpp),
// reads the ranges the plan gives it, and the moves go over the Communicator (broadcast or
// send/receive). Before each move the ranks exchange a status, so a rank that cannot read makes
// every rank fail with an Error naming that rank, the file and the range, instead of leaving the
// others waiting for bytes that never come. docs/mpi.md, docs/scale.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "sluice/error.hpp"
#include "sluice/export.hpp"
#include "sluice/fanout.hpp"
#include "sluice/formats.hpp"
#include "sluice/tools/cluster.hpp"

namespace sluice {

/// The error every rank throws, together, when a rank failed to open or read: the ranks are all
/// in step (no collective call is pending), so each may report it and exit on its own.
class SLUICE_API FanoutJobError : public Error {
 public:
  using Error::Error;
};

/// What one rank did, and the job's totals (the same on every rank).
struct FanoutLoadStats {
  FanoutScope scope = FanoutScope::job;
  unsigned nodes = 1;
  std::uint64_t read_bytes = 0;      ///< bytes this rank read from storage
  std::uint64_t sent_bytes = 0;      ///< bytes this rank sent, once per receiver
  std::uint64_t received_bytes = 0;  ///< bytes moved to this rank
  double read_seconds = 0;           ///< waiting on this rank's own reads
  double move_seconds = 0;           ///< in status exchanges and moves
  double seconds = 0;                ///< the whole load on this rank
  std::uint64_t unique_bytes = 0;    ///< the checkpoint's tensor bytes, each counted once
  std::uint64_t job_read_bytes = 0;  ///< bytes read from storage, summed over ranks (the plan's)
  std::size_t reads = 0;             ///< reads (chunks) of the job's plan
  [[nodiscard]] double amplification() const noexcept {
    return unique_bytes == 0
               ? 1.0
               : static_cast<double>(job_read_bytes) / static_cast<double>(unique_bytes);
  }
};

struct FanoutLoaded {
  /// Each tensor's bytes in host memory, in Checkpoint::tensors() order.
  std::vector<std::vector<std::byte>> tensors;
  FanoutLoadStats stats;
};

/// Opens the checkpoint on every rank of `comm` (every rank calls this). A rank that cannot
/// open it makes every rank throw an Error naming that rank and its error.
[[nodiscard]] SLUICE_API Checkpoint open_on_every_rank(Communicator& comm,
                                                       const std::vector<std::string>& paths);

/// Loads the whole checkpoint on every rank of `comm` (every rank calls this), reading each
/// byte once per scope group: reads and moves are at most `exchange_budget` bytes, and a rank's
/// next read is in flight while the current chunk moves. Ranks on the same `env.host` form a
/// node. Throws on every rank when any rank fails to read (the Error names rank, file, range).
[[nodiscard]] SLUICE_API FanoutLoaded load_fanout(Communicator& comm, const ClusterEnv& env,
                                                  const Checkpoint& checkpoint, FanoutScope scope,
                                                  std::uint64_t exchange_budget);

/// XXH3-64 (seed 0) of host bytes, as LoadedTensors::xxh3 gives for a loaded tensor.
[[nodiscard]] SLUICE_API std::uint64_t host_xxh3(const std::vector<std::byte>& bytes) noexcept;

}  // namespace sluice
