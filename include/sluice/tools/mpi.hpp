// The MPI communicator, in libsluice_tools: with MPI where CMake found it when Sluice was built
// (SLUICE_WITH_MPI), else a stand-in that says so. Only libsluice_tools links MPI; libsluice
// does not.
#pragma once

#include <memory>

#include "sluice/export.hpp"
#include "sluice/tools/cluster.hpp"

namespace sluice {

/// Whether this libsluice_tools was built with MPI.
[[nodiscard]] SLUICE_API bool have_mpi() noexcept;

/// Initialises MPI (MPI_THREAD_FUNNELED: only the calling thread talks to MPI) and returns the
/// communicator of MPI_COMM_WORLD; MPI_Finalize runs when it is destroyed. Throws an Error when
/// MPI cannot start, and one with ENOSYS when this build has no MPI. Call once per process,
/// only under an MPI launcher (Open MPI would otherwise start a singleton runtime).
[[nodiscard]] SLUICE_API std::unique_ptr<Communicator> make_mpi_communicator();

}  // namespace sluice
