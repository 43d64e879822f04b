#!/usr/bin/env bash
# Does the bounce path overlap reading and copying? On the simulated device with a finite copy
# bandwidth, compare interleaved rounds of:
#   storage: the host path reading the file into pinned host memory (O_DIRECT)  -> limit 1
#   copy:    the modelled host->device bandwidth (SLUICE_SIM_H2D_GBPS)           -> limit 2
#   bounce:  file -> device through the pinned staging pipeline
#   posix:   pread into pageable memory, then a synchronous copy (the naive loop)
# and print medians with bounce / min(storage, copy) (target >= 0.9) and bounce / posix
# (target >= 1.5). The page cache is dropped for the file before every run, so buffered reads
# (posix) come from the device too. Targets are reported, not enforced.
#
#   bench/bounce-overlap.sh [--file PATH] [--size 1G] [--rounds 5] [--gbps G] [--build DIR]
# Without --gbps the copy bandwidth is set to the measured storage median: equal limits, the case
# where overlap matters most (a serial loop reaches only half of either).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build="$here/../build/release"
file="" size=1G rounds=5 gbps=""
while [ $# -gt 0 ]; do
  case $1 in
    --file) file=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --gbps) gbps=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    *) echo "bounce-overlap.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
bench="$build/bin/sluice_gpu_bench"
[ -x "$bench" ] || { echo "bounce-overlap.sh: $bench not built (make build)" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/var/tmp}/sluice-overlap.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
if [ -z "$file" ]; then
  file="$tmp/data.bin"
  echo "bounce-overlap.sh: writing a $size test file to $file" >&2
  head -c "$size" /dev/urandom > "$file"
  sync "$file"
fi

drop() { python3 -c 'import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.fsync(fd); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)' "$file"; }
run() {  # path gbps -> one JSON line
  drop
  SLUICE_SIM_H2D_GBPS=$2 "$bench" read "$file" --device sim --path "$1" --repeat 1 --json
}

if [ -z "$gbps" ]; then
  for i in 1 2 3; do run host 0; done > "$tmp/calib.jsonl"
  gbps=$(python3 -c 'import json,sys,statistics as st; print(round(st.median(json.loads(l)["bytes"]/json.loads(l)["seconds"]/1e9 for l in open(sys.argv[1])), 3))' "$tmp/calib.jsonl")
  echo "bounce-overlap.sh: storage ~ $gbps GB/s; modelling the copy engine at the same bandwidth" >&2
fi

: > "$tmp/runs.jsonl"
for r in $(seq "$rounds"); do
  for p in host bounce posix; do
    run "$p" "$gbps" | python3 -c 'import json,sys; j=json.loads(sys.stdin.read()); j["kind"]=sys.argv[1]; j["round"]=int(sys.argv[2]); print(json.dumps(j))' "$p" "$r" >> "$tmp/runs.jsonl"
  done
done

python3 - "$tmp/runs.jsonl" "$gbps" <<'PY'
import json, statistics as st, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
gbps = float(sys.argv[2])
def gbs(j): return j["bytes"] / j["seconds"] / 1e9
kinds = ["host", "bounce", "posix"]
print(f"{'round':>5}  " + "  ".join(f"{k:>8}" for k in kinds) + "   (GB/s)")
for r in sorted({j["round"] for j in runs}):
    row = {j["kind"]: gbs(j) for j in runs if j["round"] == r}
    print(f"{r:>5}  " + "  ".join(f"{row[k]:>8.3f}" for k in kinds))
med = {k: st.median(gbs(j) for j in runs if j["kind"] == k) for k in kinds}
print(f"{'median':>5}  " + "  ".join(f"{med[k]:>8.3f}" for k in kinds))
limit = min(med["host"], gbps)
print(f"\nmodelled copy bandwidth: {gbps:.3f} GB/s; storage (host path, O_DIRECT): {med['host']:.3f} GB/s")
print(f"bounce / min(storage, copy) = {med['bounce'] / limit:.3f}   (target >= 0.9)")
print(f"bounce / posix              = {med['bounce'] / med['posix']:.3f}   (target >= 1.5)")
reasons = {j["kind"]: j["reason"] for j in runs}
for k in kinds: print(f"  {k}: {reasons[k]}")
PY
