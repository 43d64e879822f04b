#!/usr/bin/env bash
# vs-fio.sh: `sluice bench --xfer cpu-only` against fio on the same file, block size, queue depth
# and thread count, in interleaved rounds, as DESIGN.md's performance method asks. Prints both
# medians, the ratio sluice/fio of the medians and the median of the per-round ratios (paired),
# for throughput, IOPS and latency p50/p99. A low ratio is a result, not a failure: the script
# exits non-zero only when something fails to run (2), or when --hugepages cannot be had (3).
#
# Like for like (docs/bench.md, "Like for like"): the same settings, cache state, page backing
# and loop shape on both sides, and the order of the sides alternates: in odd rounds fio runs
# each case first, in even rounds sluice does.
# Cache: both sides read with O_DIRECT, so neither reads from the page cache.
#
#   bench/vs-fio.sh [--sluice PATH] [--file PATH] [--size 1G] [--rounds 3] [--time 5]
#                   [--threads 1] [--cases "read:1M:1 read:1M:32 randread:4K:1 randread:4K:32"]
#                   [--hugepages] [--shape fio|batched|native] [--library] [--library-device DEV]
#                   [--fast-device]
#                   [--loop-dio on|off] [--keep] [--json-out FILE]
#
# Fast device (--fast-device, root): the file lives on ext4 on a loop device over a file in
# /dev/shm (tmpfs), a device that does a 4 KiB read in a few microseconds of CPU, where the I/O
# loop rather than the medium sets the rate. The script creates it (--size plus 512 MiB), mounts
# it on a fresh folder, and unmounts, detaches and deletes it all on exit. --loop-dio sets the
# loop device's direct I/O to its backing file (losetup --direct-io; default off, the kernel's
# default).
#
# Library (--library): a third side, the library path applications use:
# sluice_async_read_bench (read_async with QD reads in flight, the oldest waited for first) on
# the same file, block size and depth; read cases and one thread only. Its rows compare it with
# fio the same way. --library-device DEV (sim, cuda:N) adds a fourth side, "libdev": the same
# bench reading into DEV's memory (--device DEV), the path an application reading into a GPU
# takes (bounce without GPUDirect: docs/tuning.md, "Small reads into device memory").
#
# Both sides: O_DIRECT, io_uring, time-based runs of --time seconds over the first --size bytes
# of the file; with --threads N each thread covers its own 1/N slice (fio: size=S/N,
# offset_increment=S/N, group_reporting).
#   fio     fio --ioengine=io_uring --direct=1 --fixedbufs=1 --registerfiles=1 --rw=RW --bs=BS
#               --iodepth=QD --numjobs=N --time_based --runtime=T --output-format=json
#           (registered buffers and file, as sluice's cpu-only has: fio's best io_uring set-up
#           without polling)
#   sluice  sluice bench --xfer cpu-only --rw RW --block-size BS --iodepth QD --threads N
#               --time T --json FILE
# Latency: sluice's per-I/O latency runs from prepare() to the reaped completion, so it includes
# the submitting io_uring_enter; its like-for-like peer is fio's total latency (lat, with
# --lat_percentiles=1). Completion latency (from the submitting syscall's return to the reaped
# completion) is compared too: fio's clat against sluice's clat_us, which sluice measures when it
# submits in syscalls of its own (--submit-batch, the fio shape below).
# Loop shape (--shape): the latency percentiles depend on how completions are collected and
# requests submitted, so both sides run the same loop:
#   fio      (default) fio's defaults: one completion per wait (iodepth_batch_complete_max=1),
#            one io_uring_enter per new request (iodepth_batch_submit=1); sluice gets
#            --reap-batch 1 --submit-batch 1.
#   batched  every ready completion at once, every freed slot refilled, the refill submitted
#            at once: sluice gets --submit-batch QD, fio --iodepth_batch_submit=QD
#            --iodepth_batch_complete_max=QD.
#   native   each tool's own default loop, what a user of either gets: fio's defaults and
#            sluice bench's (a refill submitted QD/16 requests at a time); sluice measures no
#            clat there.
# At queue depth 32 the batched shape shows a higher median and a shorter tail on both tools
# (docs/bench.md, "Comparing with fio"); at queue depth 1 the shapes are the same.
#
# CPU per I/O: each tool's CPU time (user + system) over its I/Os: fio's usr_cpu and sys_cpu of
# its job threads; sluice's and the library bench's whole process.
# Buffers, the same page backing on both sides: by default 4 KiB pages (fio iomem=malloc,
# sluice --no-hugepages). --hugepages gives both transparent huge pages through
# madvise(MADV_HUGEPAGE): sluice its default huge-page buffers; fio --iomem=malloc
# --iomem_align=2M with GLIBC_TUNABLES=glibc.malloc.hugetlb=1, which makes glibc madvise its
# mmap'd allocations (glibc >= 2.35). Where transparent huge pages are disabled it says so and
# exits 3 without running. The table says how much of each process's memory the kernel really
# put on huge pages (the most AnonHugePages seen during its runs). Devices that pay per
# scatter-gather segment (virtio-blk) read 1 MiB much faster into huge pages, so the two modes
# must not be mixed in one comparison.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)

