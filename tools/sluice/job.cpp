#include "job.hpp"

#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

#include "cli_util.hpp"
#ifdef SLUICE_WITH_MPI
#include "sluice/tools/mpi.hpp"
#endif

namespace sluice::cli {

std::unique_ptr<Communicator> job_communicator(const ClusterEnv& env) {
  if (env.world_size <= 1) return make_single_communicator();
  if (!is_mpi_launcher(env.launcher)) {
    throw UsageError(fmt::format("the environment says rank {} of {} ({}), but sluice bench needs MPI to run in "
                                 "step: start it with mpirun or srun", env.rank, env.world_size,
                                 to_string(env.launcher)));
  }
#ifdef SLUICE_WITH_MPI
  auto comm = make_mpi_communicator();
  if (comm->size() != env.world_size) {
    throw UsageError(fmt::format("the launcher ({}) says {} processes but MPI joined {} (srun needs --mpi=pmix "
                                 "or pmi2 for this MPI)", to_string(env.launcher), env.world_size, comm->size()));
  }
  return comm;
#else
  throw UsageError(fmt::format("the launcher ({}) started {} processes, but this sluice was built without MPI "
                               "(SLUICE_WITH_MPI=OFF): rebuild with libopenmpi-dev, or run one process",
                               to_string(env.launcher), env.world_size));
#endif
}

std::unique_ptr<Communicator> mpi_communicator_if_any(const ClusterEnv& env) {
#ifdef SLUICE_WITH_MPI
  if (is_mpi_launcher(env.launcher)) {
    auto comm = make_mpi_communicator();
    if (comm->size() == env.world_size) return comm;
  }
#endif
  (void)env;
  return nullptr;
}

void end_job(Communicator& comm, const ClusterEnv& env, const char* command, const std::exception& e) {
  std::fprintf(stderr, "sluice %s: rank %d on %s: error: %s (ending the job)\n", command, comm.rank(),
               env.host.c_str(), e.what());
  std::fflush(stderr);
  comm.abort(exit_code(e));
  std::abort();  // not reached: GCC does not take [[noreturn]] from a virtual function
}

}  // namespace sluice::cli
