#!/usr/bin/env bash
# Installs the build into a temporary prefix, then builds a consumer against it twice: with
# find_package(sluice) (CMake package config) and with pkg-config, and runs both. Then the same
# for libsluice_cufile: a cuFile example built with find_package (sluice::cufile) and with plain
# `cc -I<prefix>/include/sluice ... -lsluice_cufile`, <sluice/cufile.h> with -I<prefix>/include,
# and the drop-in <prefix>/lib/sluice/libcufile.so.0 loaded by name.
# Usage: check-install.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/sluice-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
mkdir -p "$tmp/app"
cat > "$tmp/app/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.25)
project(consumer C CXX)
set(CMAKE_CXX_STANDARD 20)
find_package(sluice REQUIRED)
add_executable(app "$src/tests/install/consumer.cpp")
target_link_libraries(app sluice::sluice)
add_executable(cufile_app "$src/examples/cufile/read_to_gpu.c")
target_link_libraries(cufile_app sluice::cufile \${CMAKE_DL_LIBS})
CM
cmake -S "$tmp/app" -B "$tmp/app/build" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/app/build" >/dev/null
head -c 1000000 /dev/urandom > "$tmp/data.bin"
LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/app/build/app" "$tmp/data.bin"
flags=$(PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig" pkg-config --cflags --libs sluice)
# shellcheck disable=SC2086
c++ -std=c++20 "$src/tests/install/consumer.cpp" $flags -o "$tmp/app-pc"
LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/app-pc" "$tmp/data.bin"

# libsluice_cufile: host memory here unless a CUDA driver is installed (the example then uses it).
export SLUICE_DEVICE=sim
LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/app/build/cufile_app" "$tmp/data.bin" 1000000 --check
cc -std=c11 -I"$tmp/prefix/include/sluice" "$src/examples/cufile/read_to_gpu.c" \
   -L"$tmp/prefix/lib" -lsluice_cufile -ldl -o "$tmp/read_to_gpu"
LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/read_to_gpu" "$tmp/data.bin" 1000000 --check
printf '#include <sluice/cufile.h>\nint main(void) { int v = 0; return cuFileGetVersion(&v).err != CU_FILE_SUCCESS || v < 1000; }\n' \
  > "$tmp/version.c"
cc -std=c11 -I"$tmp/prefix/include" "$tmp/version.c" -L"$tmp/prefix/lib" -lsluice_cufile -o "$tmp/version"
LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/version"
# Drop-in: only <prefix>/lib/sluice on the library path; libsluice is found through the RUNPATH.
[ "$(readlink "$tmp/prefix/lib/sluice/libcufile.so.0")" = ../libsluice_cufile.so.0 ]
cat > "$tmp/dropin.c" <<'C'
#include <cufile.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
int main(void) {
  void *lib = dlopen("libcufile.so.0", RTLD_NOW);
  void *sym = lib ? dlsym(lib, "cuFileGetVersion") : NULL;
  CUfileError_t (*get_version)(int *);
  int v = 0;
  if (sym == NULL) { fprintf(stderr, "drop-in: %s\n", dlerror()); return 1; }
  memcpy(&get_version, &sym, sizeof sym);
  if (get_version(&v).err != 0) return 1;
  printf("drop-in libcufile.so.0: cuFileGetVersion = %d\n", v);
  return 0;
}
C
cc -std=c11 -I"$tmp/prefix/include/sluice" "$tmp/dropin.c" -ldl -o "$tmp/dropin"
LD_LIBRARY_PATH="$tmp/prefix/lib/sluice" "$tmp/dropin"
echo "install check: find_package and pkg-config consumers ran; so did the cuFile ones and the drop-in"