sluice=${SLUICE:-}
file=
size=1G
rounds=3
runtime=5
threads=1
cases="read:1M:1 read:1M:32 randread:4K:1 randread:4K:32"
keep=0
json_out=
hugepages=0
shape=fio
library=0
library_device=
fast=0
loop_dio=off
py=/usr/bin/python3
[[ -x $py ]] || py=python3

die() { echo "vs-fio: $*" >&2; exit 2; }
usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit "${1:-0}"; }

while [[ $# -gt 0 ]]; do
  case $1 in
    --sluice) sluice=${2:?}; shift 2 ;;
    --file) file=${2:?}; shift 2 ;;
    --size) size=${2:?}; shift 2 ;;
    --rounds) rounds=${2:?}; shift 2 ;;
    --time) runtime=${2:?}; shift 2 ;;
    --threads) threads=${2:?}; shift 2 ;;
    --cases) cases=${2:?}; shift 2 ;;
    --keep) keep=1; shift ;;
    --hugepages) hugepages=1; shift ;;
    --shape) shape=${2:?}; shift 2 ;;
    --library) library=1; shift ;;
    --library-device) library_device=${2:?}; shift 2 ;;
    --fast-device) fast=1; shift ;;
    --loop-dio) loop_dio=${2:?}; shift 2 ;;
    --json-out) json_out=${2:?}; shift 2 ;;
    -h|--help) usage 0 ;;
    *) echo "vs-fio: unknown argument '$1'" >&2; usage 2 ;;
  esac
done

command -v fio >/dev/null || die "fio is not installed (apt-get install fio)"
command -v "$py" >/dev/null || die "python3 is needed to read the JSON results"
if [[ -z $sluice ]]; then
  for c in "$repo/build/release/bin/sluice" "$repo/build/bench/bin/sluice"; do
    [[ -x $c ]] && { sluice=$c; break; }
  done
fi
[[ -x $sluice ]] || die "no sluice binary (build it, or pass --sluice PATH)"
"$sluice" --version >/dev/null || die "$sluice does not run (see above)"
async_bench=$(dirname "$sluice")/sluice_async_read_bench
if [[ $library = 1 || -n $library_device ]]; then
  [[ -x $async_bench ]] || die "--library needs $async_bench (build the sluice_async_read_bench target)"
  [[ $threads = 1 ]] || die "--library compares one thread only"
fi
[[ $loop_dio == on || $loop_dio == off ]] || die "--loop-dio is on or off, not '$loop_dio'"
[[ $rounds =~ ^[1-9][0-9]*$ ]] || die "--rounds wants a positive count"
[[ $threads =~ ^[1-9][0-9]*$ ]] || die "--threads wants a positive count"
[[ $shape == fio || $shape == batched || $shape == native ]] || die "--shape is fio, batched or native, not '$shape'"
size_bytes=$(numfmt --from=iec "$size") || die "bad --size '$size'"
slice=$(( size_bytes / threads / 1048576 * 1048576 ))
(( slice > 0 )) || die "--size too small for $threads threads"

