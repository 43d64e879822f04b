#!/usr/bin/env bash
# Never slower than the simple way (DESIGN.md principle 7): Sluice against the plain tools on a
# file the page cache already holds, on one it does not, and on one it half holds.
#
#   bench/warm-cache.sh [BUILD_DIR] [ROUNDS]        (defaults: build/release, 7 rounds; ~4 min)
#
# Files (in $WARM_CACHE_DIR, default /var/tmp; removed at the end): a 1 GiB file of random bytes
# and a ~1 GiB safetensors checkpoint of 72 tensors (f32/f16/i64, various shapes).
#
# What is compared, each command timed from start to exit (what `time` shows):
#   read 1 GiB:  dd if=F of=/dev/null bs=1M  |  cat F >/dev/null  |  sluice read F --out /dev/null
#                (cache_policy auto, the default) | the same with --cache-policy bypass (O_DIRECT
#                regardless: the behaviour before cache_policy) | sluice read --device sim (bytes
#                into the simulated GPU through the pinned staging copy, then back to be written)
#   load ~1 GiB: a plain mmap-and-copy loader in /usr/bin/python3 (parses the header, mmaps the
#                file, copies each tensor into a fresh numpy array) | sluice load --memory host
#                (cache_policy auto, host_load auto: a private mapping of the file where the page
#                cache holds it, reads into fresh memory where not; docs/paths.md) | the same with
#                --host-load read (always a copy in fresh memory) | the same with --cache-policy
#                bypass | sluice load --device sim (device memory)
# Besides the wall time, each tool's own clock where it has one ("in-tool"): sluice's `seconds`
# (the reads: not process start, allocation nor writing out), the python loader's clock from
# before the open to after the last copy (allocation included; interpreter start and numpy
# import not). Fresh memory is slow to fault in on a VM whose host backs guest pages lazily (a
# 0.86 GiB allocation took 0.1-5 s here, in either tool): the in-tool ratio shows the reads.
# States: warm (the file read once with cat before the round; reads through the cache keep it
# there), cold (fdatasync + posix_fadvise(DONTNEED) on that one file before every run; never the
# whole system's cache), half (cold, then every other 16 MiB stripe read back with readahead off,
# before every run: compares auto with bypass (all O_DIRECT) and use (all buffered)).
# Runs are interleaved: every round runs every command of a state once, in an order rotated by
# one place each round and reversed on odd rounds. Printed: per command the median over the
# rounds (seconds, GiB/s), and the ratios the acceptance targets of issue 18 name:
#   warm: sluice read >= 0.9x dd; sluice load >= 1.0x the mmap loader (issue 37: in every round); sim: within the sim's
#         copy model: the host read plus the sim's own copies (1 GiB up and back down for read,
#         the checkpoint up for load), not overlapped (worst case), at the speed the sim copies
#         here: its engines model sim_h2d_gbps but really copy, so on a busy 2-core machine
#         they run slower. That speed is measured in the same rounds ("sim copy 1 GiB":
#         sluice_gpu_bench h2d --device sim --size 1G, pinned host memory to device memory).
#   cold: auto >= 0.95x bypass (no worse than before), read and load; load >= 1.5x the mmap loader
#   half: auto faster than both bypass and use
# Last, sluice_residency_bench: the cost of the residency probes a read makes (ns per probe of a
# 1 MiB chunk, us per 1 GiB file probed chunk by chunk), warm and cold.
# The machine may be shared and noisy: trust the medians and ratios, not single figures.
set -euo pipefail
build=${1:-build/release}
rounds=${2:-7}
py=/usr/bin/python3
sluice=$build/bin/sluice
[ -x "$sluice" ] || sluice=$build/tools/sluice/sluice
[ -x "$sluice" ] || { echo "warm-cache: no sluice binary under $build" >&2; exit 1; }
"$py" -c 'import numpy' 2>/dev/null || { echo "warm-cache: skipped (needs /usr/bin/python3 with numpy)"; exit 0; }
dir=${WARM_CACHE_DIR:-/var/tmp}
work=$(mktemp -d "$dir/sluice-warm-cache.XXXXXX")
trap 'rm -rf "$work"' EXIT
export SLUICE_BIN=$sluice SLUICE_RESIDENCY_BENCH=$build/bin/sluice_residency_bench SLUICE_GPU_BENCH=$build/bin/sluice_gpu_bench
PYTHONPATH="$(cd "$(dirname "$0")" && pwd)${PYTHONPATH:+:$PYTHONPATH}" "$py" - "$work" "$rounds" <<'PY'
import json, os, statistics, struct, subprocess, sys, time
import numpy as np
from benchlib import drop_cache as drop

