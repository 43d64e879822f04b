# The last step of `cmake --install` (cmake/SluiceInstall.cmake), with SLUICE_LIBDIR and
# SLUICE_DATADIR set: writes <prefix>/<datadir>/sluice/install_manifest.txt, every installed file
# relative to the prefix (so it still serves after the prefix is moved), for uninstall; then
# refreshes the loader's cache (cmake/SluiceLdconfig.cmake). CMake's own install_manifest.txt in
# the build tree does not serve: every install from that tree, to any prefix, overwrites it.
# A DESTDIR (package) install writes none: its package manager removes it.
if("$ENV{DESTDIR}" STREQUAL "")
  get_filename_component(_prefix "${CMAKE_INSTALL_PREFIX}" ABSOLUTE)
  set(_manifest "${_prefix}/${SLUICE_DATADIR}/sluice/install_manifest.txt")
  set(_lines "")
  foreach(_f IN LISTS CMAKE_INSTALL_MANIFEST_FILES _manifest)
    file(RELATIVE_PATH _rel "${_prefix}" "${_f}")
    string(APPEND _lines "${_rel}\n")
  endforeach()
  file(WRITE "${_manifest}" "${_lines}")
  list(APPEND CMAKE_INSTALL_MANIFEST_FILES "${_manifest}")
  message(STATUS "Installing: ${_manifest} (what make uninstall removes)")
endif()
include(${CMAKE_CURRENT_LIST_DIR}/SluiceLdconfig.cmake)
