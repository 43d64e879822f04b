#!/usr/bin/env bash
# Installs the build into a temporary prefix, then builds a consumer against it twice: with
# find_package(sluice) (CMake package config) and with pkg-config, and runs both.
# Usage: check-install.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/sluice-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
mkdir -p "$tmp/app"
cat > "$tmp/app/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.25)
project(consumer CXX)
set(CMAKE_CXX_STANDARD 20)
find_package(sluice REQUIRED)
add_executable(app "$src/tests/install/consumer.cpp")
target_link_libraries(app sluice::sluice)
CM
cmake -S "$tmp/app" -B "$tmp/app/build" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/app/build" >/dev/null
head -c 1000000 /dev/urandom > "$tmp/data.bin"
LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/app/build/app" "$tmp/data.bin"
flags=$(PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig" pkg-config --cflags --libs sluice)
# shellcheck disable=SC2086
c++ -std=c++20 "$src/tests/install/consumer.cpp" $flags -o "$tmp/app-pc"
LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/app-pc" "$tmp/data.bin"
echo "install check: find_package and pkg-config consumers both ran"
