# sluice_origin_rpath(TARGET FROM_DIR): an installed TARGET, put in FROM_DIR (relative to the prefix,
# or absolute), finds the libraries of CMAKE_INSTALL_LIBDIR through a RUNPATH relative to its own
# folder ($ORIGIN/...), so the prefix can be anything and can be moved. Folders that are relative
# to the prefix (the usual case) keep the RUNPATH relative.
function(sluice_origin_rpath target from_dir)
  if(IS_ABSOLUTE "${from_dir}" OR IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
    file(RELATIVE_PATH rel "${CMAKE_INSTALL_PREFIX}/${from_dir}" "${CMAKE_INSTALL_FULL_LIBDIR}")
  else()
    file(RELATIVE_PATH rel "/${from_dir}" "/${CMAKE_INSTALL_LIBDIR}")
  endif()
  set_target_properties(${target} PROPERTIES INSTALL_RPATH "$ORIGIN/${rel}")
endfunction()
