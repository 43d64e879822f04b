#!/usr/bin/env bash
# host-vs-fio.sh: sluice's host read path against fio on the same file, block size and queue
# depth, in interleaved rounds (fio, sluice, sluice-defaults, fio, sluice, ...), as DESIGN.md
# "Performance method" asks: shared machines are noisy, so compare side by side and quote medians
# and ratios. Prints per-round throughput, medians, the ratio sluice/fio of the medians, CPU
# seconds per GiB and their ratio. Exits non-zero only when something fails to run; a low ratio
# is a result, not a failure (targets live in the issue/notes, not here).
#
#   bench/host-vs-fio.sh [--bench PATH] [--file PATH] [--size 2G] [--keep] [--rounds 5]
#                        [--qd 16] [--bs 1M] [--no-defaults] [--hugepages] [--json-out FILE]
#
# Rows:
#   fio               fio --ioengine=io_uring --direct=1 --rw=read --bs=BS --iodepth=QD --numjobs=1
#   sluice 1st call   sluice_host_read_bench, SLUICE_ENGINE=uring SLUICE_THREADS=1
#                     SLUICE_QUEUE_DEPTH=QD SLUICE_IO_SIZE=BS: the first sluice::read of a fresh
#                     process (includes ring set-up and buffer registration, as a one-shot loader
#                     would pay)
#   sluice 2nd call   the same process, second read: the steady-state engine, the like-for-like
#                     comparison with fio (whose timing and CPU figures exclude its set-up)
#   sluice defaults   no SLUICE_* settings at all (engine auto, threads min(4, cores), ...),
#                     1st and 2nd call; --no-defaults leaves these rows out
#
# CPU: fio's usr_cpu+sys_cpu (percent of its job runtime) times that runtime; sluice's is the
# getrusage(RUSAGE_SELF) user+sys delta around the sluice::read call.
#
# --hugepages puts both sides' buffers on 2 MiB pages (fio --iomem=shmhuge, with hugetlb pages
# reserved for the run and the previous count restored after; sluice madvise(MADV_HUGEPAGE)).
# Without it each side has its natural buffer: fio a small ring of QD buffers faulted 4 KiB at a
# time, sluice one file-sized buffer. On devices that pay per scatter-gather segment
# (virtio-blk), physically contiguous memory is much faster, so compare both modes before
# crediting (or blaming) the engine. The benchmark reports the physical segments per I/O of its
# buffer (from /proc/self/pagemap, as root): ~1 on huge pages, up to io_size/4 KiB on scattered
# 4 KiB pages, and anywhere between for a fresh 4 KiB-page buffer depending on how fragmented
# free memory is at that moment; fio's 4 KiB-page ring is typically fully scattered.
#
# The file (default: a fresh SIZE file written by fio in a temporary folder under /var/tmp) is
# fsynced and dropped from the page cache before the rounds (drop_caches as root, else
# posix_fadvise(DONTNEED)); a file this script created is removed at the end unless --keep; a
# file given with --file that already existed is never removed. An existing --file
# is used whole (--size defaults to its size; a different --size is an error, since the
# benchmark reads whole files).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)

bench=${SLUICE_BENCH:-}
file=
size=2G
size_given=0
keep=0
rounds=5
qd=16
bs=1M
defaults=1
hugepages=0
json_out=

die() { echo "host-vs-fio: $*" >&2; exit 2; }
usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit "${1:-0}"; }

while [[ $# -gt 0 ]]; do
  case $1 in
    --bench) bench=${2:?--bench needs a path}; shift 2 ;;
    --file) file=${2:?--file needs a path}; shift 2 ;;
    --size) size=${2:?--size needs a size}; size_given=1; shift 2 ;;
    --keep) keep=1; shift ;;
    --rounds) rounds=${2:?--rounds needs a count}; shift 2 ;;
    --qd) qd=${2:?--qd needs a depth}; shift 2 ;;
    --bs) bs=${2:?--bs needs a size}; shift 2 ;;
    --no-defaults) defaults=0; shift ;;
    --hugepages) hugepages=1; shift ;;
    --json-out) json_out=${2:?--json-out needs a path}; shift 2 ;;
    -h|--help) usage 0 ;;
    *) echo "host-vs-fio: unknown argument '$1'" >&2; usage 2 ;;
  esac
done

