#!/usr/bin/env bash
# Installs the build into a temporary prefix and runs what it installed in a clean environment
# (env -i: no LD_LIBRARY_PATH, no PATH): the sluice CLI, whose $ORIGIN-relative RUNPATH must find
# libsluice and libsluice_tools, also after the prefix is moved. Every installed header compiles
# on its own (none names one that was not installed), and sluice/internal/ is not installed.
# The installed libraries export no internal (tests/api/check-exports.sh).
# Then three consumers built with find_package(sluice): consumer.cpp on sluice::sluice, which must
# load neither MPI, hwloc nor libsluice_tools (readelf -d, and ldd for what its libraries load);
# tools_consumer.cpp on sluice::tools; and the cuFile example read_to_gpu.c (C) on sluice::cufile;
# each runs. The first two again with pkg-config (sluice, sluice-tools). Then libsluice_cufile
# by hand: plain `cc -I<prefix>/include/sluice ... -lsluice_cufile`, <sluice/cufile.h> with
# -I<prefix>/include, and the drop-in <prefix>/lib/sluice/libcufile.so.0 loaded by name.
# Programs linked by hand carry -Wl,-rpath,<prefix>/lib, as docs/build.md tells users to.
# Last, the uninstall script removes every installed file again.
# With PYTHON (the interpreter the Python package was built for), the installed package too.
# Usage: check-install.sh BUILD_DIR SOURCE_DIR [PYTHON]
set -euo pipefail
build=$1 src=$2 python=${3:-}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/sluice-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# The simulated device: host memory, unless a CUDA driver is installed (the examples then use it).
clean() { env -i SLUICE_DEVICE=sim "$@"; }
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
lib="$tmp/prefix/lib"
head -c 1000000 /dev/urandom > "$tmp/data.bin"

# The installed CLI starts and moves bytes with nothing but its own RUNPATH.
clean "$tmp/prefix/bin/sluice" --version
clean "$tmp/prefix/bin/sluice" read "$tmp/data.bin" --device sim --out "$tmp/copy.bin"
cmp "$tmp/data.bin" "$tmp/copy.bin"
clean "$tmp/prefix/bin/sluice" plan --gpus 8 --per-gpu 1GB/s >/dev/null  # libsluice_tools' code
# No installed file points into the build or source tree (they may be gone on a user's machine).
for f in "$tmp/prefix/bin/sluice" "$lib/libsluice.so.0" "$lib/libsluice_tools.so.0" "$lib/libsluice_cufile.so.0"; do
  runpath=$(readelf -d "$f" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')
  case ":$runpath:" in
    *":$build"*|*":$src"*) echo "$f: RUNPATH '$runpath' names the build or source tree" >&2; exit 1 ;;
  esac
done
readelf -d "$tmp/prefix/bin/sluice" | grep -q 'RUNPATH.*\$ORIGIN/\.\./lib'
# The installed libraries export what the build's do: the API's names, no detail:: or Impl.
bash "$src/tests/api/check-exports.sh" "$lib/libsluice.so.0" >/dev/null
bash "$src/tests/api/check-exports.sh" "$lib/libsluice_tools.so.0" >/dev/null
bash "$src/tests/api/check-exports.sh" --c-abi "$lib/libsluice_cufile.so.0" >/dev/null
# A moved prefix still works: the RUNPATH is relative to the binary.
mv "$tmp/prefix" "$tmp/moved"
clean "$tmp/moved/bin/sluice" --version >/dev/null
mv "$tmp/moved" "$tmp/prefix"

# The installed headers: the API, tools/ and testing/, each compiling on its own; not internal/.
inc="$tmp/prefix/include"
[ -f "$inc/sluice/tools/bench.hpp" ] && [ -f "$inc/sluice/testing/faulty_engine.hpp" ]
[ ! -e "$inc/sluice/internal" ] || { echo "sluice/internal/ was installed" >&2; exit 1; }
headers=$(cd "$inc" && find sluice -name '*.hpp' | sort)
for h in $headers; do
  printf '#include <%s>\n' "$h" | c++ -std=c++20 -fsyntax-only -I"$inc" -x c++ - ||
    { echo "installed header $h does not compile on its own" >&2; exit 1; }
done

