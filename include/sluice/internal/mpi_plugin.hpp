// The seam between libsluice_tools and its MPI plugin, libsluice_mpi.so (src/cluster/
// mpi_comm.cpp, the only code that calls MPI). libsluice_tools loads the plugin with dlopen when a
// program first asks for the MPI communicator, so the `sluice` CLI and every other program of
// libsluice_tools start without loading MPI's libraries (libmpi, libopen-rte, libopen-pal,
// libevent: 3-5 ms of every command here) and start at all where they are not installed.
// Both sides are built from one source tree at once; the name carries a version for safety.
#pragma once

namespace sluice {

class Communicator;

/// File name of the plugin, looked for beside libsluice_tools.
inline constexpr const char* mpi_plugin_file = "libsluice_mpi.so";
/// The entry point: a new Communicator over MPI_COMM_WORLD (MPI initialised by it, finalised when
/// it is destroyed), owned by the caller. Throws sluice::Error when MPI cannot start.
inline constexpr const char* mpi_plugin_entry = "sluice_mpi_plugin_make_communicator";
using MpiPluginEntry = Communicator* (*)();

}  // namespace sluice
