#!/usr/bin/env bash
# host-vs-fio.sh: sluice's host read path (whole-file sluice::read into host memory) against fio
# on the same file, in interleaved rounds, as DESIGN.md "Performance method" asks: shared
# machines are noisy, so compare side by side and quote medians and ratios. Prints per-round
# throughput, medians, the ratio sluice/fio of the medians and the median of the per-round
# ratios, CPU seconds per GiB and their ratios. Exits non-zero only when something fails to run;
# a low ratio is a result, not a failure (targets live in the issue/notes, not here).
#
#   bench/host-vs-fio.sh [--bench PATH] [--file PATH] [--size 2G] [--keep] [--rounds 5]
#                        [--qd 16] [--bs 1M] [--no-defaults] [--hugepages] [--json-out FILE]
#
# Like for like (docs/bench.md, "Like for like"): every ratio is between two runs with the same
# settings, the same cache state, the same buffer page backing and the same timed span, and the
# order of the sides alternates from round to round.
#
# Pairs of rows (each sluice row is compared only with the fio row of its pair):
#   fio QD=QD jobs=1       fio --ioengine=io_uring --direct=1 --rw=read --bs=BS --iodepth=QD
#                          --numjobs=1 --thread, over the whole file
#   sluice QD=QD threads=1 sluice_host_read_bench, SLUICE_ENGINE=uring SLUICE_THREADS=1
#                          SLUICE_QUEUE_DEPTH=QD SLUICE_IO_SIZE=BS
#   fio at sluice defaults fio with sluice's default settings (as `sluice_host_read_bench
#                          --print-config` reports them: threads T = min(4, cores), queue depth
#                          16 per thread, io_size 1 MiB): --numjobs=T --iodepth=16 --bs=1M, each
#                          job reading its own 1/T of the file (sluice's T workers take 1 MiB
#                          chunks from one shared cursor instead: same depth, same bytes)
#   sluice defaults        no SLUICE_* settings at all; --no-defaults leaves this pair out
# Each sluice run reads the file twice in one process: the 2nd call (the steady-state engine) is
# the one compared with fio, whose figures also leave out its set-up. The 1st call (ring set-up
# and buffer registration included, as a one-shot loader pays) is printed without a ratio.
# Order: odd rounds run fio, sluice, fio at defaults, sluice defaults; even rounds the reverse.
#
# Cache: both sides read with O_DIRECT, so neither reads from the page cache; the file is
# fsynced and dropped from it once before the rounds all the same (drop_caches as root, else
# posix_fadvise(DONTNEED)) and the output says which.
#
# CPU: fio's usr_cpu+sys_cpu (percent of its job runtime) times that runtime (summed over the
# jobs); sluice's is the getrusage(RUSAGE_SELF) user+sys delta around the sluice::read call.
#
# Buffers, the same page backing on both sides: by default 4 KiB pages (fio --iomem=malloc,
# sluice a posix_memalign buffer, neither madvised). --hugepages gives both transparent huge
# pages through madvise(MADV_HUGEPAGE): sluice --hugepages on its buffer; fio --iomem=malloc
# --iomem_align=2M with GLIBC_TUNABLES=glibc.malloc.hugetlb=1, which makes glibc madvise its
# mmap'd allocations (glibc >= 2.35). The output shows how much of each side's memory the
# kernel really backed with huge pages (sluice: its buffer; fio: the most AnonHugePages of the
# fio process seen during the run). On devices that pay per scatter-gather segment (virtio-blk),
# physically contiguous memory is much faster, so compare both modes before crediting (or
# blaming) the engine. sluice also reports the physical segments per I/O of its buffer (from
# /proc/self/pagemap, as root): ~1 on huge pages, up to io_size/4 KiB on scattered 4 KiB pages.
#
# The file (default: a fresh SIZE file written by fio in a temporary folder under /var/tmp) is
# removed at the end unless --keep; a file given with --file that already existed is never
# removed. An existing --file is used whole (--size defaults to its size; a different --size is
# an error, since the benchmark reads whole files).
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
cleanup() {
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
fio_mem=(--iomem=malloc)
fio_env=()
bench_mem=()
if [[ $hugepages -eq 1 ]]; then
  thp=$(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || echo "[never]")
  [[ $thp == *"[never]"* ]] && die "--hugepages: transparent huge pages are disabled ($thp)"
  fio_mem=(--iomem=malloc --iomem_align=2M)
  fio_env=(GLIBC_TUNABLES=glibc.malloc.hugetlb=1)
  bench_mem=(--hugepages)
fi

# --- the rounds -------------------------------------------------------------------------------
# Each configuration runs with no inherited SLUICE_* setting, so only what the row says applies.
clean_env=(env)
while IFS='=' read -r name _; do
  [[ $name == SLUICE_* ]] && clean_env+=(-u "$name")
done < <(env)

# sluice's defaults, for the fio run that mirrors them.
defaults_json=$("${clean_env[@]}" "$bench" --print-config) || die "$bench --print-config failed"
read -r def_threads def_qd def_io < <(python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(d["threads"], d["queue_depth"], d["io_size"])' "$defaults_json")
def_slice=$(( size_bytes / def_threads / def_io * def_io ))
if [[ $defaults -eq 1 ]]; then
  (( def_slice > 0 )) || die "--size is too small for sluice's defaults ($def_threads threads of $def_io bytes)"
  (( def_slice * def_threads == size_bytes )) \
    || echo "note: fio at sluice's defaults reads $(( def_slice * def_threads )) of $size_bytes bytes ($def_threads equal slices of whole I/Os)"
fi

# fio in the background so that its huge-page backing can be read while it runs (--thread: one
# process holds every job's buffers); the largest AnonHugePages seen goes to FILE.thp (KiB).
run_fio() {  # out-file fio-args...
  local out=$1 pid kb max=0
  shift
  env "${fio_env[@]}" fio --filename="$file" --ioengine=io_uring --direct=1 --rw=read --thread \
      "${fio_mem[@]}" "$@" --output-format=json --output="$out" >/dev/null &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    kb=$(awk '/^AnonHugePages:/ {print $2}' "/proc/$pid/smaps_rollup" 2>/dev/null || true)
    (( ${kb:-0} > max )) && max=${kb:-0}
    sleep 0.1
  done
  wait "$pid" || return 1
  echo "$max" > "$out.thp"
}
run_side() {  # round side
  local round=$1 side=$2
  case $side in
    fio) run_fio "$work/fio.$round.json" --name=read --bs="$bs_bytes" --iodepth="$qd" --numjobs=1 \
           --size="$size_bytes" || die "fio failed in round $round" ;;
    fio_defaults) run_fio "$work/fio_defaults.$round.json" --name=read --bs="$def_io" --iodepth="$def_qd" \
           --numjobs="$def_threads" --size="$def_slice" --offset_increment="$def_slice" --group_reporting \
           || die "fio (sluice's defaults) failed in round $round" ;;
    tuned) run_sluice "$round" tuned SLUICE_ENGINE=uring SLUICE_THREADS=1 SLUICE_QUEUE_DEPTH="$qd" \
             SLUICE_IO_SIZE="$bs_bytes" ;;
    defaults) run_sluice "$round" defaults ;;
  esac
}
run_sluice() {  # round label env...
  local round=$1 label=$2
  shift 2
  "${clean_env[@]}" "$@" "$bench" "$file" --repeat 2 --json "${bench_mem[@]}" \
      > "$work/$label.$round.jsonl" \
    || die "$bench failed in round $round ($label)"
}

