#!/usr/bin/env bash
# On a machine with a CUDA GPU: run the gpu-labelled tests, then print one table of file -> GPU
# throughput for each path (direct where a libcufile loads, bounce, posix) next to the limits
# (storage read bandwidth through sluice's host path, and pinned host -> device copy bandwidth),
# for a file read cold and warm. Finishes well under 6 minutes on one GPU.
#
#   bench/gpu-check.sh [--prebuilt DIR] [--size 4G] [--dir DIR] [--rounds 2]
#
# Like for like (docs/bench.md, "Like for like"): every cell is a median over --rounds, and each
# run starts from a page-cache state set just before it and printed beside the table:
#   cold  the file is dropped from the page cache (POSIX_FADV_DONTNEED) before each run; paths
#         read as configured (O_DIRECT where the filesystem has it).
#   warm  the file is read through the page cache before each run, and the run has
#         SLUICE_DIRECT_IO=0, so sluice reads it buffered, from the cache: with O_DIRECT (sluice
#         has no page-cache-aware mode yet) a "warm" run would read the device again. The direct
#         (GDS) path reads through cuFile on the O_DIRECT descriptor whatever SLUICE_DIRECT_IO
#         says, so its warm cell is a device figure, not a page-cache one.
# The order alternates between rounds (cold then warm with the paths in one order, then warm
# then cold in the reverse order). The cuFile program's libraries alternate too and run cold
# (dropped before each run); sluice load against torch (bench/load-vs-torch.sh) runs cold and
# warm, each with its own like-for-like set-up.
#
# --prebuilt DIR: use the kit bench/gpu-kit.sh built elsewhere (it needs only glibc), for GPU
# machines without the build's Debian packages; otherwise this script builds everything here.
#
# Besides the table it compares libsluice_cufile with NVIDIA's libcufile.so.0 on one cuFile
# program (examples/cufile/read_to_gpu.c, built once against cufile.h and run on each library
# through LD_LIBRARY_PATH), runs `sluice bench --compare all` once, and runs the gpu-labelled
# tests (stream-ordered transfers among them).
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

if [ -n "$prebuilt" ]; then
  kit=$(cd "$prebuilt" && pwd)
  tests_bin="$kit/tests/test_real_gpu"
else
  build=$here/build/gpu-check
  say "building Release in $build"
  cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null && cmake --build "$build" -j "$(nproc)" >/dev/null \
    && cmake --install "$build" --prefix "$build/kit" >/dev/null \
    || { say "build failed (missing packages? build a kit with bench/gpu-kit.sh and use --prebuilt)"; exit 1; }
  kit=$build/kit
  cp "$build/bin/sluice_gpu_bench" "$build/bin/sluice_load_bench" "$kit/bin/"
  tests_bin="$build/tests/gpu/test_real_gpu"
fi
bin="$kit/bin"
export LD_LIBRARY_PATH="$kit/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

if [ -z "${SLUICE_LIBCUFILE:-}" ] && ! ldconfig -p 2>/dev/null | grep -q 'libcufile.so.0'; then
  cand=$(python3 -c 'import nvidia.cufile, os; print(os.path.join(list(nvidia.cufile.__path__)[0], "lib", "libcufile.so.0"))' 2>/dev/null || true)
  if [ -n "$cand" ] && [ -f "$cand" ]; then export SLUICE_LIBCUFILE=$cand; fi
fi
say "libcufile: ${SLUICE_LIBCUFILE:-libcufile.so.0 from the loader path, if any}"
nvidia-smi --query-gpu=name,pci.bus_id,memory.total,pcie.link.gen.current,pcie.link.width.current --format=csv,noheader 2>/dev/null | sed 's/^/[gpu] /' >&2

# 1. The gpu-labelled tests (they skip without a GPU).
if [ -x "$tests_bin" ]; then
  say "running the gpu tests ($tests_bin)"
  (cd "$dir" && timeout 180 "$tests_bin" --gtest_brief=1 2>&1 | tail -n 25 >&2) || say "gpu tests FAILED (or hung: 180 s limit)"
else
  say "no $tests_bin: gpu tests not run"
fi

