# Run at the end of `cmake --install` (cmake/SluicePostInstall.cmake) and of uninstall
# (cmake/SluiceUninstall.cmake), with SLUICE_LIBDIR (relative to CMAKE_INSTALL_PREFIX, or absolute).
#
# The installed sluice needs no ldconfig (its RUNPATH is $ORIGIN-relative), but a program linked
# with -lsluice finds libsluice.so.0 through the loader's cache only. So: root, no DESTDIR (a
# package build stages files; the package's own trigger runs ldconfig) and a folder the loader
# searches -> refresh the cache; otherwise say what a program linked against the library needs.
if(IS_ABSOLUTE "${SLUICE_LIBDIR}")
  set(_libdir "${SLUICE_LIBDIR}")
else()
  set(_libdir "${CMAKE_INSTALL_PREFIX}/${SLUICE_LIBDIR}")
endif()
get_filename_component(_libdir "${_libdir}" ABSOLUTE)
find_program(_ldconfig ldconfig PATHS /sbin /usr/sbin)
if(NOT "$ENV{DESTDIR}" STREQUAL "" OR NOT _ldconfig)
  return()
endif()
# ldconfig -v lists the folders it searches ("/usr/local/lib: (from /etc/ld.so.conf.d/...)");
# -N -X: read only, change nothing.
execute_process(COMMAND ${_ldconfig} -v -N -X OUTPUT_VARIABLE _listing ERROR_QUIET)
string(REGEX MATCHALL "(^|\n)/[^:\n]*:" _dirs "${_listing}")
set(_searched FALSE)
foreach(_d IN LISTS _dirs)
  string(REGEX REPLACE "^\n?(.*):$" "\\1" _d "${_d}")
  get_filename_component(_d "${_d}" REALPATH)
  get_filename_component(_l "${_libdir}" REALPATH)
  if(_d STREQUAL _l)
    set(_searched TRUE)
  endif()
endforeach()
execute_process(COMMAND id -u OUTPUT_VARIABLE _uid OUTPUT_STRIP_TRAILING_WHITESPACE)
if(_searched AND _uid STREQUAL "0")
  message(STATUS "Running ldconfig (${_libdir} is on the loader's path)")
  execute_process(COMMAND ${_ldconfig} RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    message(WARNING "ldconfig failed (${_rc}): programs linked with -lsluice may not find libsluice.so.0")
  endif()
elseif(_searched AND SLUICE_UNINSTALLING)
  message(STATUS "Not root: run `sudo ldconfig` to drop libsluice from the loader's cache")
elseif(_searched)
  message(STATUS "Not root: run `sudo ldconfig` so that programs linked with -lsluice find libsluice.so.0")
elseif(NOT SLUICE_UNINSTALLING)
  message(STATUS "${_libdir} is not on the loader's path: the installed sluice finds its libraries "
                 "through its RUNPATH; a program you link with -lsluice needs -Wl,-rpath,${_libdir} "
                 "(CMake's find_package(sluice) adds it) or LD_LIBRARY_PATH")
endif()
