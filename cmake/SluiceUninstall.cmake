# cmake -P script behind `make uninstall` and the `uninstall` target: removes what the last
# install into PREFIX put down, as listed (relative to the prefix) in
# <prefix>/<DATADIR>/sluice/install_manifest.txt, which the install wrote (cmake/SluiceInstall.cmake).
# Then it removes the folders left empty, except the prefix and its direct children (bin, lib,
# include, share, ...: they belong to the system), and a folder with anything else in it is never
# touched. Then it refreshes the loader's cache as the install did (cmake/SluiceLdconfig.cmake).
# -D: PREFIX, DATADIR (default share). A DESTDIR install writes no manifest (a package is
# removed by its package manager).
cmake_minimum_required(VERSION 3.25)
if(NOT PREFIX)
  message(FATAL_ERROR "usage: cmake -DPREFIX=<prefix> [-DDATADIR=share] -P SluiceUninstall.cmake")
endif()
if(NOT DATADIR)
  set(DATADIR share)
endif()
get_filename_component(prefix "${PREFIX}" ABSOLUTE)
set(manifest "${prefix}/${DATADIR}/sluice/install_manifest.txt")
if(NOT EXISTS "${manifest}")
  message(FATAL_ERROR "nothing to uninstall: ${manifest} not found (no sluice install in ${prefix})")
endif()
file(STRINGS "${manifest}" files)

set(parents "")
set(libdir "")
foreach(rel IN LISTS files)
  set(f "${prefix}/${rel}")
  if(EXISTS "${f}" OR IS_SYMLINK "${f}")
    message(STATUS "Removing ${f}")
    file(REMOVE "${f}")
  endif()
  get_filename_component(d "${f}" DIRECTORY)
  list(APPEND parents "${d}")
  # Python's compiled copies of an installed module (__pycache__/NAME.cpython-311.pyc), made on
  # import, go with it.
  if(rel MATCHES "\\.py$")
    get_filename_component(stem "${f}" NAME_WE)
    file(GLOB compiled "${d}/__pycache__/${stem}.*.pyc")
    if(compiled)
      file(REMOVE ${compiled})
      list(APPEND parents "${d}/__pycache__")
    endif()
  endif()
  if(rel MATCHES "^(.*)/libsluice\\.so\\.[0-9]+$")
    set(libdir "${CMAKE_MATCH_1}")
  endif()
endforeach()
# A folder emptied here queues its parent, which may have been looked at (not yet empty) before.
list(REMOVE_DUPLICATES parents)
while(parents)
  list(POP_FRONT parents d)
  get_filename_component(up "${d}" DIRECTORY)
  string(FIND "${up}/" "${prefix}/" at)
  if(NOT at EQUAL 0 OR up STREQUAL prefix OR NOT IS_DIRECTORY "${d}" OR IS_SYMLINK "${d}")
    continue()  # outside the prefix, the prefix itself or one of its direct children
  endif()
  file(GLOB left "${d}/*" "${d}/.*")
  if(left STREQUAL "")
    message(STATUS "Removing ${d}/")
    file(REMOVE_RECURSE "${d}")  # empty: checked just above
    list(APPEND parents "${up}")
  endif()
endwhile()

if(libdir)
  set(CMAKE_INSTALL_PREFIX "${prefix}")
  set(SLUICE_LIBDIR "${libdir}")
  set(SLUICE_UNINSTALLING TRUE)
  include("${CMAKE_CURRENT_LIST_DIR}/SluiceLdconfig.cmake")
endif()
