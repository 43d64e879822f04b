#!/usr/bin/env bash
# Builds the libFuzzer targets for the safetensors and .npy parsers and the Megatron .idx and tar
# header parsers of the ingest datasets with clang
# (-fsanitize=fuzzer,address,undefined) and runs each for a bounded time on a copy of the seed
# corpus in tests/fuzz/corpus. Needs clang and libclang-rt-14-dev (libFuzzer's runtime).
#   tests/fuzz/run.sh [BUILD_DIR] [SECONDS_PER_TARGET]      (defaults: build/fuzz 30)
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-build/fuzz}
seconds=${2:-30}
cxx=${CXX_FUZZ:-clang++}
# Without the compiler or libFuzzer's runtime this skips, except under SLUICE_TEST_STRICT=1 (CI),
# where make deps has installed both and their absence is a failure.
skip() {
  if [ "${SLUICE_TEST_STRICT:-}" = 1 ]; then
    echo "fuzz: FAILED: $1 (SLUICE_TEST_STRICT=1; apt-get install clang libclang-rt-14-dev)" >&2; exit 1
  fi
  echo "fuzz: SKIPPED: $1 (apt-get install clang libclang-rt-14-dev)"; exit 0
}
command -v "$cxx" >/dev/null || skip "$cxx not found"
mkdir -p "$out"
probe="$out/libfuzzer-probe"
printf '%s\n' '#include <cstddef>' '#include <cstdint>' \
  'extern "C" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }' >"$probe.cpp"
"$cxx" -fsanitize=fuzzer -o "$probe" "$probe.cpp" 2>"$probe.log" ||
  skip "$cxx cannot link libFuzzer: $(grep -m1 -i error "$probe.log" || head -1 "$probe.log")"
# Error's errno comes from the error mapper (which names cuFile's codes: -Iabi for cufile.h);
# TensorInfo's dtype from dtype.cpp.
srcs=(src/core/error.cpp src/core/error_map.cpp src/formats/dtype.cpp src/formats/layout.cpp
      src/formats/npy.cpp src/formats/py_literal.cpp src/formats/safetensors.cpp
      src/ingest/megatron_index.cpp src/ingest/tar_index.cpp)
flags=(-std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
       -Iinclude -Isrc -Iabi)
targets=(safetensors npy megatron_idx tar)
jobs=$(nproc)
# The parsers' objects are compiled once (in parallel) and linked into each target; all of it again
# when any source or header they use changed since the last build.
stamp="$out/.built"
if [ ! -f "$stamp" ] || [ -n "$(find "${srcs[@]}" tests/fuzz/fuzz_*.cpp include/sluice src/ingest/dataset_parts.hpp -newer "$stamp" | head -1)" ]; then
  echo "fuzz: building ${targets[*]} in $out"
  mkdir -p "$out/obj"
  mains=("${targets[@]/#/tests/fuzz/fuzz_}"); mains=("${mains[@]/%/.cpp}")
  obj() { echo "$out/obj/$(tr / _ <<<"$1").o"; }
  running=0
  for src in "${srcs[@]}" "${mains[@]}"; do
    "$cxx" "${flags[@]}" -c "$src" -o "$(obj "$src")" &
    if (( ++running >= jobs )); then wait -n; running=$((running - 1)); fi
  done
  while (( running > 0 )); do wait -n; running=$((running - 1)); done
  objs=()
  for src in "${srcs[@]}"; do objs+=("$(obj "$src")"); done
  for target in "${targets[@]}"; do
    "$cxx" "${flags[@]}" -o "$out/fuzz_$target" "$(obj "tests/fuzz/fuzz_$target.cpp")" "${objs[@]}" -lfmt
  done
  touch "$stamp"
fi
# As many targets at a time as there are cores (each fuzzer is one process).
run_target() {
  local target=$1 corpus="$out/corpus_$1"
  rm -rf "$corpus"; mkdir -p "$corpus"
  cp tests/fuzz/corpus/"$target"/* "$corpus"/
  # -max_len covers the seeds; leaks and crashes fail the run (libFuzzer exits non-zero).
  if ! "$out/fuzz_$target" -max_total_time="$seconds" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
       -print_final_stats=1 "$corpus" 2>"$out/fuzz_$target.log"; then
    echo "fuzz: fuzz_$target FAILED"; tail -50 "$out/fuzz_$target.log"; return 1
  fi
  echo "fuzz: fuzz_$target ran ${seconds}s: $(grep -E "stat::number_of_executed_units" "$out/fuzz_$target.log" | tail -1)"
}
pids=() failed=0
for target in "${targets[@]}"; do
  run_target "$target" & pids+=($!)
  if [ "${#pids[@]}" -ge "$jobs" ]; then wait "${pids[0]}" || failed=1; pids=("${pids[@]:1}"); fi
done
for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
exit "$failed"
