// The MPI communicator of a libsluice_tools built without MPI (SLUICE_WITH_MPI=OFF), so that
// sluice/tools/mpi.hpp links in every build and says at run time what is missing.
#include <cerrno>

#include "sluice/error.hpp"
#include "sluice/tools/mpi.hpp"

namespace sluice {

bool have_mpi() noexcept { return false; }

std::unique_ptr<Communicator> make_mpi_communicator() {
  throw_os_error(ENOSYS, {.op = "MPI_Init_thread"},
                 "this sluice was built without MPI (SLUICE_WITH_MPI=OFF): rebuild with libopenmpi-dev");
}

}  // namespace sluice