order=(fio tuned)
configs="fio QD=$qd jobs=1 vs sluice QD=$qd threads=1"
if [[ $defaults -eq 1 ]]; then
  order+=(fio_defaults defaults)
  configs+="; fio jobs=$def_threads QD=$def_qd bs=$def_io vs sluice defaults"
fi
echo "$rounds rounds of: $configs; on $file ($size_bytes bytes, bs $bs); $cache_note; both sides O_DIRECT"
for ((r = 1; r <= rounds; ++r)); do
  if (( r % 2 == 1 )); then sides=("${order[@]}"); else sides=(); for ((i = ${#order[@]} - 1; i >= 0; --i)); do sides+=("${order[i]}"); done; fi
  for side in "${sides[@]}"; do run_side "$r" "$side"; done
  echo "  round $r/$rounds done (${sides[*]})"
done

# --- the table --------------------------------------------------------------------------------
python3 - "$work" "$rounds" "$defaults" "$file" "$size_bytes" "$bs" "$qd" "$hugepages" \
    "$bench" "${json_out:-}" "$def_threads" "$def_qd" "$def_io" "$cache_note" <<'PY'
import json, os, platform, statistics, subprocess, sys

(work, rounds, defaults, path, size, bs, qd, huge, bench, json_out,
 def_threads, def_qd, def_io, cache_note) = sys.argv[1:]
rounds, defaults, size, huge = int(rounds), defaults == "1", int(size), huge == "1"
GiB = float(1 << 30)

def fio_runs(key, qd_):
    """Per round: throughput, CPU s/GiB and the fio process's peak huge-page bytes."""
    out, detail, version = [], "", "?"
    for r in range(1, rounds + 1):
        f = os.path.join(work, f"{key}.{r}.json")
        d = json.load(open(f))
        version = d.get("fio version", "?")
        job = d["jobs"][0]
        if job.get("error", 0):
            sys.exit(f"host-vs-fio: fio ({key}) reported error {job['error']} in round {r}")
        rd = job["read"]
        gib = rd["io_bytes"] / GiB
        cpu = (job["usr_cpu"] + job["sys_cpu"]) / 100.0 * job["job_runtime"] / 1000.0
        levels = job.get("iodepth_level", {})
        at_qd = sum(v for k, v in levels.items()
                    if k.lstrip(">=").isdigit() and int(k.lstrip(">=")) >= int(qd_))
        thp = int(open(f + ".thp").read().strip() or 0) * 1024
        out.append({"gib_per_s": rd["bw_bytes"] / GiB, "cpu_s_per_gib": cpu / gib, "huge_bytes": thp})
        detail = f"{at_qd:.1f}% of the time at depth >= {qd_} (last round)"
    return out, detail, version

def sluice_runs(key):
    """Per round: the 1st and the 2nd call of one process."""
    first, second, why = [], [], ""
    for r in range(1, rounds + 1):
        runs = [json.loads(l) for l in open(os.path.join(work, f"{key}.{r}.jsonl")) if l.strip()]
        if len(runs) != 2:
            sys.exit(f"host-vs-fio: {key} round {r}: expected 2 runs, got {len(runs)}")
        for run in runs:
            if run["bytes"] != size:
                sys.exit(f"host-vs-fio: {key} round {r} read {run['bytes']} of {size} bytes")
        for run, dest in zip(runs, (first, second)):
            dest.append({"gib_per_s": run["gib_per_s"], "cpu_s_per_gib": run["cpu_seconds_per_gib"],
                         "huge_bytes": run["buffer_huge_bytes"],
                         "segments": run.get("buffer_segments_per_io")})
        why = (f"{runs[0]['path']}: {runs[0]['reason']}; engine={runs[0]['engine']} "
               f"threads={runs[0]['threads']} qd={runs[0]['queue_depth']} io_size={runs[0]['io_size']}")
    return first, second, why

pairs = [("fio", f"fio QD={qd} jobs=1", "tuned", f"sluice QD={qd} threads=1", qd)]
if defaults:
    pairs.append(("fio_defaults", f"fio jobs={def_threads} QD={def_qd} bs={int(def_io) >> 10}K",
                  "defaults", "sluice defaults", def_qd))
rows, notes, version = [], [], "?"
for fkey, fname, skey, sname, qd_ in pairs:
    f, fdetail, version = fio_runs(fkey, qd_)
    first, second, why = sluice_runs(skey)
    rows.append((fname, f, None))
    rows.append((f"{sname} (1st call)", first, None))
    rows.append((f"{sname} (2nd call)", second, f))
    notes.append(f"  {fname}: {fdetail}; {min(x['huge_bytes'] for x in f) / 2**20:.0f}-"
                 f"{max(x['huge_bytes'] for x in f) / 2**20:.0f} MiB of the fio process in huge pages")
    segs = [x["segments"] for x in second if x["segments"] is not None]
    seg = (f", {min(segs):.1f}-{max(segs):.1f} physical segments per I/O" if segs
           else ", physical segments per I/O unknown (need root)")
    notes.append(f"  {sname}: {why}; buffer {max(x['huge_bytes'] for x in second) / GiB:.2f} of "
                 f"{size / GiB:.2f} GiB in huge pages{seg}")

def med(xs, key):
    return statistics.median(x[key] for x in xs)

def paired(xs, fio, key):
    # Median of the per-round ratios: each sluice run over its pair's fio run of the same round.
    return statistics.median(x[key] / f[key] for x, f in zip(xs, fio))

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
mem = ("transparent huge pages on both sides (madvise(MADV_HUGEPAGE): sluice --hugepages, fio "
       "--iomem=malloc --iomem_align=2M with GLIBC_TUNABLES=glibc.malloc.hugetlb=1)" if huge else
       "4 KiB pages on both sides (fio --iomem=malloc, sluice posix_memalign; neither madvised)")
print()
print(f"host: {platform.node()} kernel {platform.release()}, {os.cpu_count()} CPUs, load average "
      f"{os.getloadavg()[0]:.1f}; {version}; bench {bench}")
print(f"file: {path} ({size / GiB:.2f} GiB) on {dev} ({fstype}), scheduler {sched or '?'}; "
      f"bs {bs}, QD {qd}, {rounds} rounds, order alternating")
print(f"cache: both sides O_DIRECT (the page cache is bypassed on both); {cache_note} before the rounds")
print(f"buffers: {mem}")
print()
w = max(len(r[0]) for r in rows)
head = f"{'GiB/s':<{w}} " + " ".join(f"{'r' + str(i):>6}" for i in range(1, rounds + 1))
head += f" {'median':>7} {'vs fio':>7} {'paired':>7} | {'CPU s/GiB':>9} {'vs fio':>7} {'paired':>7}"
print(head)
print("-" * len(head))
summary = {"file": path, "bytes": size, "bs": bs, "qd": int(qd), "rounds": rounds,
           "hugepages": huge, "fio_version": version, "order": "alternating",
           "cache": "O_DIRECT on both sides", "rows": {}}
for label, xs, fio in rows:
    t, c = med(xs, "gib_per_s"), med(xs, "cpu_s_per_gib")
    line = f"{label:<{w}} " + " ".join(f"{x['gib_per_s']:6.3f}" for x in xs)
    entry = {"gib_per_s": [x["gib_per_s"] for x in xs], "cpu_s_per_gib": [x["cpu_s_per_gib"] for x in xs],
             "median_gib_per_s": t, "median_cpu_s_per_gib": c,
             "huge_bytes": [x["huge_bytes"] for x in xs]}
    if fio is None:
        line += f" {t:7.3f} {'':>7} {'':>7} | {c:9.4f} {'':>7} {'':>7}"
    else:
        ft, fc = med(fio, "gib_per_s"), med(fio, "cpu_s_per_gib")
        pt, pc = paired(xs, fio, "gib_per_s"), paired(xs, fio, "cpu_s_per_gib")
        line += f" {t:7.3f} {t / ft:6.3f}x {pt:6.3f}x | {c:9.4f} {c / fc:6.3f}x {pc:6.3f}x"
        entry.update(throughput_vs_fio=t / ft, cpu_per_gib_vs_fio=c / fc,
                     paired_throughput_vs_fio=pt, paired_cpu_per_gib_vs_fio=pc)
    print(line)
    summary["rows"][label] = entry
print()
print("vs fio: ratio of the medians, against the fio row of its pair (same engine, threads/jobs,")
print("queue depth, I/O size, bytes); paired: median of the per-round ratios. Throughput: higher is")
print("better; CPU s/GiB: lower is better. 1st calls include set-up fio's figures leave out: no ratio.")
print("\n".join(notes))
if json_out:
    with open(json_out, "w") as f:
        json.dump(summary, f, indent=2)
    print(f"summary written to {json_out}")
PY
