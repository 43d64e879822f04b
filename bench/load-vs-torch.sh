#!/usr/bin/env bash
# On a GPU machine with python3, torch and safetensors: load the same safetensors checkpoint with
# `sluice load --device cuda:0` and with safetensors.torch.load_file(path, device="cuda:0"),
# interleaved (sluice, torch, sluice, torch), and print both medians and the ratio.
#   bench/load-vs-torch.sh SLUICE_BIN FILE.safetensors [ROUNDS]      (about a minute for 10 GiB)
# The page cache is not dropped: both sides read the same (warm after the first round) file.
set -euo pipefail
sluice=${1:?usage: $0 SLUICE_BIN FILE.safetensors [ROUNDS]}
file=${2:?usage: $0 SLUICE_BIN FILE.safetensors [ROUNDS]}
rounds=${3:-3}
py=${PYTHON:-python3}
if ! "$py" -c 'import torch, safetensors.torch; assert torch.cuda.is_available()' 2>/dev/null; then
  echo "load-vs-torch: skipped (needs python3 with torch, safetensors and a CUDA GPU)"; exit 0
fi
bytes=$(stat -c %s "$file")
s_times=(); t_times=()
for ((r = 1; r <= rounds; r++)); do
  s=$(timeout 60 "$sluice" load "$file" --device cuda:0 --json | "$py" -c 'import json,sys; print(json.load(sys.stdin)["summary"]["seconds"])')
  t=$(timeout 60 "$py" - "$file" <<'PY'
import sys, time, torch
from safetensors.torch import load_file
torch.cuda.init(); torch.zeros(1, device="cuda:0")   # context creation is not timed
t0 = time.perf_counter()
d = load_file(sys.argv[1], device="cuda:0")
torch.cuda.synchronize()
print(time.perf_counter() - t0)
PY
)
  printf 'round %d: sluice %.3f s  torch %.3f s\n' "$r" "$s" "$t"
  s_times+=("$s"); t_times+=("$t")
done
"$py" - "$bytes" "${s_times[*]}" "${t_times[*]}" <<'PY'
import sys, statistics as st
b = int(sys.argv[1]); s = st.median(map(float, sys.argv[2].split())); t = st.median(map(float, sys.argv[3].split()))
g = b / 2**30
print(f"median: sluice load {s:.3f} s ({g/s:.2f} GiB/s), safetensors.torch.load_file {t:.3f} s ({g/t:.2f} GiB/s)")
print(f"ratio sluice/torch throughput: {t/s:.2f}")
PY
