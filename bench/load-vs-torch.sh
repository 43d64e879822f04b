#!/usr/bin/env bash
# load-vs-torch.sh: one safetensors checkpoint loaded into GPU memory by sluice and by
# safetensors.torch.load_file(FILE, device=DEVICE), on a GPU machine whose python has torch (with
# CUDA) and safetensors. Prints each round, both medians, the ratio of the medians and the median
# of the per-round ratios (sluice/torch throughput).
#
#   bench/load-vs-torch.sh [--cache cold|warm] [--rounds 3] [--device cuda:0]
#                          [--load-bench PATH] [--python PY] FILE.safetensors
#   bench/load-vs-torch.sh SLUICE_BIN FILE.safetensors [ROUNDS]    (older form: the
#                          sluice_load_bench beside SLUICE_BIN, cold cache)
#
# Like for like (docs/bench.md, "Like for like"):
# - The whole operation on both sides, each in a fresh process whose CUDA context already
#   exists: sluice is `sluice_load_bench --checkpoint FILE` (bench/load_bench.cpp), timed from
#   Checkpoint::open (header parsing) to the return of sluice::load (planning, allocation, reads
#   and copies, every byte on the device); torch from the call of load_file to the return of
#   torch.cuda.synchronize() after it (header, allocation, reads, copies). Neither clock counts
#   process start, imports or context creation. sluice's own reads-only figure is printed for
#   reference and compared with nothing.
# - The same cache state, set again before every run of either side and printed (the fraction of
#   the file in the page cache, from fincore where util-linux has it):
#     cold (default) the file is dropped from the page cache (fdatasync, POSIX_FADV_DONTNEED; no
#                     root needed); torch reads through its mmap.
#     warm            the file is read through the page cache first.
#   sluice runs with its default cache_policy auto (SLUICE_CACHE_POLICY=auto, SLUICE_DIRECT_IO=1,
#   set against an inherited environment), as a user's load does: the bounce path reads the
#   chunks the page cache holds at least half of through it and the rest O_DIRECT, so cold
#   reads O_DIRECT and warm from the cache; where cuFile works, auto takes the direct path, which
#   reads the storage whatever the cache holds (docs/paths.md). The path and reason are printed.
# - The order alternates: sluice first in odd rounds, torch first in even rounds.
# Without python3 + torch + safetensors + a CUDA GPU, or without sluice_load_bench, it says what
# is missing and exits 0 (Debian 12 has python3-torch, CPU-only, and no safetensors package).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

cache=cold rounds=3 device=cuda:0 load_bench="" file="" py=${PYTHON:-python3}
usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit "${1:-0}"; }
die() { echo "load-vs-torch: $*" >&2; exit 2; }
positional=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --cache) cache=${2:?--cache needs cold or warm}; shift 2 ;;
    --rounds) rounds=${2:?--rounds needs a count}; shift 2 ;;
    --device) device=${2:?--device needs a device}; shift 2 ;;
    --load-bench) load_bench=${2:?--load-bench needs a path}; shift 2 ;;
    --python) py=${2:?--python needs an interpreter}; shift 2 ;;
    -h|--help) usage 0 ;;
    -*) echo "load-vs-torch: unknown option '$1'" >&2; usage 2 ;;
    *) positional+=("$1"); shift ;;
  esac
done
case ${#positional[@]} in
  1) file=${positional[0]} ;;
  2|3) # older form: SLUICE_BIN FILE [ROUNDS]
     [[ -z $load_bench ]] && load_bench=$(dirname "${positional[0]}")/sluice_load_bench
     file=${positional[1]}; rounds=${positional[2]:-$rounds} ;;
  *) usage 2 ;;