# 2. The table.
tmp=$(mktemp -d "$dir/sluice-gpu-check.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
file="$tmp/data.bin"
say "writing a $size test file in $tmp"
head -c "$size" /dev/urandom > "$file" && sync "$file"
drop() { python3 -c 'import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)' "$file"; }
warm() { cat "$file" > /dev/null; }
resident() {  # fraction of the file in the page cache (fincore, util-linux), or -1
  local res
  res=$(fincore --bytes --noheadings --output RES "$file" 2>/dev/null) || { echo -1; return; }
  python3 -c 'import sys; print(int(sys.argv[1] or 0) / max(1, int(sys.argv[2])))' "$res" "$(stat -c %s "$file")"
}
results="$tmp/results.jsonl"
: > "$results"
measure() {  # label cache args...
  local label=$1 cache=$2 res=-1
  shift 2
  local envs=()
  case $cache in
    cold) drop; res=$(resident) ;;
    warm) warm; res=$(resident); envs=(SLUICE_DIRECT_IO=0) ;;
  esac
  env "${envs[@]}" timeout 120 "$@" --repeat 1 --json 2>"$tmp/err" | python3 -c '
import json, sys
for line in sys.stdin:
    j = json.loads(line); j["label"] = sys.argv[1]; j["cache"] = sys.argv[2]; j["resident"] = float(sys.argv[3])
    print(json.dumps(j))' "$label" "$cache" "$res" >> "$results" \
    || say "$label ($cache) failed: $(tail -n 1 "$tmp/err")"
}
labels=("storage (host path)" direct bounce posix auto)
for r in $(seq "$rounds"); do
  caches=(cold warm) order=("${labels[@]}")
  if (( r % 2 == 0 )); then caches=(warm cold); order=(auto posix bounce direct "storage (host path)"); fi
  for cache in "${caches[@]}"; do
    say "round $r, $cache"
    for l in "${order[@]}"; do
      if [ "$l" = "storage (host path)" ]; then p=host; else p=$l; fi
      measure "$l" "$cache" "$bin/sluice_gpu_bench" read "$file" --device cuda:0 --path "$p"
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
def why(label, cache):
    return next((f'{r["path"]}: {r["reason"]}' for r in rows if r["label"] == label and r["cache"] == cache), None)
print(f"\n{'file -> GPU (GiB/s, median)':<28} {'cold':>8} {'warm':>8}  path taken / reason")
for l in labels:
    caches = ["-"] if l == "pinned H2D copy" else ["cold", "warm"]
    vals = [med(l, c) for c in caches]
    cells = [f"{v:>8.2f}" if v is not None else f"{'n/a':>8}" for v in vals]
    if len(cells) == 1: cells = cells * 2
    reasons = [why(l, c) for c in caches]
    text = reasons[0] or "did not run"
    if len(reasons) == 2 and reasons[1] and reasons[1] != reasons[0]:
        text = f"cold: {reasons[0] or 'did not run'}; warm: {reasons[1]}"
    print(f"{l:<28} {cells[0]} {cells[1]}  {text[:160]}")
def span(cache):
    v = [r["resident"] for r in rows if r["cache"] == cache and r["resident"] >= 0]
    return f"{100 * min(v):.0f}-{100 * max(v):.0f}%" if v else "unknown (no fincore)"
print(f"cold: file dropped from the page cache before each run (resident before the runs: {span('cold')}); "
      "paths read as configured (O_DIRECT where available)")
print(f"warm: file read through the page cache before each run (resident: {span('warm')}); runs with "
      "SLUICE_DIRECT_IO=0, so sluice reads buffered, from the cache (direct: cuFile on O_DIRECT all the same)")
PY
# 3. One cuFile program on NVIDIA's libcufile.so.0 and on libsluice_cufile (bounce, and handing
# aligned requests to NVIDIA's library as its direct path), interleaved with the order reversed
# in the second round, cold: the program opens the file with O_DIRECT, so the file is dropped
# from the page cache before each run.
nv_dir=""
[ -n "${SLUICE_LIBCUFILE:-}" ] && nv_dir=$(dirname "$SLUICE_LIBCUFILE")
example="$tmp/read_to_gpu"
link_dir=${nv_dir:-$kit/lib/sluice}
if ! cc -O2 -I"$kit/include/sluice" -I"$here/examples/cufile" "$here/examples/cufile/read_to_gpu.c" -o "$example" \
     -L"$link_dir" -l:libcufile.so.0 -ldl -Wl,--allow-shlib-undefined 2>"$tmp/cc.err"; then
  say "cc could not build read_to_gpu.c ($(tail -n 1 "$tmp/cc.err")); using the kit's prebuilt drop-in build"
  example="$kit/bin/read_to_gpu_dropin"