work, rounds = sys.argv[1], int(sys.argv[2])
sluice = os.environ["SLUICE_BIN"]
GiB, MiB = 1 << 30, 1 << 20
raw = os.path.join(work, "raw.bin")
ckpt = os.path.join(work, "model.safetensors")

def make_raw():
    rng = np.random.default_rng(1)
    with open(raw, "wb") as f:
        for _ in range(GiB // (64 * MiB)):
            f.write(rng.integers(0, 256, 64 * MiB, dtype=np.uint8).tobytes())

def make_checkpoint():
    rng = np.random.default_rng(2)
    kinds = [("F32", np.float32, (1024, 4096)), ("F16", np.float16, (4096, 1536)),
             ("I64", np.int64, (768, 1000)), ("F32", np.float32, (333, 7777))]
    tensors, offset = [], 0
    for i in range(72):
        code, dt, shape = kinds[i % len(kinds)]
        n = int(np.prod(shape)) * np.dtype(dt).itemsize
        tensors.append((f"layer{i // 4}.w{i % 4}", code, dt, shape, offset, offset + n))
        offset += n
    header = {name: {"dtype": code, "shape": list(shape), "data_offsets": [b, e]}
              for name, code, dt, shape, b, e in tensors}
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(ckpt, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for _, _, dt, shape, b, e in tensors:
            f.write(rng.integers(0, 256, e - b, dtype=np.uint8).tobytes())

def warm(path):
    subprocess.run(["cat", path], stdout=subprocess.DEVNULL, check=True)

def half(path):
    drop(path)
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)  # exactly the stripes, no readahead
        size, stripe = os.fstat(fd).st_size, 16 * MiB
        for at in range(0, size, 2 * stripe):
            for o in range(at, min(at + stripe, size), 4 * MiB):
                os.pread(fd, 4 * MiB, o)
    finally:
        os.close(fd)

MMAP_LOADER = r'''
import json, mmap, struct, sys, time
import numpy as np
t0 = time.perf_counter()
DT = {"F32": np.float32, "F16": np.float16, "I64": np.int64, "BF16": np.uint16, "I32": np.int32, "U8": np.uint8}
with open(sys.argv[1], "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    header = json.loads(f.read(n))
    mm = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
base, out = 8 + n, {}
for name, t in header.items():
    if name == "__metadata__":
        continue
    b, e = t["data_offsets"]
    dt = np.dtype(DT[t["dtype"]])
    out[name] = np.frombuffer(mm, dtype=dt, count=(e - b) // dt.itemsize, offset=base + b).reshape(t["shape"]).copy()
print(time.perf_counter() - t0)
'''

def sluice_json(out):
    for line in reversed(out.splitlines()):
        if line.startswith("{"):
            j = json.loads(line)
            return j.get("summary", j)
    return {}

# (wall seconds, the tool's own seconds or None, stdout)
def run(cmd, own_clock=False):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"warm-cache: {' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()}")
    own = float(p.stdout.split()[-1]) if own_clock else sluice_json(p.stdout).get("seconds")
    return wall, own, p.stdout


READS = {
    "dd bs=1M": lambda: run(["dd", f"if={raw}", "of=/dev/null", "bs=1M", "status=none"]),
    "cat": lambda: run(["sh", "-c", f'cat "{raw}" >/dev/null']),
    "sluice read": lambda: run([sluice, "read", raw, "--out", "/dev/null", "--json"]),
    "sluice read bypass": lambda: run([sluice, "read", raw, "--out", "/dev/null", "--json", "--cache-policy", "bypass"]),
    "sluice read sim": lambda: run([sluice, "read", raw, "--out", "/dev/null", "--json", "--device", "sim"]),
}
if os.access(os.environ["SLUICE_GPU_BENCH"], os.X_OK):
    READS["sim copy 1 GiB"] = lambda: run([os.environ["SLUICE_GPU_BENCH"], "h2d", "--device", "sim", "--size", "1G", "--json"])