esac
[[ $cache == cold || $cache == warm ]] || die "--cache is cold or warm, not '$cache'"
[[ $rounds =~ ^[1-9][0-9]*$ ]] || die "--rounds wants a positive count, got '$rounds'"
[[ -f $file ]] || die "no file '$file'"
if [[ -z $load_bench ]]; then
  # shellcheck disable=SC2012
  load_bench=$(ls -t "$here"/../build/*/bin/sluice_load_bench 2>/dev/null | head -n1 || true)
fi
if [[ -z $load_bench || ! -x $load_bench ]]; then
  echo "load-vs-torch: skipped (no sluice_load_bench: build it, or pass --load-bench PATH)"; exit 0
fi
if ! "$py" -c 'import torch, safetensors.torch; assert torch.cuda.is_available()' 2>/dev/null; then
  echo "load-vs-torch: skipped (needs $py with torch, safetensors and a CUDA GPU)"; exit 0
fi

bytes=$(stat -c %s "$file")
drop() { "$py" -c 'import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.fdatasync(fd); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)' "$file"; }
warm() { cat "$file" > /dev/null; }
resident() {  # percent of the file in the page cache, or ?
  local res
  res=$(fincore --bytes --noheadings --output RES "$file" 2>/dev/null) || { echo "?"; return; }
  echo $(( ${res:-0} * 100 / (bytes > 0 ? bytes : 1) ))
}
run_sluice() {  # prints: seconds read_seconds path: reason
  SLUICE_CACHE_POLICY=auto SLUICE_DIRECT_IO=1 timeout 300 "$load_bench" --checkpoint "$file" --device "$device" --json \
    | "$py" -c 'import json,sys; d=json.load(sys.stdin); print(d["seconds"], d["read_seconds"], d["path"] + ": " + d["reason"])'
}
run_torch() {  # prints: seconds
  timeout 300 "$py" - "$file" "$device" <<'PY'
import sys, time, torch
from safetensors.torch import load_file
torch.cuda.init(); torch.zeros(1, device=sys.argv[2]); torch.cuda.synchronize()  # context: not timed
t0 = time.perf_counter()
d = load_file(sys.argv[1], device=sys.argv[2])
torch.cuda.synchronize()
print(time.perf_counter() - t0)
PY
}
prepare() { if [[ $cache == cold ]]; then drop; else warm; fi; }

echo "load-vs-torch: $file ($bytes bytes), device $device, $rounds rounds, cache $cache"
s_times=() t_times=() s_reads=() path=""
for ((r = 1; r <= rounds; r++)); do
  if (( r % 2 == 1 )); then sides=(sluice torch); else sides=(torch sluice); fi
  line="round $r:"
  for side in "${sides[@]}"; do
    prepare
    res=$(resident)
    if [[ $side == sluice ]]; then
      out=$(run_sluice) || die "sluice_load_bench failed in round $r"
      read -r s sr path <<<"$out"
      s_times+=("$s"); s_reads+=("$sr")
      line+=$(printf '  sluice %.3f s (cached %s%%)' "$s" "$res")
    else
      t=$(run_torch | tail -n 1) || die "torch failed in round $r"
      t_times+=("$t")
      line+=$(printf '  torch %.3f s (cached %s%%)' "$t" "$res")
    fi
  done
  echo "$line"
done

"$py" - "$bytes" "$cache" "${s_times[*]}" "${t_times[*]}" "${s_reads[*]}" "$path" <<'PY'
import sys, statistics as st
b, cache, path = int(sys.argv[1]), sys.argv[2], sys.argv[6]
s = [float(x) for x in sys.argv[3].split()]
t = [float(x) for x in sys.argv[4].split()]
reads = [float(x) for x in sys.argv[5].split()]
g = b / 2**30
sm, tm = st.median(s), st.median(t)
print(f"median: sluice load {sm:.3f} s ({g / sm:.2f} GiB/s), safetensors.torch.load_file {tm:.3f} s ({g / tm:.2f} GiB/s)")
print(f"ratio sluice/torch throughput: {tm / sm:.2f} (medians), {st.median(tt / ss for ss, tt in zip(s, t)):.2f} (paired)")
print(f"(for reference, not compared: sluice's reads alone {g / st.median(reads):.2f} GiB/s; last path {path[:200]})")
how = ("cold on both sides: dropped from the page cache before every run; sluice cache_policy auto, torch mmap"
       if cache == "cold" else
       "warm on both sides: read through the page cache before every run; sluice cache_policy auto, torch mmap")
print(f"cache: {how}")
print("timed: the whole load on both sides (header, allocation, reads, copies to the device), after "
      "context creation; order alternating")
PY