[[ $rounds =~ ^[1-9][0-9]*$ ]] || die "--rounds wants a positive count, got '$rounds'"
[[ $qd =~ ^[1-9][0-9]*$ ]] || die "--qd wants a positive depth, got '$qd'"
size_bytes=$(numfmt --from=iec "$size" 2>/dev/null) || die "bad --size '$size' (e.g. 2G, 512M)"
bs_bytes=$(numfmt --from=iec "$bs" 2>/dev/null) || die "bad --bs '$bs' (e.g. 1M, 128K)"
(( bs_bytes % 4096 == 0 && bs_bytes > 0 )) || die "--bs must be a multiple of 4096"
(( size_bytes % bs_bytes == 0 )) || die "--size must be a multiple of --bs"

command -v fio >/dev/null || die "fio not found (apt-get install fio)"
command -v python3 >/dev/null || die "python3 not found"
if [[ -z $bench ]]; then
  # The newest build of the benchmark under build/.
  # shellcheck disable=SC2012
  bench=$(ls -t "$repo"/build/*/bin/sluice_host_read_bench 2>/dev/null | head -n1 || true)
  [[ -n $bench ]] || die "no build/*/bin/sluice_host_read_bench: build it (cmake --build BUILD --target sluice_host_read_bench) or pass --bench PATH"
fi
[[ -x $bench ]] || die "benchmark program '$bench' is not executable"

work=$(mktemp -d "${TMPDIR:-/var/tmp}/sluice-host-vs-fio.XXXXXX")
created=
hp_restore=
cleanup() {
  if [[ -n $hp_restore ]]; then echo "$hp_restore" > /proc/sys/vm/nr_hugepages || true; fi
  if [[ -n $created && $keep -eq 0 ]]; then rm -f "$created"; fi
  if [[ $keep -eq 1 && -n $created ]]; then echo "kept $created"; fi
  rm -rf "$work"
}
trap cleanup EXIT

# --- the file ---------------------------------------------------------------------------------
if [[ -z $file ]]; then
  file="$work/data.bin"
  if [[ $keep -eq 1 ]]; then file=$(mktemp "${TMPDIR:-/var/tmp}/sluice-host-vs-fio.XXXXXX.bin"); rm -f "$file"; fi
fi
if [[ -e $file ]]; then
  [[ -f $file ]] || die "$file is not a regular file"
  have=$(stat -c %s "$file")
  if [[ $size_given -eq 0 ]]; then size_bytes=$have; size=$have; fi
  (( have == size_bytes )) || die "$file has $have bytes, not --size $size ($size_bytes): the benchmark reads whole files"
  (( size_bytes > 0 && size_bytes % bs_bytes == 0 )) || die "$file: its size $size_bytes is not a multiple of --bs $bs"
  echo "using existing $file ($have bytes)"
else
  echo "writing $size to $file with fio ..."
  created=$file
  fio --name=fill --filename="$file" --rw=write --bs=1M --size="$size_bytes" --direct=1 \
      --ioengine=psync --end_fsync=1 --output="$work/fill.txt" >/dev/null \
    || die "fio could not write $file (see above)"
fi
sync "$file" 2>/dev/null || sync
if [[ $(id -u) -eq 0 ]] && echo 1 > /proc/sys/vm/drop_caches 2>/dev/null; then
  cache_note="page cache dropped (drop_caches)"
else
  python3 -c 'import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd,0,0,os.POSIX_FADV_DONTNEED)' "$file" \
    && cache_note="file dropped from the page cache (posix_fadvise DONTNEED)" \
    || cache_note="could not drop the page cache (reads are O_DIRECT anyway)"
fi

# --- huge pages -------------------------------------------------------------------------------
fio_mem=()
bench_mem=()
if [[ $hugepages -eq 1 ]]; then
  [[ $(id -u) -eq 0 ]] || die "--hugepages needs root (it reserves hugetlb pages for fio)"
  thp=$(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || echo "[never]")
  [[ $thp == *"[never]"* ]] && die "--hugepages: transparent huge pages are disabled ($thp)"
  old=$(cat /proc/sys/vm/nr_hugepages)
  free_hp=$(awk '/HugePages_Free/ {print $2}' /proc/meminfo)
  need=$(( (bs_bytes * qd + (2 << 20) - 1) / (2 << 20) + 2 ))
  if (( free_hp < need )); then
    hp_restore=$old
    echo $(( old + need - free_hp )) > /proc/sys/vm/nr_hugepages
    free_hp=$(awk '/HugePages_Free/ {print $2}' /proc/meminfo)
    (( free_hp >= need )) || die "--hugepages: could only get $free_hp free hugetlb pages, need $need"
  fi
  fio_mem=(--iomem=shmhuge)
  bench_mem=(--hugepages)
fi

# --- the rounds -------------------------------------------------------------------------------
# Each configuration runs with no inherited SLUICE_* setting, so only what the row says applies.
clean_env=(env)
while IFS='=' read -r name _; do
  [[ $name == SLUICE_* ]] && clean_env+=(-u "$name")
done < <(env)

run_fio() {  # round
  fio --name=read --filename="$file" --ioengine=io_uring --direct=1 --rw=read --bs="$bs_bytes" \
      --iodepth="$qd" --numjobs=1 --size="$size_bytes" "${fio_mem[@]}" --output-format=json \
      --output="$work/fio.$1.json" >/dev/null \
    || die "fio failed in round $1"
}
run_sluice() {  # round label env...
  local round=$1 label=$2
  shift 2
  "${clean_env[@]}" "$@" "$bench" "$file" --repeat 2 --json "${bench_mem[@]}" \
      > "$work/$label.$round.jsonl" \
    || die "$bench failed in round $round ($label)"
}

configs="fio | sluice QD=$qd threads=1"
if [[ $defaults -eq 1 ]]; then configs+=" | sluice defaults"; fi
echo "$rounds rounds of: $configs; on $file ($size_bytes bytes, bs $bs); $cache_note"
for ((r = 1; r <= rounds; ++r)); do
  run_fio "$r"
  run_sluice "$r" tuned SLUICE_ENGINE=uring SLUICE_THREADS=1 SLUICE_QUEUE_DEPTH="$qd" SLUICE_IO_SIZE="$bs_bytes"
  if [[ $defaults -eq 1 ]]; then run_sluice "$r" defaults; fi
  echo "  round $r/$rounds done"
done

# --- the table --------------------------------------------------------------------------------
python3 - "$work" "$rounds" "$defaults" "$file" "$size_bytes" "$bs" "$qd" "$hugepages" \
    "$bench" "${json_out:-}" <<'PY'
import json, os, platform, statistics, subprocess, sys

work, rounds, defaults, path, size, bs, qd, huge, bench, json_out = sys.argv[1:]
rounds, defaults, size, huge = int(rounds), defaults == "1", int(size), huge == "1"
GiB = float(1 << 30)

rows = {}  # label -> list of {gibs, cpu_per_gib, detail}
def add(label, gibs, cpu_per_gib, detail=""):
    rows.setdefault(label, []).append({"gib_per_s": gibs, "cpu_s_per_gib": cpu_per_gib,
                                       "detail": detail})

fio_version = "?"
for r in range(1, rounds + 1):
    d = json.load(open(os.path.join(work, f"fio.{r}.json")))
    fio_version = d.get("fio version", "?")
    job = d["jobs"][0]
    if job.get("error", 0):
        sys.exit(f"host-vs-fio: fio reported error {job['error']} in round {r}")
    rd = job["read"]
    gib = rd["io_bytes"] / GiB
    cpu = (job["usr_cpu"] + job["sys_cpu"]) / 100.0 * job["job_runtime"] / 1000.0
    levels = job.get("iodepth_level", {})
    at_qd = sum(v for k, v in levels.items()
                if k.lstrip(">=").isdigit() and int(k.lstrip(">=")) >= int(qd))
    add("fio", rd["bw_bytes"] / GiB, cpu / gib,
        f"--ioengine=io_uring --direct=1 --bs={bs} --iodepth={qd}; "
        f"{at_qd:.1f}% of the time at depth >= {qd} (last round)")

sluice_rows = [("tuned", f"sluice QD={qd} threads=1")]
if defaults:
    sluice_rows.append(("defaults", "sluice defaults"))
reasons = {}
segs = {}  # label -> physical segments per io_size of the destination, per round
for key, name in sluice_rows:
    for r in range(1, rounds + 1):
        runs = [json.loads(l) for l in open(os.path.join(work, f"{key}.{r}.jsonl")) if l.strip()]
        if len(runs) != 2:
            sys.exit(f"host-vs-fio: {key} round {r}: expected 2 runs, got {len(runs)}")
        for run, which in zip(runs, ("1st call", "2nd call")):
            if run["bytes"] != size:
                sys.exit(f"host-vs-fio: {key} round {r} read {run['bytes']} of {size} bytes")
            label = f"{name} ({which})"
            add(label, run["gib_per_s"], run["cpu_seconds_per_gib"])
            segs.setdefault(label, []).append(run.get("buffer_segments_per_io"))
            reasons[label] = (f"{run['path']}: {run['reason']}; engine={run['engine']} "
                              f"threads={run['threads']} qd={run['queue_depth']} "
                              f"io_size={run['io_size']}; buffer: "
                              f"{run['buffer_huge_bytes'] / GiB:.2f} GiB in huge pages")

def med(label, key):
    return statistics.median(x[key] for x in rows[label])

def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True).stdout.strip()
    except Exception:
        return "?"

