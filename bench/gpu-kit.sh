#!/usr/bin/env bash
# Builds what bench/gpu-check.sh needs on a GPU machine that lacks this build's Debian packages,
# as one folder that needs nothing but glibc (the `portable` preset links liburing, fmt, GoogleTest
# and libstdc++ statically):
#
#   bench/gpu-kit.sh [KIT]        (default build/gpu-kit)
#
#   KIT/bin/      sluice, sluice_gpu_bench, sluice_load_bench, read_to_gpu_dropin
#   KIT/lib/      libsluice.so.0, libsluice_tools.so.0, libsluice_cufile.so.0,
#                 sluice/libcufile.so.0 (the drop-in)
#   KIT/include/  sluice/cufile.h
#   KIT/tests/    test_real_gpu (the gpu-labelled tests)
#
# Then, on the GPU machine: bench/gpu-check.sh --prebuilt KIT
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
kit=${1:-$here/build/gpu-kit}
build=$here/build/portable
cmake --preset portable -DSLUICE_BUILD_TESTS=ON >/dev/null
cmake --build "$build" -j "$(nproc)" --target sluice_cli sluice_gpu_bench sluice_load_bench test_real_gpu sluice_cufile cufile_dropin_read_to_gpu
rm -rf "$kit"
cmake --install "$build" --prefix "$kit" >/dev/null
cp "$build/bin/sluice_gpu_bench" "$build/bin/sluice_load_bench" "$kit/bin/"
# read_to_gpu linked against a libcufile.so.0 SONAME and no RUNPATH: runs on whichever library
# LD_LIBRARY_PATH finds (gpu-check.sh uses it where the GPU machine has no C compiler).
cp "$build/tests/cufile/read_to_gpu_dropin" "$kit/bin/"
mkdir -p "$kit/tests"
cp "$build/tests/gpu/test_real_gpu" "$kit/tests/"
rm -rf "$kit/lib/cmake" "$kit/lib/pkgconfig"
du -sh "$kit"
