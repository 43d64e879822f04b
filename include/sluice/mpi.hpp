// The MPI communicator (library sluice_mpi, built when CMake finds MPI: SLUICE_WITH_MPI). Only
// this library links MPI; libsluice and its users do not.
#pragma once

#include <memory>

#include "sluice/cluster.hpp"

namespace sluice {

/// Initialises MPI (MPI_THREAD_FUNNELED: only the calling thread talks to MPI) and returns the
/// communicator of MPI_COMM_WORLD; MPI_Finalize runs when it is destroyed. Throws an Error when
/// MPI cannot start. Call once per process, only under an MPI launcher (Open MPI would otherwise
/// start a singleton runtime).
[[nodiscard]] std::unique_ptr<Communicator> make_mpi_communicator();

}  // namespace sluice