LOADS = {
    "mmap loader": lambda: run(["/usr/bin/python3", "-c", MMAP_LOADER, ckpt], own_clock=True),
    "sluice load host": lambda: run([sluice, "load", ckpt, "--memory", "host", "--json"]),
    "sluice load host read": lambda: run([sluice, "load", ckpt, "--memory", "host", "--json", "--host-load", "read"]),
    "sluice load bypass": lambda: run([sluice, "load", ckpt, "--memory", "host", "--json", "--cache-policy", "bypass"]),
    "sluice load sim": lambda: run([sluice, "load", ckpt, "--device", "sim", "--json"]),
}
HALF = {
    "sluice read": READS["sluice read"],
    "sluice read bypass": READS["sluice read bypass"],
    "sluice read use": lambda: run([sluice, "read", raw, "--out", "/dev/null", "--json", "--cache-policy", "use"]),
    "dd bs=1M": READS["dd bs=1M"],
}

def order(names, r):
    k = r % len(names)
    o = names[k:] + names[:k]
    return o[::-1] if r % 2 else o

class Result:
    def __init__(self, names):
        self.wall = {n: [] for n in names}
        self.own = {n: [] for n in names}
        self.reasons = {}
    def med(self, n):
        return statistics.median(self.wall[n])
    def own_med(self, n):
        return statistics.median(self.own[n]) if self.own[n] else None

def measure(state, cases, path_of, prepare):
    res = Result(cases)
    for r in range(rounds):
        if state == "warm":
            for p in {path_of(n) for n in cases}:
                warm(p)
        for name in order(list(cases), r):
            if prepare:
                prepare(path_of(name))
            wall, own, out = cases[name]()
            res.wall[name].append(wall)
            if own is not None:
                res.own[name].append(own)
            if name.startswith("sluice"):
                res.reasons[name] = sluice_json(out).get("reason", "")
    return res

def report(title, res, size):
    print(f"\n== {title} ({rounds} rounds; medians; wall times of every run in brackets)")
    for n in res.wall:
        t, own = res.med(n), res.own_med(n)
        runs = " ".join(f"{x:.2f}" for x in res.wall[n])
        mine = f"in-tool {own:6.3f} s {size / GiB / own:6.2f} GiB/s" if own else " " * 31
        print(f"  {n:20s} wall {t:6.3f} s {size / GiB / t:6.2f} GiB/s  {mine}  [{runs}]")
        if n in res.reasons:
            print(f"  {'':20s} reason: {res.reasons[n]}")

def ratio(label, a, b, target):
    r = b / a
    print(f"  {label:62s} {r:5.2f}x  (target >= {target}) {'ok' if r >= target else 'MISSED'}")

print(f"warm-cache: sluice {sluice}; files in {work}; {os.cpu_count()} CPUs; kernel {os.uname().release}")
print(f"load average {os.getloadavg()[0]:.1f} at the start (a busy machine widens the spread)")
make_raw()
make_checkpoint()
csize = os.stat(ckpt).st_size
print(f"raw file {os.stat(raw).st_size / GiB:.2f} GiB; checkpoint {csize / GiB:.2f} GiB, 72 tensors")

path_of = lambda n: ckpt if n in LOADS else raw
w = measure("warm", READS, path_of, None)
wl = measure("warm", LOADS, path_of, None)
c = measure("cold", {k: READS[k] for k in ("dd bs=1M", "cat", "sluice read", "sluice read bypass", "sluice read sim")}, path_of, drop)
cl = measure("cold", LOADS, path_of, drop)
h = measure("half", HALF, path_of, half)

report("warm: 1 GiB read", w, GiB)
report("warm: checkpoint load", wl, csize)
report("cold: 1 GiB read", c, GiB)
report("cold: checkpoint load", cl, csize)
report("half cached (every other 16 MiB): 1 GiB read", h, GiB)

