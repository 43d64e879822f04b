#!/usr/bin/env bash
# make demo: a generated 1 GiB file in a temporary folder, read through every transfer type this
# machine offers (sluice bench --compare all), with the table of medians and ratios, cold (each
# run starts with the file dropped from the page cache, as fio's invalidate=1) and then one warm
# line per type (--warm: each run starts with it cached); and both as an HTML report (sluice
# report) that outlives the temporary folder: beside the build (build/release/demo-report.html
# for make demo), or at $SLUICE_DEMO_REPORT.
# Runs are size-bound (each reads the file once): a time-bound run would wrap around the file,
# and a buffered type's later passes would come from the cache its first pass filled.
# Usage: tools/demo.sh path/to/sluice [SIZE]
set -euo pipefail
sluice=${1:?usage: demo.sh SLUICE [SIZE]}
size=${2:-1G}
dir=$(mktemp -d "${TMPDIR:-/var/tmp}/sluice-demo.XXXXXX")
trap 'rm -rf "$dir"' EXIT
report=${SLUICE_DEMO_REPORT:-$(cd "$(dirname "$sluice")/.." && pwd)/demo-report.html}
common=(--file "$dir/data.bin" --compare all --block-size 1M --iodepth 8 --warmup 0.5 --device auto)

echo "sluice demo: writing a $size file of random bytes in $dir ..."
head -c "$size" /dev/urandom > "$dir/source.bin"
"$sluice" write "$dir/source.bin" "$dir/data.bin" --fsync
rm -f "$dir/source.bin"
echo
echo "sluice demo: reading it through every transfer type, 3 interleaved rounds, each run reading"
echo "the whole file once, from the storage: each starts with the file dropped from the page cache"
echo "(GPU types use the first CUDA GPU, or the simulated device when there is none)"
echo
"$sluice" bench "${common[@]}" --repeat 3 --json "$dir/cold.json"
echo
echo "Cold, every type reads the storage: cpu-gpu and cpu-cached-gpu through the page cache, the"
echo "others with O_DIRECT. A gpu-* type marked 'fell back' ran on the bounce path, and says why."
echo
echo "sluice demo: the same, warm (--warm), medians of 2 rounds: each run starts with the file in"
echo "the page cache, and the O_DIRECT types take what it holds from it (cache_policy auto), as"
echo "sluice read does"
echo
"$sluice" bench "${common[@]}" --repeat 2 --warm --json "$dir/warm.json" | sed -n '/^xfer  *bs  *rounds/,$p'
echo
"$sluice" report "$dir/cold.json" "$dir/warm.json" --label cold --label warm \
  --title "sluice demo: every transfer type, cold and warm" --out "$report" >/dev/null
echo "sluice demo: the comparison as a report (charts, latency, system): $report"
