// Where this process sits in a parallel job, and how it talks to the others. The rank, local
// rank and world size come from the launcher's environment (mpirun, srun, torchrun...), so a
// command splits its work without flags; a Communicator carries the few collective operations
// `sluice bench` and `sluice load` need (barrier, gather to rank 0, broadcast). libsluice never
// links MPI: the MPI communicator is libsluice_tools' (sluice/tools/mpi.hpp), and a job of one
// process uses the single-process communicator. docs/mpi.md.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/export.hpp"

namespace sluice {

/// Which launcher's variables the position came from.
enum class Launcher : std::uint8_t { none, openmpi, pmix, pmi, slurm, torchrun };
[[nodiscard]] SLUICE_API std::string_view to_string(Launcher l) noexcept;
/// Launchers that start an MPI job: a process may call MPI_Init and find the others.
[[nodiscard]] SLUICE_API bool is_mpi_launcher(Launcher l) noexcept;

struct ClusterEnv {
  int rank = 0;
  int local_rank = 0;  ///< among the processes on this host (selects the GPU)
  int world_size = 1;
  int local_size = 1;  ///< processes on this host (0 when the launcher does not say)
  Launcher launcher = Launcher::none;
  std::string host;  ///< this host's name
};

/// Reads a variable; nullopt when unset. Tests pass a map, the CLI the process environment.
using EnvLookup = std::function<std::optional<std::string>(const char* name)>;

/// The position from the first launcher whose variables are set, in this order: Open MPI
/// (OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK/LOCAL_SIZE), PMIx (PMIX_RANK with PMI_SIZE or
/// OMPI_COMM_WORLD_SIZE), PMI/MPICH (PMI_RANK, PMI_SIZE, MPI_LOCALRANKID), Slurm job steps
/// (SLURM_PROCID, SLURM_STEP_NUM_TASKS or SLURM_NTASKS, SLURM_LOCALID; only inside a step, so a
/// batch script is not mistaken for rank 0 of N) and torchrun (RANK, WORLD_SIZE, LOCAL_RANK,
/// LOCAL_WORLD_SIZE). None: rank 0 of 1. A variable that is not a number, or a rank outside the
/// world, throws a usage Error naming it.
[[nodiscard]] SLUICE_API ClusterEnv detect_cluster_env(const EnvLookup& env);
/// The same from the process environment, with this host's name.
[[nodiscard]] SLUICE_API ClusterEnv detect_cluster_env();
/// gethostname(), short of nothing ("" when it fails).
[[nodiscard]] SLUICE_API std::string host_name();

/// Replaces {rank}, {local_rank}, {world_size} and {host} in a path or device spec ("{{" and
/// "}}" are literal braces). Any other {name} throws a usage Error listing the four.
[[nodiscard]] SLUICE_API std::string expand_placeholders(std::string_view text,
                                                         const ClusterEnv& where);
/// Whether the text has a placeholder.
[[nodiscard]] SLUICE_API bool has_placeholders(std::string_view text) noexcept;

/// The NUMA node of a PCI function from sysfs (bus id "0000:17:00.0"), -1 when unknown.
[[nodiscard]] SLUICE_API int pci_numa_node(std::string_view bus_id);

/// One process's share of a job-wide operation (sluice load under MPI): bytes moved between
/// two wall-clock instants (unix seconds).
struct RankSpan {
  int rank = 0;
  std::string host;
  std::uint64_t bytes = 0;
  double start = 0;
  double end = 0;
  std::string error;
};
/// The spans as one line of text and back (what travels to rank 0).
[[nodiscard]] SLUICE_API std::string to_wire(const RankSpan& s);
[[nodiscard]] SLUICE_API RankSpan span_from_wire(std::string_view text);

/// IOR's aggregate over the ranks: all bytes over (latest end - earliest start), with the
/// slowest rank (lowest bytes over its own time).
struct SpanAggregate {
  int ranks = 0;
  std::uint64_t bytes = 0;
  double start = 0, end = 0, seconds = 0;
  double gib_per_s = 0;
  int slowest_rank = 0;
  std::string slowest_host;
  double slowest_gib_per_s = 0;
  std::string error;  ///< "rank R on HOST: ..." of the first failed rank
};
[[nodiscard]] SLUICE_API SpanAggregate aggregate_spans(const std::vector<RankSpan>& spans);
/// Wall-clock now, unix seconds.
[[nodiscard]] SLUICE_API double unix_now();

/// The collective operations the commands need. Every process of the job must make the same
/// calls in the same order.
class SLUICE_API Communicator {
 public:
  virtual ~Communicator() = default;
  [[nodiscard]] virtual int rank() const noexcept = 0;
  [[nodiscard]] virtual int size() const noexcept = 0;
  /// "mpi" or "single".
  [[nodiscard]] virtual std::string_view kind() const noexcept = 0;
  virtual void barrier() = 0;
  /// Every process's string, in rank order, at `root`; the others get an empty vector.
  [[nodiscard]] virtual std::vector<std::string> gather(const std::string& mine, int root = 0) = 0;
  /// Root's string at every process.
  [[nodiscard]] virtual std::string broadcast(const std::string& value, int root = 0) = 0;
  /// Every process's string, in rank order, at every process (the fan-out's status exchange).
  /// Default: gather at 0, then each string broadcast.
  [[nodiscard]] virtual std::vector<std::string> allgather(const std::string& mine);
  /// `size` bytes at `data` from `root` to every process (MPI_Bcast). The default (one process)
  /// has nothing to move; it throws for more.
  virtual void broadcast_bytes(void* data, std::size_t size, int root);
  /// Point to point, blocking: the fan-out's moves to some ranks only. The default throws.
  virtual void send_bytes(const void* data, std::size_t size, int dest);
  virtual void recv_bytes(void* data, std::size_t size, int source);
  /// The first-done signal (--stonewall first): a one-shot flag any process raises when it
  /// finishes a phase, which every other process polls while its own phase runs. arm_done()
  /// before the phase (a second call before settle_done() does nothing); raise_done() from a
  /// process that finished on its own; done_raised() polls (from the thread that called MPI);
  /// settle_done(), a collective after the phase, consumes every signal sent.
  virtual void arm_done() {}
  virtual void raise_done() {}
  [[nodiscard]] virtual bool done_raised() { return false; }
  virtual void settle_done() {}
  /// Ends every process of the job (after a failure that the others cannot learn of by a
  /// collective call, e.g. an exception before one). Does not return.
  [[noreturn]] virtual void abort(int code) = 0;
};

/// The communicator of a job of one process.
[[nodiscard]] SLUICE_API std::unique_ptr<Communicator> make_single_communicator();

}  // namespace sluice
