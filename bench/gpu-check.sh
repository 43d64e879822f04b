#!/usr/bin/env bash
# On a machine with a CUDA GPU: run the gpu-labelled tests, then print one table of file -> GPU
# throughput for each path (direct where a libcufile loads, bounce, posix) next to the limits
# (storage read bandwidth through sluice's host path, and pinned host -> device copy bandwidth),
# for a file read cold (page cache dropped) and warm. Finishes well under 6 minutes on one GPU.
#
#   bench/gpu-check.sh [--prebuilt DIR] [--size 4G] [--dir DIR] [--rounds 2]
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
  cp "$build/bin/sluice_gpu_bench" "$kit/bin/"
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
# 3. One cuFile program on NVIDIA's libcufile.so.0 and on libsluice_cufile (bounce, and handing
# aligned requests to NVIDIA's library as its direct path), interleaved, warm.
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
    for mode in nvidia sluice sluice+nvidia-direct; do
      case $mode in
        nvidia) [ -n "$nv_dir" ] || continue; dirs=$nv_dir; extra=() ;;
        sluice) dirs=$kit/lib/sluice; extra=(SLUICE_LIBCUFILE=) ;;
        sluice+nvidia-direct) [ -n "$nv_dir" ] || continue; dirs=$kit/lib/sluice; extra=(SLUICE_LIBCUFILE="$nv_dir/libcufile.so.0") ;;
      esac
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
print(f"\n{'cuFile read_to_gpu, ' + sys.argv[2] + ' warm (GB/s, median)':<48} {'value':>8}")
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
  bash "$here/bench/load-vs-torch.sh" "$bin/sluice" "$tmp/model.safetensors" 3 2>&1 | tail -n 6
fi

# 5. sluice bench --compare all, one round (the gdsio-style transfer types side by side).
say "sluice bench --compare all"
timeout 150 "$bin/sluice" bench --file "$file" --compare all --block-size 1M --iodepth 8 --threads 4 \
  --time 3 --warmup 1 --repeat 1 --device cuda:0 2>&1 | tail -n 20

say "done"
