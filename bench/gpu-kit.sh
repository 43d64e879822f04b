#!/usr/bin/env bash
# Builds what bench/gpu-check.sh needs on a GPU machine that lacks this build's Debian packages,
# as one folder that needs nothing but glibc and libgcc_s (the `portable` preset links liburing,
# fmt, GoogleTest and libstdc++ statically; CMakeLists.txt says why libgcc stays shared):
#
#   bench/gpu-kit.sh [KIT]        (default build/gpu-kit)
#
#   KIT/bin/         sluice, sluice_gpu_bench, sluice_load_bench, sluice_async_read_bench, read_to_gpu_dropin
#   KIT/lib/         libsluice.so.0, libsluice_tools.so.0, libsluice_cufile.so.0,
#                    sluice/libcufile.so.0 (the drop-in), cmake/sluice/ (the CMake package)
#   KIT/include/     sluice/ (libsluice's headers), sluice/cufile.h
#   KIT/tests/       test_real_gpu (the gpu-labelled tests)
#   KIT/python-src/  what builds the Python package there (below)
#   KIT/bench/       save.py, ingest-vs-dataloader.py (+ benchlib.py): the Python benchmarks gpu-check.sh runs
#                    into cuda:0, of this commit, so they match the package python-src/ builds
#
# The Python package is not prebuilt: its extension is compiled for one interpreter's ABI, and
# the GPU machine's python3 (a pip or conda one, with its own torch) is not known here. What the
# kit carries instead is the smallest thing that builds it there with that machine's CMake and
# C++ compiler, against the kit's prebuilt libsluice (its public headers and CMake package):
#   python-src/CMakeLists.txt       a small project (written below) that finds sluice::sluice in
#                                   the kit and includes cmake/SluicePython.cmake, so pybind11,
#                                   DLPack and the interpreter are looked for, and a missing one
#                                   named, exactly as in the project's own build
#   python-src/cmake/, python/      copies of cmake/SluicePython.cmake and python/ (sources,
#                                   pure-Python modules, tests), of this commit
#   python-src/deps/                Debian's pybind11 (header-only: include/pybind11 and
#                                   lib/cmake/pybind11, which finds its headers relative to
#                                   itself) and DLPack's include/dlpack/dlpack.h
# This beats building the whole project there (liburing, fmt, CLI11, nlohmann-json missing) and
# shipping wheels per Python version. gpu-check.sh builds it with -DSLUICE_PYTHON=<its python3>
# and may hand it a newer pybind11 (-Dpybind11_DIR) than Debian's 2.10.
#
# Then, on the GPU machine: bench/gpu-check.sh --prebuilt KIT
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
kit=$(realpath -m "${1:-$here/build/gpu-kit}")  # absolute: the install rules need one
build=$here/build/portable
for need in /usr/include/pybind11/pybind11.h /usr/lib/cmake/pybind11/pybind11Config.cmake /usr/include/dlpack/dlpack.h; do
  [ -f "$need" ] || { echo "gpu-kit.sh: no $need (Debian: pybind11-dev, libdlpack-dev; make deps)" >&2; exit 1; }
done
# The package is built on the GPU machine, not here (SLUICE_BUILD_PYTHON=OFF).
cmake --preset portable -DSLUICE_BUILD_TESTS=ON -DSLUICE_BUILD_PYTHON=OFF >/dev/null
cmake --build "$build" -j "$(nproc)" --target sluice_cli sluice_gpu_bench sluice_load_bench sluice_async_read_bench test_real_gpu sluice_cufile cufile_dropin_read_to_gpu
rm -rf "$kit"
cmake --install "$build" --prefix "$kit" >/dev/null
cp "$build/bin/sluice_gpu_bench" "$build/bin/sluice_load_bench" "$build/bin/sluice_async_read_bench" "$kit/bin/"
# read_to_gpu linked against a libcufile.so.0 SONAME and no RUNPATH: runs on whichever library
# LD_LIBRARY_PATH finds (gpu-check.sh uses it where the GPU machine has no C compiler).
cp "$build/tests/cufile/read_to_gpu_dropin" "$kit/bin/"
mkdir -p "$kit/tests"
cp "$build/tests/gpu/test_real_gpu" "$kit/tests/"
rm -rf "$kit/lib/pkgconfig" "$kit/share/sluice/install_manifest.txt"
find "$kit/share" -depth -type d -empty -delete 2>/dev/null || true
# The Python benchmarks gpu-check.sh runs with the package (it prefers these to its checkout's).
mkdir -p "$kit/bench"
cp "$here/bench/save.py" "$here/bench/ingest-vs-dataloader.py" "$here/bench/benchlib.py" "$kit/bench/"

