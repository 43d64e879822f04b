# MPI (optional): `sluice bench` and `sluice load` across the processes of an MPI job. Only
# src/cluster/mpi_comm.cpp calls MPI; it goes into libsluice_tools, which then links MPI (libsluice
# never does). Without MPI, src/cluster/mpi_none.cpp stands in: make_mpi_communicator() throws
# (ENOSYS) saying so. The portable kit stays glibc-only, hence off there by default.
# Included from src/CMakeLists.txt: adds to sluice_tools_objects and SLUICE_TOOLS_LINK.
find_package(MPI COMPONENTS C QUIET)
if(MPI_C_FOUND AND NOT SLUICE_PORTABLE)
  set(_sluice_mpi_default ON)
else()
  set(_sluice_mpi_default OFF)
endif()
option(SLUICE_WITH_MPI "Build the MPI communicator (sluice bench/load under mpirun or srun)" ${_sluice_mpi_default})
if(SLUICE_WITH_MPI)
  if(NOT MPI_C_FOUND)
    message(FATAL_ERROR "SLUICE_WITH_MPI is ON but CMake found no MPI (Debian: apt-get install libopenmpi-dev)")
  endif()
  target_sources(sluice_tools_objects PRIVATE ${PROJECT_SOURCE_DIR}/src/cluster/mpi_comm.cpp)
  # SLUICE_WITH_MPI=1: what the library's code may test; OMPI/MPICH: no C++ bindings.
  target_compile_definitions(sluice_tools_objects PRIVATE SLUICE_WITH_MPI=1
                                                   OMPI_SKIP_MPICXX=1 MPICH_SKIP_MPICXX=1)
  target_link_libraries(sluice_tools_objects PRIVATE MPI::MPI_C)
  list(APPEND SLUICE_TOOLS_LINK MPI::MPI_C)
  message(STATUS "sluice: MPI ${MPI_C_VERSION} (${MPI_C_LIB_NAMES}): sluice bench/load run under mpirun")
else()
  target_sources(sluice_tools_objects PRIVATE ${PROJECT_SOURCE_DIR}/src/cluster/mpi_none.cpp)
  message(STATUS "sluice: without MPI (SLUICE_WITH_MPI=OFF): sluice bench runs one process")
endif()
