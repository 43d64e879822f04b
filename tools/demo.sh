#!/usr/bin/env bash
# make demo: a generated 1 GiB file in a temporary folder, read through every transfer type this
# machine offers (sluice bench --compare all), with the table of medians and ratios, and the same
# comparison as an HTML report (sluice report) that outlives the temporary folder: beside the
# build (build/release/demo-report.html for make demo), or at $SLUICE_DEMO_REPORT.
# Usage: tools/demo.sh path/to/sluice [SIZE]
set -euo pipefail
sluice=${1:?usage: demo.sh SLUICE [SIZE]}
size=${2:-1G}
dir=$(mktemp -d "${TMPDIR:-/var/tmp}/sluice-demo.XXXXXX")
trap 'rm -rf "$dir"' EXIT
report=${SLUICE_DEMO_REPORT:-$(cd "$(dirname "$sluice")/.." && pwd)/demo-report.html}

echo "sluice demo: writing a $size file of random bytes in $dir ..."
head -c "$size" /dev/urandom > "$dir/source.bin"
"$sluice" write "$dir/source.bin" "$dir/data.bin" --fsync
rm -f "$dir/source.bin"
echo
echo "sluice demo: reading it through every transfer type, 2 interleaved rounds of 3 s each"
echo "(GPU types use the first CUDA GPU, or the simulated device when there is none)"
echo
"$sluice" bench --file "$dir/data.bin" --compare all --block-size 1M --iodepth 8 --time 3 \
  --warmup 1 --repeat 2 --device auto --json "$dir/demo.json"
echo
echo "cpu-gpu and cpu-cached-gpu read through the page cache (warm here); the other types use"
echo "O_DIRECT. A gpu-* type marked 'fell back' ran on the bounce path, and says why."
echo
"$sluice" report "$dir/demo.json" --label demo --title "sluice demo: every transfer type" --out "$report" >/dev/null
echo "sluice demo: the comparison as a report (charts, latency, system): $report"
