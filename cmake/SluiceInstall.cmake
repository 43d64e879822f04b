# Installation: headers, libsluice, libsluice_tools, the sluice CLI, the CMake package and the
# pkg-config files (libsluice_cufile and its drop-in link are installed by capi/CMakeLists.txt).
# docs/build.md says what goes where. Headers: include/sluice/ (libsluice's API), its tools/
# (libsluice_tools) and testing/ (test hooks, exported but unstable); not internal/, the
# interfaces between Sluice's own libraries, which only this source tree builds against.
#
# An installed program finds the libraries installed beside it for any prefix, and after the
# prefix is moved: its RUNPATH is relative to its own folder ($ORIGIN/../lib), never a build-tree
# or absolute path. Installing as root into a prefix whose library folder the loader searches
# (/usr/local/lib, /usr/lib/...) runs ldconfig, so that programs linked against libsluice there
# run too. The install lists its files in <prefix>/share/sluice/install_manifest.txt, from which
# `make uninstall` removes them (cmake/SluiceUninstall.cmake).


install(DIRECTORY include/sluice DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        PATTERN internal EXCLUDE)
install(FILES ${PROJECT_BINARY_DIR}/generated/sluice/version.hpp
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/sluice)
install(TARGETS sluice sluice_tools EXPORT sluiceTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# libsluice_tools finds libsluice beside it also for a program that links only libsluice_tools
# (a RUNPATH applies to its own object's dependencies, not to those of the libraries it loads).
set_target_properties(sluice_tools PROPERTIES INSTALL_RPATH "$ORIGIN")
# The MPI plugin goes beside libsluice_tools, where src/cluster/mpi_plugin.cpp looks for it.
if(TARGET sluice_mpi)
  install(TARGETS sluice_mpi LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()
sluice_origin_rpath(sluice_cli ${CMAKE_INSTALL_BINDIR})
install(TARGETS sluice_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(EXPORT sluiceTargets NAMESPACE sluice:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/sluice)
configure_package_config_file(cmake/sluiceConfig.cmake.in
  ${PROJECT_BINARY_DIR}/sluiceConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/sluice)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/sluiceConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/sluiceConfig.cmake
              ${PROJECT_BINARY_DIR}/sluiceConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/sluice)
# The .pc file finds the prefix from its own folder (relocatable), whatever the libdir's depth
# (lib, or lib/x86_64-linux-gnu for prefix /usr).
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(SLUICE_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH _pc_up "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")
  string(REGEX REPLACE "/$" "" _pc_up "${_pc_up}")
  set(SLUICE_PC_PREFIX "\${pcfiledir}/${_pc_up}")
endif()
configure_file(cmake/sluice.pc.in ${PROJECT_BINARY_DIR}/sluice.pc @ONLY)
configure_file(cmake/sluice-tools.pc.in ${PROJECT_BINARY_DIR}/sluice-tools.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/sluice.pc ${PROJECT_BINARY_DIR}/sluice-tools.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# What `make install` builds first: what the install rules above and capi/'s put down, and the
# Python package when it is built (python/CMakeLists.txt), not the tests.
add_custom_target(sluice_installables)
add_dependencies(sluice_installables sluice_cli sluice sluice_tools sluice_cufile)
if(TARGET sluice_python)
  add_dependencies(sluice_installables sluice_python)
endif()
if(TARGET sluice_mpi)
  add_dependencies(sluice_installables sluice_mpi)
endif()

# Last install steps (CMP0082 keeps install rules in declaration order): the manifest that
# uninstall reads, then ldconfig.
install(CODE "set(SLUICE_LIBDIR \"${CMAKE_INSTALL_LIBDIR}\")
              set(SLUICE_DATADIR \"${CMAKE_INSTALL_DATADIR}\")")
install(SCRIPT ${PROJECT_SOURCE_DIR}/cmake/SluicePostInstall.cmake)

# The configured prefix; make uninstall passes the one it installed to.
add_custom_target(uninstall
  COMMAND ${CMAKE_COMMAND} -DPREFIX=${CMAKE_INSTALL_PREFIX} -DDATADIR=${CMAKE_INSTALL_DATADIR}
          -P ${PROJECT_SOURCE_DIR}/cmake/SluiceUninstall.cmake
  COMMENT "Removing the sluice install in ${CMAKE_INSTALL_PREFIX}"
  VERBATIM)
