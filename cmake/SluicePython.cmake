# Whether the Python package (python/) can be built, and if so its subdirectory. Without
# pybind11, DLPack's header or the interpreter's development headers it is left out, saying why;
# SLUICE_PYTHON_MISSING then holds the reason, for the test that stands in for the package's
# tests (tests/CMakeLists.txt).
set(SLUICE_PYTHON_MISSING "")
if(NOT SLUICE_BUILD_PYTHON)
  set(SLUICE_PYTHON_MISSING "SLUICE_BUILD_PYTHON is OFF")
else()
  set(Python3_EXECUTABLE ${SLUICE_PYTHON})
  find_package(Python3 COMPONENTS Interpreter Development.Module)
  # Only with the interpreter's headers found: without them pybind11's CMake falls back to its
  # own FindPythonLibsNew, which stops the configure with an error instead of this message.
  if(Python3_FOUND)
    find_package(pybind11 2.10 CONFIG QUIET)
  endif()
  find_path(DLPACK_INCLUDE_DIR dlpack/dlpack.h)
  if(NOT Python3_FOUND)
    set(SLUICE_PYTHON_MISSING "no headers for ${SLUICE_PYTHON} (Debian: python3-dev)")
  elseif(NOT pybind11_FOUND)
    set(SLUICE_PYTHON_MISSING "pybind11 not found (Debian: pybind11-dev)")
  elseif(NOT DLPACK_INCLUDE_DIR)
    set(SLUICE_PYTHON_MISSING "dlpack/dlpack.h not found (Debian: libdlpack-dev)")
  endif()
endif()
if(SLUICE_PYTHON_MISSING STREQUAL "")
  add_subdirectory(python)
else()
  message(STATUS "The Python package is not built: ${SLUICE_PYTHON_MISSING}")
endif()
# Asked for but not buildable: one test stands in for the package's tests and says why (a skip,
# or under SLUICE_TEST_STRICT=1, where make deps installed everything, a failure).
if(SLUICE_BUILD_PYTHON AND NOT SLUICE_PYTHON_MISSING STREQUAL "" AND SLUICE_BUILD_TESTS)
  add_test(NAME python.package COMMAND sh -c
    "echo 'the Python package is not built: $1'; [ \"$SLUICE_TEST_STRICT\" = 1 ] && exit 1; exit 77"
    sh "${SLUICE_PYTHON_MISSING}")
  set_tests_properties(python.package PROPERTIES LABELS "python" SKIP_RETURN_CODE 77)
endif()