dev = sh(f"df --output=source {path} | tail -n1")
fstype = sh(f"df --output=fstype {path} | tail -n1")
blk = os.path.basename(os.path.realpath(dev)) if dev.startswith("/dev/") else ""
sched = sh(f"cat /sys/block/{blk}/queue/scheduler 2>/dev/null") if blk else ""
if "[" in sched:
    sched = sched.split("[", 1)[1].split("]", 1)[0]
print()
print(f"host: {platform.node()} kernel {platform.release()}, {os.cpu_count()} CPUs; "
      f"{fio_version}; bench {bench}")
print(f"file: {path} ({size / GiB:.2f} GiB) on {dev} ({fstype}), scheduler {sched or '?'}; "
      f"bs {bs}, QD {qd}, {rounds} interleaved rounds; "
      f"buffers: {'2 MiB pages (fio --iomem=shmhuge, sluice MADV_HUGEPAGE)' if huge else 'natural (4 KiB pages)'}")
print()
w = max(len(k) for k in rows)
head = f"{'GiB/s':<{w}} " + " ".join(f"{'r' + str(i):>6}" for i in range(1, rounds + 1))
head += f" {'median':>7} {'vs fio':>7} {'paired':>7} | {'CPU s/GiB':>9} {'vs fio':>7} {'paired':>7}"
print(head)
print("-" * len(head))
fio_t, fio_c = med("fio", "gib_per_s"), med("fio", "cpu_s_per_gib")
summary = {"file": path, "bytes": size, "bs": bs, "qd": int(qd), "rounds": rounds,
           "hugepages": huge, "fio_version": fio_version, "rows": {}}
