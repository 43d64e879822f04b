#!/usr/bin/env bash
# On a machine with a CUDA GPU: run the gpu-labelled tests, then print one table of file -> GPU
# throughput for each path (direct where a libcufile loads, bounce, posix) next to the limits
# (storage read bandwidth through sluice's host path, and pinned host -> device copy bandwidth),
# for a file read cold (page cache dropped) and warm. Finishes well under 6 minutes on one GPU.
#
#   bench/gpu-check.sh [--prebuilt DIR] [--size 4G] [--dir DIR] [--rounds 2]
#
# --prebuilt DIR: use binaries built elsewhere (`cmake --preset portable`: they need only glibc),
# for GPU machines without the build's Debian packages; otherwise this script builds them.
# libcufile: SLUICE_LIBCUFILE if set, else libcufile.so.0 on the loader path, else the copy inside
# the Python package nvidia-cufile (site-packages/nvidia/cufile/lib) when python3 finds one.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
prebuilt="" size=4G dir="${TMPDIR:-/var/tmp}" rounds=2
while [ $# -gt 0 ]; do
  case $1 in
    --prebuilt) prebuilt=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    *) echo "gpu-check.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
start=$(date +%s)
say() { printf '[gpu-check %3ss] %s\n' "$(( $(date +%s) - start ))" "$*" >&2; }

build=${prebuilt:-$here/build/gpu-check}
if [ -z "$prebuilt" ]; then
  say "building Release in $build"
  cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null && cmake --build "$build" -j "$(nproc)" >/dev/null \
    || { say "build failed (missing packages? use --prebuilt with a 'cmake --preset portable' build)"; exit 1; }
fi
bin="$build/bin"

if [ -z "${SLUICE_LIBCUFILE:-}" ] && ! ldconfig -p 2>/dev/null | grep -q 'libcufile.so.0'; then
  cand=$(python3 -c 'import nvidia.cufile, os; print(os.path.join(list(nvidia.cufile.__path__)[0], "lib", "libcufile.so.0"))' 2>/dev/null || true)
  if [ -n "$cand" ] && [ -f "$cand" ]; then export SLUICE_LIBCUFILE=$cand; fi
fi
say "libcufile: ${SLUICE_LIBCUFILE:-libcufile.so.0 from the loader path, if any}"
nvidia-smi --query-gpu=name,pci.bus_id,memory.total,pcie.link.gen.current,pcie.link.width.current --format=csv,noheader 2>/dev/null | sed 's/^/[gpu] /' >&2

# 1. The gpu-labelled tests (they skip without a GPU).
if [ -f "$build/CTestTestfile.cmake" ]; then
  say "running ctest -L gpu"
  ctest --test-dir "$build" -L gpu --output-on-failure --timeout 120 2>&1 | tail -n 15 >&2
else
  say "no CTest files in $build: gpu tests not run"
fi

# 2. The table.
tmp=$(mktemp -d "$dir/sluice-gpu-check.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
file="$tmp/data.bin"
say "writing a $size test file in $tmp"
head -c "$size" /dev/urandom > "$file" && sync "$file"
drop() { python3 -c 'import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)' "$file"; }
results="$tmp/results.jsonl"
: > "$results"
measure() {  # label cache args...
  local label=$1 cache=$2
  shift 2
  [ "$cache" = cold ] && drop
  timeout 120 "$@" --repeat 1 --json 2>"$tmp/err" | python3 -c '
import json, sys
for line in sys.stdin:
    j = json.loads(line); j["label"] = sys.argv[1]; j["cache"] = sys.argv[2]; print(json.dumps(j))' "$label" "$cache" >> "$results" \
    || say "$label ($cache) failed: $(tail -n 1 "$tmp/err")"
}
for r in $(seq "$rounds"); do
  for cache in cold warm; do
    say "round $r, $cache"
    measure "storage (host path)" "$cache" "$bin/sluice_gpu_bench" read "$file" --device cuda:0 --path host
    for p in direct bounce posix auto; do
      measure "$p" "$cache" "$bin/sluice_gpu_bench" read "$file" --device cuda:0 --path "$p"
    done
  done
  measure "pinned H2D copy" "-" "$bin/sluice_gpu_bench" h2d --device cuda:0 --size 1G
done

python3 - "$results" <<'PY'
import json, statistics as st, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
labels = ["storage (host path)", "pinned H2D copy", "direct", "bounce", "posix", "auto"]
def med(label, cache):
    v = [r["bytes"] / r["seconds"] / 2**30 for r in rows if r["label"] == label and r["cache"] == cache]
    return st.median(v) if v else None
print(f"\n{'file -> GPU (GiB/s, median)':<28} {'cold':>8} {'warm':>8}  path taken / reason")
for l in labels:
    caches = ["-"] if l == "pinned H2D copy" else ["cold", "warm"]
    vals = [med(l, c) for c in caches]
    cells = [f"{v:>8.2f}" if v is not None else f"{'n/a':>8}" for v in vals]
    if len(cells) == 1: cells = cells * 2
    why = next((f'{r["path"]}: {r["reason"]}' for r in rows if r["label"] == l), "did not run")
    print(f"{l:<28} {cells[0]} {cells[1]}  {why[:110]}")
PY
say "done"