fi
if [ -x "$example" ]; then
  # NVIDIA's library without nvidia-fs runs in compatibility mode only where its config allows it.
  printf '{ "logging": { "level": "ERROR" }, "properties": { "allow_compat_mode": true } }\n' > "$tmp/cufile.json"
  : > "$tmp/cufile.txt"
  for r in 1 2; do
    modes=(nvidia sluice sluice+nvidia-direct)
    [ "$r" = 2 ] && modes=(sluice+nvidia-direct sluice nvidia)
    for mode in "${modes[@]}"; do
      case $mode in
        nvidia) [ -n "$nv_dir" ] || continue; dirs=$nv_dir; extra=() ;;
        sluice) dirs=$kit/lib/sluice; extra=(SLUICE_LIBCUFILE=) ;;
        sluice+nvidia-direct) [ -n "$nv_dir" ] || continue; dirs=$kit/lib/sluice; extra=(SLUICE_LIBCUFILE="$nv_dir/libcufile.so.0") ;;
      esac
      drop
      line=$(cd "$tmp" && env "${extra[@]}" CUFILE_ENV_PATH_JSON="$tmp/cufile.json" LD_LIBRARY_PATH="$dirs:$kit/lib" \
             timeout 120 "$example" "$file" 2>&1 | tail -n 1)
      echo "$mode $line" >> "$tmp/cufile.txt"
    done
  done
  python3 - "$tmp/cufile.txt" "$size" <<'PY'
import re, statistics as st, sys
rates = {}
for line in open(sys.argv[1]):
    mode, _, rest = line.partition(" ")
    m = re.search(r"= ([0-9.]+) GB/s", rest)
    if m: rates.setdefault(mode, []).append(float(m.group(1)))
    else: print(f"cuFile example on {mode}: {rest.strip()}")
print(f"\n{'cuFile read_to_gpu, ' + sys.argv[2] + ' cold (GB/s, median)':<48} {'value':>8}")
for mode in ("nvidia", "sluice", "sluice+nvidia-direct"):
    v = rates.get(mode)
    print(f"  {mode:<46} {st.median(v):>8.2f}" if v else f"  {mode:<46} {'n/a':>8}")
for mode in ("sluice", "sluice+nvidia-direct"):
    if rates.get(mode) and rates.get("nvidia"):
        print(f"  {'ratio ' + mode + ' / nvidia':<46} {st.median(rates[mode]) / st.median(rates['nvidia']):>8.2f}")
PY
fi

# 4. sluice load against safetensors.torch.load_file on a 2 GiB checkpoint (where torch exists).
if python3 -c 'import torch, safetensors' 2>/dev/null; then
  say "writing a 2 GiB safetensors checkpoint"
  python3 - "$tmp/model.safetensors" <<'PY'
import sys, torch
from safetensors.torch import save_file
g = torch.Generator().manual_seed(1)
sizes = [64 << 20] * 16 + [8 << 20] * 64 + [4096 * 3 + 8] * 64   # bytes of fp16 tensors
tensors = {f"layer{i}.w": torch.randn(n // 2, generator=g, dtype=torch.float32).to(torch.float16) for i, n in enumerate(sizes)}
save_file(tensors, sys.argv[1])
PY
  for cache in cold warm; do
    bash "$here/bench/load-vs-torch.sh" --load-bench "$bin/sluice_load_bench" --cache "$cache" --rounds 3 \
      "$tmp/model.safetensors" 2>&1 | tail -n 6
  done
fi

# 5. sluice bench --compare all, one round (the gdsio-style transfer types side by side), each run
# from a cold cache (--drop-caches): cpu-cached-gpu reads through the page cache, the rest O_DIRECT.
say "sluice bench --compare all (page cache dropped before each type)"
timeout 150 "$bin/sluice" bench --file "$file" --compare all --block-size 1M --iodepth 8 --threads 4 \
  --time 3 --warmup 1 --repeat 1 --drop-caches --device cuda:0 2>&1 | tail -n 20

say "done"