def paired(label, key):
    # Median of the per-round ratios: each sluice run against the fio run just before it.
    return statistics.median(x[key] / f[key] for x, f in zip(rows[label], rows["fio"]))
for label, xs in rows.items():
    t, c = med(label, "gib_per_s"), med(label, "cpu_s_per_gib")
    line = f"{label:<{w}} " + " ".join(f"{x['gib_per_s']:6.3f}" for x in xs)
    if label == "fio":
        line += f" {t:7.3f} {'':>7} {'':>7} | {c:9.4f} {'':>7} {'':>7}"
    else:
        line += (f" {t:7.3f} {t / fio_t:6.3f}x {paired(label, 'gib_per_s'):6.3f}x"
                 f" | {c:9.4f} {c / fio_c:6.3f}x {paired(label, 'cpu_s_per_gib'):6.3f}x")
    print(line)
    summary["rows"][label] = {"gib_per_s": [x["gib_per_s"] for x in xs],
                              "cpu_s_per_gib": [x["cpu_s_per_gib"] for x in xs],
                              "median_gib_per_s": t, "median_cpu_s_per_gib": c,
                              "throughput_vs_fio": t / fio_t, "cpu_per_gib_vs_fio": c / fio_c,
                              "detail": reasons.get(label, ""),
                              "buffer_segments_per_io": segs.get(label, [])}
    if label != "fio":
        summary["rows"][label]["paired_throughput_vs_fio"] = paired(label, "gib_per_s")
        summary["rows"][label]["paired_cpu_per_gib_vs_fio"] = paired(label, "cpu_s_per_gib")
print()
print("vs fio: ratio of the medians; paired: median of the per-round ratios (each sluice run over")
print("the fio run of its round). Throughput: higher is better; CPU s/GiB: lower is better.")
for label, why in reasons.items():
    known = [x for x in segs.get(label, []) if x is not None]
    seg = (f", {min(known):.1f}-{max(known):.1f} physical segments per I/O"
           if known else ", physical segments per I/O unknown (need root)")
    print(f"  {label}: {why}{seg}")
print(f"  fio: {rows['fio'][-1]['detail']}")
if json_out:
    with open(json_out, "w") as f:
        json.dump(summary, f, indent=2)
    print(f"summary written to {json_out}")
PY