# The Python package's sources and build dependencies (see above).
py=$kit/python-src
mkdir -p "$py/cmake" "$py/python" "$py/deps/include" "$py/deps/lib/cmake"
cp "$here/cmake/SluicePython.cmake" "$py/cmake/"
cp -r "$here/python/CMakeLists.txt" "$here/python/src" "$here/python/sluice" "$here/python/tests" "$py/python/"
find "$py/python" -name __pycache__ -prune -exec rm -rf {} +
cp -r /usr/include/pybind11 /usr/include/dlpack "$py/deps/include/"
cp -r /usr/lib/cmake/pybind11 "$py/deps/lib/cmake/"
cat > "$py/CMakeLists.txt" <<'CMAKE'
# The Python package sluice, built against this kit's prebuilt libsluice (written by
# bench/gpu-kit.sh; bench/gpu-check.sh runs it):
#   cmake -S KIT/python-src -B BUILD -DSLUICE_PYTHON=/path/to/python3 [-Dpybind11_DIR=DIR]
#   cmake --build BUILD      ->  BUILD/python/sluice/ (import with PYTHONPATH=BUILD/python)
# pybind11 and DLPack's header come from deps/ unless pybind11_DIR or DLPACK_INCLUDE_DIR say
# otherwise. Warnings are not errors here: another compiler may warn about other things.
cmake_minimum_required(VERSION 3.18)
project(sluice_python_kit LANGUAGES C CXX)
set(CMAKE_CXX_STANDARD 20)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
set(CMAKE_CXX_EXTENSIONS OFF)
set(CMAKE_POSITION_INDEPENDENT_CODE ON)
if(NOT CMAKE_BUILD_TYPE)
  set(CMAKE_BUILD_TYPE Release CACHE STRING "Build type" FORCE)
endif()
find_package(sluice CONFIG REQUIRED PATHS ${CMAKE_CURRENT_SOURCE_DIR}/../lib/cmake/sluice NO_DEFAULT_PATH)
set(PROJECT_VERSION ${sluice_VERSION})  # python/CMakeLists.txt stamps it into the module
list(PREPEND CMAKE_PREFIX_PATH ${CMAKE_CURRENT_SOURCE_DIR}/deps)
set(SLUICE_PYTHON "" CACHE FILEPATH "The Python interpreter the package is built for")
if(NOT SLUICE_PYTHON)
  message(FATAL_ERROR "name the interpreter: -DSLUICE_PYTHON=/path/to/python3")
endif()
set(SLUICE_BUILD_PYTHON ON)
set(SLUICE_BUILD_TESTS OFF)
add_library(sluice_warnings INTERFACE)
function(sluice_origin_rpath target from_dir)  # installing is not what the kit is for
endfunction()
include(cmake/SluicePython.cmake)
if(NOT SLUICE_PYTHON_MISSING STREQUAL "")
  message(FATAL_ERROR "The Python package cannot be built: ${SLUICE_PYTHON_MISSING}")
endif()
message(STATUS "pybind11 ${pybind11_VERSION} from ${pybind11_DIR}; dlpack.h in ${DLPACK_INCLUDE_DIR}; "
               "Python ${Python3_VERSION} (${Python3_EXECUTABLE})")
CMAKE
du -sh "$kit"
