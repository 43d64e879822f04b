# MPI (optional): `sluice bench` and `sluice load` across the processes of an MPI job. Only
# src/cluster/mpi_comm.cpp calls MPI; it is built as the plugin libsluice_mpi.so, which
# libsluice_tools loads with dlopen the first time a program asks for the MPI communicator
# (src/cluster/mpi_plugin.cpp; sluice/internal/mpi_plugin.hpp says why). Neither libsluice nor
# libsluice_tools links MPI, so `sluice` starts without it. Without MPI, src/cluster/mpi_none.cpp
# stands in: make_mpi_communicator() throws (ENOSYS) saying so. The portable kit stays glibc-only,
# hence off there by default.
# Included from src/CMakeLists.txt: adds to sluice_tools_objects and defines target sluice_mpi.
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
  target_sources(sluice_tools_objects PRIVATE ${PROJECT_SOURCE_DIR}/src/cluster/mpi_plugin.cpp)
  target_compile_definitions(sluice_tools_objects PRIVATE SLUICE_WITH_MPI=1)
  list(APPEND SLUICE_TOOLS_LINK ${CMAKE_DL_LIBS})
  # The plugin: beside libsluice_tools in the build tree and in the install, where
  # mpi_plugin.cpp looks for it. Hidden visibility but for its one extern "C" entry point.
  add_library(sluice_mpi MODULE ${PROJECT_SOURCE_DIR}/src/cluster/mpi_comm.cpp)
  set_target_properties(sluice_mpi PROPERTIES CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON
                                              LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}
                                              INSTALL_RPATH "$ORIGIN")
  # OMPI/MPICH: no C++ bindings.
  target_compile_definitions(sluice_mpi PRIVATE OMPI_SKIP_MPICXX=1 MPICH_SKIP_MPICXX=1)
  target_link_libraries(sluice_mpi PRIVATE sluice_tools sluice MPI::MPI_C ${SLUICE_FMT} sluice_warnings)
  target_link_options(sluice_mpi PRIVATE "LINKER:--no-undefined")
  message(STATUS "sluice: MPI ${MPI_C_VERSION} (${MPI_C_LIB_NAMES}): sluice bench/load run under mpirun "
                 "(plugin libsluice_mpi.so, loaded on first use)")
else()
  target_sources(sluice_tools_objects PRIVATE ${PROJECT_SOURCE_DIR}/src/cluster/mpi_none.cpp)
  message(STATUS "sluice: without MPI (SLUICE_WITH_MPI=OFF): sluice bench runs one process")
endif()
