// The communicator of a command run as every process of a parallel job (sluice bench, sluice
// load), and how a rank that failed ends the job. The MPI communicator is libsluice_tools'
// (sluice/tools/mpi.hpp), and choosing it is the CLI's part; what the ranks do together is the
// library's (sluice/tools/bench_cluster.hpp, sluice/tools/load_cluster.hpp). docs/mpi.md.
#pragma once

#include <exception>
#include <memory>

#include "sluice/tools/cluster.hpp"

namespace sluice::cli {

/// For commands that must run in step (bench): the single-process communicator for a job of
/// one, MPI under an MPI launcher. A UsageError where the environment says several processes
/// but MPI cannot join them (no MPI launcher, a build without MPI, a size mismatch).
[[nodiscard]] std::unique_ptr<Communicator> job_communicator(const ClusterEnv& env);

/// For commands whose ranks can also work alone (load): MPI when this sluice has it, an MPI
/// launcher started the job and MPI joined as many processes as the launcher says; otherwise
/// null, and each process reports only its own figures (torchrun, or a build without MPI).
[[nodiscard]] std::unique_ptr<Communicator> mpi_communicator_if_any(const ClusterEnv& env);

/// A rank failed before a collective call the others wait in: prints the error naming the rank
/// and host ("sluice COMMAND: rank R on HOST: error: ... (ending the job)") and ends every
/// process with the error's exit code.
[[noreturn]] void end_job(Communicator& comm, const ClusterEnv& env, const char* command,
                          const std::exception& e);

}  // namespace sluice::cli