mkdir -p "$tmp/app"
cat > "$tmp/app/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.25)
project(consumer C CXX)
set(CMAKE_CXX_STANDARD 20)
find_package(sluice REQUIRED COMPONENTS tools cufile)
add_executable(app "$src/tests/install/consumer.cpp")
target_link_libraries(app sluice::sluice)
add_executable(tools_app "$src/tests/install/tools_consumer.cpp")
target_link_libraries(tools_app sluice::tools)
add_executable(cufile_app "$src/examples/cufile/read_to_gpu.c")
target_link_libraries(cufile_app sluice::cufile \${CMAKE_DL_LIBS})
CM
cmake -S "$tmp/app" -B "$tmp/app/build" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/app/build" >/dev/null
clean "$tmp/app/build/app" "$tmp/data.bin"  # CMake gives it the RUNPATH to <prefix>/lib
clean "$tmp/app/build/tools_app" "$tmp/data.bin"
# The core consumer needs nothing of the tool suite: not linked (readelf -d lists what the program
# itself names) and not loaded by its libraries either (ldd lists all that the loader maps).
not_core='libmpi|libhwloc|libsluice_tools|libopen-pal|libopen-rte'
needed=$(readelf -d "$tmp/app/build/app" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
grep -q '^libsluice\.so\.0$' <<<"$needed"
if grep -E "$not_core" <<<"$needed"; then echo "the sluice::sluice consumer links the above" >&2; exit 1; fi
loaded=$(env -i ldd "$tmp/app/build/app")
if grep -E "$not_core" <<<"$loaded"; then echo "the sluice::sluice consumer loads the above" >&2; exit 1; fi
grep -q 'libsluice_tools\.so\.0' <(readelf -d "$tmp/app/build/tools_app")
pc() { PKG_CONFIG_PATH="$lib/pkgconfig" pkg-config "$@"; }
pc_libdir=$(pc --variable=libdir sluice)
[ "$(cd "$pc_libdir" && pwd -P)" = "$(cd "$lib" && pwd -P)" ]
# shellcheck disable=SC2046
c++ -std=c++20 "$src/tests/install/consumer.cpp" $(pc --cflags --libs sluice) -Wl,-rpath,"$pc_libdir" -o "$tmp/app-pc"
clean "$tmp/app-pc" "$tmp/data.bin"
# shellcheck disable=SC2046
c++ -std=c++20 "$src/tests/install/tools_consumer.cpp" $(pc --cflags --libs sluice-tools) \
    -Wl,-rpath,"$pc_libdir" -o "$tmp/tools-app-pc"
clean "$tmp/tools-app-pc" "$tmp/data.bin"

# libsluice_cufile
clean "$tmp/app/build/cufile_app" "$tmp/data.bin" 1000000 --check
cc -std=c11 -I"$tmp/prefix/include/sluice" "$src/examples/cufile/read_to_gpu.c" \
   -L"$lib" -Wl,-rpath,"$lib" -lsluice_cufile -ldl -o "$tmp/read_to_gpu"
clean "$tmp/read_to_gpu" "$tmp/data.bin" 1000000 --check
printf '#include <sluice/cufile.h>\nint main(void) { int v = 0; return cuFileGetVersion(&v).err != CU_FILE_SUCCESS || v < 1000; }\n' \
  > "$tmp/version.c"
cc -std=c11 -I"$tmp/prefix/include" "$tmp/version.c" -L"$lib" -Wl,-rpath,"$lib" -lsluice_cufile -o "$tmp/version"
clean "$tmp/version"
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
clean LD_LIBRARY_PATH="$lib/sluice" "$tmp/dropin"

# The Python package (when this build has it: PYTHON given): imported from another folder with
# only PYTHONPATH set, it finds libsluice through its own RUNPATH and reads a file.
if [ -n "$python" ]; then
  pkg=$(find "$tmp/prefix/lib" -path '*-packages/sluice/__init__.py' | head -1)
  [ -n "$pkg" ] || { echo "the Python package was not installed" >&2; exit 1; }
  (cd / && clean PYTHONPATH="$(dirname "$(dirname "$pkg")")" "$python" -c '
import sys, numpy, sluice
buf = numpy.empty(1000000, dtype=numpy.uint8)
with sluice.File(sys.argv[1]) as f:
    r = f.read(buf)
assert r.bytes == 1000000 and buf.tobytes() == open(sys.argv[1], "rb").read(), r
print("installed python package:", sluice.__file__, r.path)
' "$tmp/data.bin")
fi

# make uninstall's script leaves no file or link of the install behind.
cmake -DPREFIX="$tmp/prefix" -P "$src/cmake/SluiceUninstall.cmake" >/dev/null
left=$(find "$tmp/prefix" ! -type d)
[ -z "$left" ] || { echo "uninstall left: $left" >&2; exit 1; }
echo "install check: the installed sluice ran (also moved); every installed header compiles alone; find_package and pkg-config consumers of sluice::sluice (no MPI, hwloc or tools) and sluice::tools ran; so did the cuFile ones, the drop-in and (with PYTHON) the Python package; uninstall removed it all"
