#!/usr/bin/env bash
# make demo: a generated 1 GiB file in a temporary folder, read through every path and engine
# this machine offers, with a short table. Usage: tools/demo.sh path/to/sluice [SIZE]
set -euo pipefail
sluice=${1:?usage: demo.sh SLUICE [SIZE]}
size=${2:-1G}
dir=$(mktemp -d "${TMPDIR:-/var/tmp}/sluice-demo.XXXXXX")
trap 'rm -rf "$dir"' EXIT

echo "sluice demo: generating a $size file in $dir ..."
head -c "$size" /dev/urandom > "$dir/source.bin"
"$sluice" write "$dir/source.bin" "$dir/data.bin" --fsync --json > "$dir/write.json"
rm -f "$dir/source.bin"

# One row per (engine, O_DIRECT, memory, path). Buffered rows run twice and keep the second run,
# which reads from the page cache the first one filled.
rows=()
run() {  # engine direct label args...
  local engine=$1 direct=$2 label=$3 out
  shift 3
  for round in 1 2; do
    out=$(SLUICE_ENGINE=$engine SLUICE_DIRECT_IO=$direct "$sluice" read "$dir/data.bin" --out /dev/null --json "$@")
    [ "$direct" = true ] && break
  done
  rows+=("$engine|$direct|$label|$out")
}
for engine in uring psync; do
  run "$engine" true host
  run "$engine" false host
done
# GPU memory: the first CUDA GPU, or the simulated device when there is none.
for path in auto bounce posix; do
  run uring true "gpu" --device auto --path "$path"
done

python3 - "$dir/write.json" "${rows[@]}" <<'PY'
import json, sys
w = json.load(open(sys.argv[1]))
print(f"\nwrote {w['bytes'] / 2**30:.2f} GiB with sluice write: {w['gib_per_s']:.2f} GiB/s, path {w['path']} ({w['reason']})\n")
print(f"{'memory':<7} {'path':<7} {'engine':<7} {'O_DIRECT':<9} {'GiB/s':>7} {'CPU s/GiB':>10}  reason")
for row in sys.argv[2:]:
    engine, direct, memory, js = row.split("|", 3)
    r = json.loads(js)
    gib = r["bytes"] / 2**30
    print(f"{memory:<7} {r['path']:<7} {engine:<7} {direct:<9} {r['gib_per_s']:>7.2f} {r['cpu_seconds'] / gib:>10.3f}  {r['reason']}")
print("\nBuffered rows read from the page cache (warmed by a first round); O_DIRECT rows from the device.")
print("gpu rows: GPU memory on the first CUDA GPU, or on the simulated device (host memory with a")
print("modelled copy engine, SLUICE_SIM_H2D_GBPS) when there is none; CPU time includes copying back.")
PY