work=$(mktemp -d "${TMPDIR:-/var/tmp}/vs-fio.XXXXXX")
created=0
loopdev=
image=
mnt=
cleanup() {
  if [[ -n $mnt ]]; then umount "$mnt" 2>/dev/null || true; rmdir "$mnt" 2>/dev/null || true; fi
  if [[ -n $loopdev ]]; then losetup -d "$loopdev" 2>/dev/null || true; fi
  if [[ -n $image ]]; then rm -f "$image"; fi
  rm -rf "$work"
  if [[ $created = 1 && $keep = 0 && -z $mnt ]]; then rm -f "$file"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ext4 on a loop device over tmpfs: created here, removed by cleanup.
setup_fast_device() {
  (( EUID == 0 )) || die "--fast-device needs root (losetup, mount)"
  for t in losetup mkfs.ext4 mount umount; do command -v "$t" >/dev/null || die "--fast-device needs $t"; done
  [[ -z $file ]] || die "--fast-device makes its own file; leave out --file"
  image=$(mktemp /dev/shm/vs-fio-fast.XXXXXX.img)
  truncate -s $(( size_bytes + 512 * 1048576 )) "$image"
  mkfs.ext4 -q -F "$image" || die "mkfs.ext4 failed"
  loopdev=$(losetup -f --show --direct-io="$loop_dio" "$image") || die "losetup failed"
  mnt=$(mktemp -d "${TMPDIR:-/var/tmp}/vs-fio-mnt.XXXXXX")
  mount "$loopdev" "$mnt" || die "mount $loopdev failed"
  file=$mnt/data.bin
  fast_note="; fast device: ext4 on $loopdev over tmpfs, loop direct I/O $(cat "/sys/block/${loopdev#/dev/}/loop/dio" 2>/dev/null)"
}
fast_note=
if [[ $fast = 1 ]]; then
  setup_fast_device
fi
if [[ -z $file ]]; then
  file=$work/data.bin
  created=1
fi

# --- buffers ------------------------------------------------------------------------------------
fio_mem=(--iomem=malloc)
sluice_mem=(--no-hugepages)
mem_note="4 KiB pages on both sides (fio iomem=malloc, sluice --no-hugepages)"
fio_env=()
if [[ $hugepages = 1 ]]; then
  thp=$(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || echo "[never]")
  if [[ $thp == *"[never]"* ]]; then
    echo "vs-fio: --hugepages: transparent huge pages are disabled ($thp); skipping the huge-page comparison" >&2
    exit 3
  fi
  fio_mem=(--iomem=malloc --iomem_align=2M)
  fio_env=(GLIBC_TUNABLES=glibc.malloc.hugetlb=1)
  sluice_mem=()
  mem_note="transparent huge pages on both sides (madvise(MADV_HUGEPAGE): sluice's default buffers, fio iomem=malloc iomem_align=2M with glibc.malloc.hugetlb=1)"
fi

# Runs a command in the background and appends the most AnonHugePages (KiB) its process showed
# while running to FILE: how much of its memory the kernel really backed with huge pages.
run_sampled() {  # FILE command...
  local out=$1 pid kb max=0
  shift
  "$@" &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    kb=$(awk '/^AnonHugePages:/ {print $2}' "/proc/$pid/smaps_rollup" 2>/dev/null || true)
    (( ${kb:-0} > max )) && max=${kb:-0}
    sleep 0.2
  done
  wait "$pid" || return 1
  echo "$max" >> "$out"
}

if [[ ! -f $file ]] || (( $(stat -c %s "$file") < size_bytes )); then
  echo "vs-fio: laying out $size in $file ..." >&2
  fio --name=layout --filename="$file" --rw=write --bs=1M --size="$size_bytes" --direct=1 \
      --ioengine=io_uring --iodepth=8 --end_fsync=1 --output=/dev/null
fi

echo "vs-fio: sluice $("$sluice" --version | awk '{print $2}'), $(fio --version); file $file ($(df -T "$file" | awk 'NR==2{print $2}')), $size, $threads thread(s), ${runtime}s runs, $rounds rounds; $mem_note; loop shape $shape$fast_note" >&2
echo "vs-fio: load before: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs" >&2
results=$work/results.txt
run_fio() {  # round case
  local round=$1 c=$2 rw bs qd out
  IFS=: read -r rw bs qd <<<"$c"
  out=$work/fio-$round-$rw-$bs-$qd.json
  run_sampled "$work/fio.$rw:$bs:$qd.thp" env "${fio_env[@]}" fio --name=vsfio --filename="$file" --rw="$rw" --bs="$bs" \
      --iodepth="$qd" --ioengine=io_uring --direct=1 --fixedbufs=1 --registerfiles=1 --numjobs="$threads" \
      --size="$slice" --offset_increment="$slice" --thread --group_reporting --time_based --runtime="$runtime" \
      --randrepeat=0 --lat_percentiles=1 "${fio_mem[@]}" "${fio_shape[@]}" --output-format=json --output="$out" \
    || die "fio failed in round $round, case $c (see above)"
  echo "fio $round $c $out" >>"$results"
}
run_sluice() {  # round case
  local round=$1 c=$2 rw bs qd out
  IFS=: read -r rw bs qd <<<"$c"
  out=$work/sluice-$round-$rw-$bs-$qd.json
  run_sampled "$work/sluice.$rw:$bs:$qd.thp" "$sluice" bench --file "$file" --size "$((slice * threads))" --xfer cpu-only \
      --rw "$rw" --block-size "$bs" --iodepth "$qd" --threads "$threads" --time "$runtime" --seed "$round" \
      "${sluice_shape[@]}" "${sluice_mem[@]}" --json "$out" >/dev/null \
    || die "sluice bench failed in round $round, case $c (see above)"
  echo "sluice $round $c $out" >>"$results"
}
run_library() {  # round case
  local round=$1 c=$2 rw bs qd out
  IFS=: read -r rw bs qd <<<"$c"
  out=$work/library-$round-$rw-$bs-$qd.json
  # bypass, as fio's direct=1 and sluice bench's default: no residency probe per read.
  SLUICE_CACHE_POLICY=bypass "$async_bench" "$file" --size "$slice" --rw "$rw" --bs "$bs" --iodepth "$qd" --time "$runtime" \
      --seed "$round" --json >"$out" || die "sluice_async_read_bench failed in round $round, case $c"
  echo "library $round $c $out" >>"$results"
}
run_libdev() {  # round case: the library into device memory
  local round=$1 c=$2 rw bs qd out
  IFS=: read -r rw bs qd <<<"$c"
  out=$work/libdev-$round-$rw-$bs-$qd.json
  SLUICE_CACHE_POLICY=bypass "$async_bench" "$file" --size "$slice" --rw "$rw" --bs "$bs" --iodepth "$qd" --time "$runtime" \
      --seed "$round" --device "$library_device" --json >"$out" \
    || die "sluice_async_read_bench --device $library_device failed in round $round, case $c"
  echo "libdev $round $c $out" >>"$results"
}
for round in $(seq 1 "$rounds"); do
  for c in $cases; do
    IFS=: read -r rw _ qd <<<"$c"
    case $shape in
      fio) fio_shape=(); sluice_shape=(--submit-batch 1 --reap-batch 1) ;;
      batched) fio_shape=(--iodepth_batch_submit="$qd" --iodepth_batch_complete_max="$qd")
               sluice_shape=(--submit-batch "$qd") ;;
      native) fio_shape=(); sluice_shape=() ;;
    esac
    sides=(fio sluice)
    [[ $library = 1 && ($rw == read || $rw == randread) ]] && sides+=(library)
    [[ -n $library_device && ($rw == read || $rw == randread) ]] && sides+=(libdev)
    # The first side rotates with the round: fio first in odd rounds, sluice in even ones.
    n=${#sides[@]}
    for k in $(seq 0 $((n - 1))); do
      side=${sides[$(( (k + round - 1) % n ))]}
      (( k == 0 )) && first=$side
      "run_$side" "$round" "$c"
    done
    echo "  round $round $c done ($first first; load $(cut -d' ' -f1 /proc/loadavg))" >&2
  done
done
echo "vs-fio: load after: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs" >&2

"$py" - "$results" "$json_out" "$shape" "$hugepages" "$work" "$threads" <<'PY'
import json, os, statistics, sys
nan = float("nan")
threads = int(sys.argv[6])
rows = {}
for line in open(sys.argv[1]):
    tool, rnd, case, path = line.split()
    d = json.load(open(path))
    if tool == "fio":
        job = d["jobs"][0]
        j = job["read"]
        lat = j["lat_ns"].get("percentile", {})
        clat = j["clat_ns"].get("percentile", {})
        cpu_s = (job["usr_cpu"] + job["sys_cpu"]) / 100 * job["job_runtime"] / 1000
        m = dict(bw=j["bw_bytes"] / 2**30, iops=j["iops"],
                 p50=lat.get("50.000000", 0) / 1e3, p99=lat.get("99.000000", 0) / 1e3,
                 cp50=clat.get("50.000000", 0) / 1e3, cp99=clat.get("99.000000", 0) / 1e3,
                 cpu=cpu_s * 1e6 / j["total_ios"] if j["total_ios"] and threads == 1 else nan)
    elif tool in ("library", "libdev"):
        m = dict(bw=d["gib_per_s"], iops=d["iops"], p50=d["lat_p50_us"], p99=d["lat_p99_us"],
                 cp50=nan, cp99=nan, cpu=d["cpu_us_per_io"])
    else:
        r = d["results"][0]
        m = dict(bw=r["gib_per_s"], iops=r["iops"], p50=r["latency_us"]["p50"], p99=r["latency_us"]["p99"],
                 cpu=(r["cpu_user_s"] + r["cpu_sys_s"]) * 1e6 / r["ios"] if r["ios"] and threads == 1 else nan)
        # sluice's clat exists where it submits in syscalls of its own (--submit-batch N: the
        # fio and batched shapes); its default loop submits the last requests with the wait.
        c = r.get("clat_us")
        m["cp50"], m["cp99"] = (c["p50"], c["p99"]) if c else (nan, nan)
    rows.setdefault(case, {}).setdefault(tool, []).append(m)
out = []
print(f"{'case (rw:bs:qd)':<18} {'side':<8} {'metric':<8} {'fio median':>11} {'side median':>12} {'ratio':>7} {'paired':>7}   per-round fio | side")
metrics = (("bw", "GiB/s"), ("iops", "IOPS"), ("cpu", "CPU us/io"), ("p50", "p50 us"), ("p99", "p99 us"),
           ("cp50", "p50 clat"), ("cp99", "p99 clat"))
for case, t in rows.items():
    for side in ("sluice", "library", "libdev"):
        if side not in t:
            continue
        for key, label in metrics:
            f = [m[key] for m in t["fio"]]
            s = [m[key] for m in t[side]]
            if any(v != v for v in s + f):  # NaN: not measured on this side or in this shape
                continue
            fm, sm = statistics.median(f), statistics.median(s)
            ratio = sm / fm if fm else nan
            # Each run over the fio run of its round: robust to drift between rounds.
            paired = statistics.median(b / a for a, b in zip(f, s) if a) if any(f) else nan
            fmt = (lambda v: f"{v:.3f}") if key == "bw" else (lambda v: f"{v:.0f}") if key == "iops" else (lambda v: f"{v:.2f}") if key == "cpu" else (lambda v: f"{v:.1f}")
            print(f"{case:<18} {side:<8} {label:<8} {fmt(fm):>11} {fmt(sm):>12} {ratio:>6.3f}x {paired:>6.3f}x   "
                  f"{' '.join(fmt(v) for v in f)} | {' '.join(fmt(v) for v in s)}")
            out.append(dict(case=case, side=side, metric=key, fio=fm, value=sm, ratio=ratio, paired=paired,
                            fio_rounds=f, side_rounds=s))
def thp(tool, case):
    try:
        kb = [int(x) for x in open(os.path.join(sys.argv[5], f"{tool}.{case}.thp")) if x.strip()]
    except OSError:
        kb = []
    return f"{min(kb) / 1024:.0f}-{max(kb) / 1024:.0f}" if kb else "?"
pages = "transparent huge pages (madvise)" if sys.argv[4] == "1" else "4 KiB pages"
print(f"loop shape {sys.argv[3]}; buffers: {pages} on both sides (library: 4 KiB-aligned malloc'd buffers; "
      "libdev: the device's memory)")
print("memory the kernel put on huge pages, MiB (most AnonHugePages of each process, over the rounds), fio | sluice: "
      + "; ".join(f"{case} {thp('fio', case)} | {thp('sluice', case)}" for case in rows))
print("cache: every side O_DIRECT (the page cache is bypassed); order: the first side rotates with the round "
      "(fio first in odd rounds, sluice in even ones)")
print("ratio = side median / fio median; paired = median of the per-round ratios")
print("(throughput, IOPS: higher is better; CPU per I/O, latency: lower is better)")
print("CPU us/io: user + system time per I/O (fio's job threads; sluice's and the library bench's whole process)")
print("p50/p99 us: total latency (fio's lat; sluice from prepare() to the reaped completion; library from the")
print("read_async call to the result), submission syscall included; p50/p99 clat: completion latency, from the")
print("submitting syscall's return (fio's clat, sluice's clat_us: measured with --submit-batch, so in the fio and")
print("batched shapes)")
if sys.argv[2]:
    json.dump({"shape": sys.argv[3], "hugepages": sys.argv[4] == "1", "rows": out},
              open(sys.argv[2], "w"), indent=2)
PY