# Seconds for the sim to copy 1 GiB, as it copies here (else as its model says).
sim_copy = w.own_med("sim copy 1 GiB") if "sim copy 1 GiB" in READS else GiB / (float(os.environ.get("SLUICE_SIM_H2D_GBPS", "25")) * 1e9)
read_copies = 2 * sim_copy                # up, and back down to be written out
load_copies = sim_copy * csize / GiB
print("\n== ratios (throughput; wall unless it says in-tool)")
ratio("warm: sluice read / dd bs=1M", w.med("sluice read"), w.med("dd bs=1M"), 0.9)
ratio("warm: sluice read / cat", w.med("sluice read"), w.med("cat"), 0.9)
ratio("warm: sluice read (auto) / bypass (before)", w.med("sluice read"), w.med("sluice read bypass"), 1.0)
ratio("warm: sluice load host / mmap loader", wl.med("sluice load host"), wl.med("mmap loader"), 1.0)
ratio("warm: sluice load host / mmap loader, in-tool", wl.own_med("sluice load host"), wl.own_med("mmap loader"), 1.0)
# Issue 37: in every round, not only the median (rounds pair up: each ran both once).
worst = min(m / h for m, h in zip(wl.wall["mmap loader"], wl.wall["sluice load host"]))
ratio("warm: sluice load host / mmap loader, worst round", 1.0, worst, 1.0)
print(f"  {'warm: per round (mmap loader / sluice load host)':62s} " +
      " ".join(f"{m / h:.2f}x" for m, h in zip(wl.wall["mmap loader"], wl.wall["sluice load host"])))
ratio("warm: sluice load host read (a copy) / mmap loader", wl.med("sluice load host read"), wl.med("mmap loader"), 1.0)
ratio("warm: sluice load (auto) / bypass (before)", wl.med("sluice load host"), wl.med("sluice load bypass"), 1.0)
ratio(f"warm: sluice read sim / (host read + {read_copies:.3f} s of copies)", w.med("sluice read sim"),
      w.med("sluice read") + read_copies, 1.0)
# Against the host load that copies (a mapped one moves no bytes, so is no base for a copy).
ratio(f"warm: sluice load sim / (load host read + {load_copies:.3f} s of copies)", wl.med("sluice load sim"),
      wl.med("sluice load host read") + load_copies, 1.0)
ratio(f"warm: same, in-tool", wl.own_med("sluice load sim"), wl.own_med("sluice load host read") + load_copies, 1.0)
ratio("cold: sluice read (auto) / bypass (before)", c.med("sluice read"), c.med("sluice read bypass"), 0.95)
ratio("cold: sluice read (auto) / bypass (before), in-tool", c.own_med("sluice read"), c.own_med("sluice read bypass"), 0.95)
ratio("cold: sluice read / dd bs=1M", c.med("sluice read"), c.med("dd bs=1M"), 1.0)
ratio("cold: sluice load (auto) / bypass (before)", cl.med("sluice load host"), cl.med("sluice load bypass"), 0.95)
ratio("cold: sluice load host / mmap loader", cl.med("sluice load host"), cl.med("mmap loader"), 1.5)
ratio("half: sluice read (auto) / bypass (all O_DIRECT)", h.med("sluice read"), h.med("sluice read bypass"), 1.0)
ratio("half: sluice read (auto) / use (all buffered)", h.med("sluice read"), h.med("sluice read use"), 1.0)

bench = os.environ["SLUICE_RESIDENCY_BENCH"]
if os.access(bench, os.X_OK):
    for state, prep in (("warm", warm), ("cold", drop)):
        prep(raw)
        out = subprocess.run([bench, raw, "--benchmark_min_time=0.2", "--benchmark_format=json"],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        print(f"\n== residency probe cost, {state} 1 GiB file (sluice_residency_bench)")
        for b in json.loads(out.stdout)["benchmarks"]:
            if b.get("error_occurred"):
                continue
            print(f"  {b['name']:40s} {b['real_time']:10.1f} {b['time_unit']}  {b.get('label', '')}")
else:
    print(f"\n(no {bench}: probe cost not measured)")
PY
