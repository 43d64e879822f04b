#!/usr/bin/env bash
# On a machine with a CUDA GPU: one run (7-9 minutes on one H200 with the defaults, estimated,
# not yet measured; every step prints its time and fails soft, with a line saying what failed,
# and nothing runs past --budget seconds: each command's timeout is cut to the time left, and a
# step that starts with under 15 s left is skipped with a line) that prints:
#   1. the gpu-labelled tests (test_real_gpu; they skip without a GPU);
#   2. the Python package built for this machine's python3 (--python; see "Python" below);
#   3. one table of file -> GPU throughput per path (direct where a libcufile loads, bounce,
#      posix, auto) next to its limits (storage read bandwidth through sluice's host path, and
#      pinned host -> device copy bandwidth), for a --size file read cold and warm;
#   4. with torch (CUDA) and safetensors in that python: a ~2 GiB checkpoint of 208 tensors
#      (F32, F16, BF16, I64) loaded to cuda:0 by sluice.torch.load_file, by
#      safetensors.torch.load_file and, where it imports, by fastsafetensors, cold and warm,
#      interleaved, medians and ratios, after checking the three give byte-equal tensors;
#   5. sluice.File.read into a CUDA torch tensor and, where cupy imports, a CuPy array, on each
#      path, with the path and reason taken, the bytes checked against a host read;
#   6. one cuFile program on NVIDIA's libcufile.so.0 and on libsluice_cufile, then cuda-python's
#      call sequence and two NVIDIA samples on each (bench/cufile-parity.sh);
#   7. sluice_load_bench against safetensors.torch.load_file (bench/load-vs-torch.sh), cold, warm;
#   8. python/tests with pytest, where pytest imports (CUDA cases run, the rest as in CI);
#   9. with torch (CUDA): bench/save.py --device cuda:0 (issue 21): a state dict of min(--size,
#      1 GiB) in host memory and in CUDA memory saved by sluice.torch.save_file, torch.save and a
#      plain safetensors writer (the last two with their device -> host copy), beside fio's
#      sequential write where fio is installed, --rounds rounds;
#  10. with torch (CUDA): bench/ingest-vs-dataloader.py --device cuda:0 (issue 17): sluice.data.Loader
#      against DataLoader (np.memmap, pin_memory, .to(cuda:0, non_blocking) and a synchronize per
#      step) on a min(--size, 1 GiB) dataset, 150 steps a run, --rounds rounds, cold and warm;
#  11. `sluice bench --compare all`, one round;
#  12. small random reads through the library (sluice_async_read_bench: read_async and
#      submit_batch of 4 KiB at 32 in flight, 3 s each) into host memory and into cuda:0, cold
#      (cache_policy bypass): the async I/O thread's pinned slots and host functions on a real
#      GPU (docs/tuning.md, "Small reads into device memory").
#
#   bench/gpu-check.sh [--prebuilt KIT] [--size 4G] [--dir DIR] [--rounds 2] [--python PY]
#                      [--budget 560]
#
# Settings: sluice runs with its defaults, set explicitly against an inherited environment
# (SLUICE_CACHE_POLICY=auto, SLUICE_DIRECT_IO=1, SLUICE_PATH and SLUICE_CONFIG unset): reads of
# host and bounce paths probe the page cache chunk by chunk, read what it holds at least half of
# buffered and the rest O_DIRECT (docs/paths.md, "The page cache"); the posix path reads with a
# buffered descriptor always; the direct path (cuFile) reads the storage whatever the cache
# holds, and path auto takes it wherever it qualifies, cached or not.
# Like for like (docs/bench.md, "Like for like"): every cell is a median over --rounds (loads:
# at least 3), and each run starts from a page-cache state set just before it and printed:
#   cold  the file is dropped from the page cache (fdatasync + POSIX_FADV_DONTNEED) before each
#         run, so auto reads it O_DIRECT (host, bounce) or through cuFile (direct).
#   warm  the file is read through the page cache (cat) before each run, so the host and bounce
#         paths read it buffered, from memory; posix reads the cache too; the direct path reads
#         the storage all the same, so its warm cell is a device figure, and the auto row shows
#         what auto's rule (direct where it qualifies) gets a user of a warm file.
# The order alternates between rounds (cold then warm with the paths in one order, then warm then
# cold in the reverse order; the loaders rotate). The loads (4) run in one python process whose
# CUDA context exists before the clock starts, timed from the call to torch.cuda.synchronize()
# after it, with torch.cuda.empty_cache() before each run (every side allocates afresh: no side
# reuses the last run's memory through PyTorch's caching allocator). The cuFile program runs
# cold (it opens the file O_DIRECT); load-vs-torch.sh sets its own cache states (its header).
#
# Python: with --prebuilt, the kit carries the package's sources, libsluice and Debian's pybind11
# and dlpack.h (bench/gpu-kit.sh says why); it is built with this machine's CMake and compiler
# for --python (default: python3 on PATH), with that python's own pybind11 if it has one
# (pip's), else the kit's; for python >= 3.12 torch's bundled pybind11 headers come before the
# kit's (pybind11 2.10 predates 3.12). Without --prebuilt the project's build builds it for
# --python (SLUICE_PYTHON), where pybind11, dlpack.h and the interpreter's headers are found. A
# package that cannot be built is reported with CMake's reason, and the steps that need it skip.
#
# --prebuilt KIT: use the kit bench/gpu-kit.sh built elsewhere (it needs glibc and libgcc_s), for GPU
# machines without the build's Debian packages; otherwise this script builds everything here.
# libcufile: SLUICE_LIBCUFILE if set, else libcufile.so.0 on the loader path, else the copy inside
# the Python package nvidia-cufile (site-packages/nvidia/cufile/lib) when python finds one.
#
# Dry run on the fakes (no GPU; what was run to check this script, from the repository root):
#   bash bench/gpu-kit.sh build/gpu-kit
#   cmake --build build/portable --target fake_cuda fake_cufile
#   SLUICE_LIBCUDA=$PWD/build/portable/tests/fakes/cuda/lib/libcuda.so.1 FAKE_CUDA_DEVICES=1 \
#   SLUICE_LIBCUFILE=$PWD/build/portable/tests/fakes/cufile/lib/libcufile.so.0 \
#   unshare -m sh -c 'for d in /usr/include/pybind11 /usr/include/dlpack /usr/lib/cmake/pybind11;
#     do mount -t tmpfs none $d; done; exec bench/gpu-check.sh --prebuilt build/gpu-kit \
#     --size 256M --rounds 1 --python /usr/bin/python3'
# (Debian's pybind11 and dlpack.h hidden, so the kit's copies build the package.) The table and
# the cuFile program run on the fake driver (host memory, so their figures mean nothing); the
# torch-CUDA steps say "skipped" (Debian's torch is CPU-only); pytest runs the package's tests.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
prebuilt="" size=4G dir="${TMPDIR:-/var/tmp}" rounds=2 budget=560 py=$(command -v python3 || echo python3)
while [ $# -gt 0 ]; do
  case $1 in
    --prebuilt) prebuilt=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --python) py=$2; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    *) echo "gpu-check.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
load_rounds=$(( rounds < 3 ? 3 : rounds ))
start=$(date +%s)
say() { printf '[gpu-check %3ss] %s\n' "$(( $(date +%s) - start ))" "$*" >&2; }
left() { echo $(( budget - ($(date +%s) - start) )); }
cap() { local l; l=$(left); (( l < 1 )) && l=1; echo $(( l < $1 ? l : $1 )); }  # a timeout: N s or what is left
# step NAME FUNCTION: runs it unless the budget is (nearly) spent, says how long it took and
# whether it failed.
step() {
  local name=$1 t0 rc
  if (( $(left) < 15 )); then say "SKIPPED $name: the ${budget} s budget is spent"; return 0; fi
  t0=$(date +%s)
  say "== $name"
  "$2"
  rc=$?
  if (( rc != 0 )); then say "FAILED $name (exit $rc), $(( $(date +%s) - t0 )) s"; else say "$name: $(( $(date +%s) - t0 )) s"; fi
  return 0
}
export SLUICE_CACHE_POLICY=auto SLUICE_DIRECT_IO=1
unset SLUICE_PATH SLUICE_CONFIG

if [ -n "$prebuilt" ]; then
  kit=$(cd "$prebuilt" && pwd)
  tests_bin="$kit/tests/test_real_gpu"
else
  build=$here/build/gpu-check
  say "building Release in $build (Python package for $py)"
  mkdir -p "$build"
  { cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=Release -DSLUICE_PYTHON="$py" >"$build/configure.log" 2>&1 \
      && cmake --build "$build" -j "$(nproc)" >/dev/null && cmake --install "$build" --prefix "$build/kit" >/dev/null; } \
    || { say "build failed (missing packages? build a kit with bench/gpu-kit.sh and use --prebuilt)"; exit 1; }
  kit=$build/kit
  cp "$build/bin/sluice_gpu_bench" "$build/bin/sluice_load_bench" "$build/bin/sluice_async_read_bench" "$kit/bin/"
  tests_bin="$build/tests/gpu/test_real_gpu"
fi
bin="$kit/bin"
export LD_LIBRARY_PATH="$kit/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

if [ -z "${SLUICE_LIBCUFILE:-}" ] && ! ldconfig -p 2>/dev/null | grep -q 'libcufile.so.0'; then
  cand=$("$py" -c 'import nvidia.cufile, os; print(os.path.join(list(nvidia.cufile.__path__)[0], "lib", "libcufile.so.0"))' 2>/dev/null || true)
  if [ -n "$cand" ] && [ -f "$cand" ]; then export SLUICE_LIBCUFILE=$cand; fi
fi
say "libcufile: ${SLUICE_LIBCUFILE:-libcufile.so.0 from the loader path, if any}; python: $py ($("$py" -V 2>&1))"
nvidia-smi --query-gpu=name,pci.bus_id,memory.total,pcie.link.gen.current,pcie.link.width.current --format=csv,noheader 2>/dev/null | sed 's/^/[gpu] /' >&2

tmp=$(mktemp -d "$dir/sluice-gpu-check.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
file="$tmp/data.bin"
ckpt="$tmp/model.safetensors"
pkg=""        # PYTHONPATH of the built package, once built
torch_cuda=0  # 1 when $py has torch with a CUDA device
drop() { "$py" -c 'import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.fdatasync(fd); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)' "${1:-$file}"; }
warm() { cat "${1:-$file}" > /dev/null; }
resident() {  # fraction of the file in the page cache (fincore, util-linux), or -1
  local res
  res=$(fincore --bytes --noheadings --output RES "$file" 2>/dev/null) || { echo -1; return; }
  "$py" -c 'import sys; print(int(sys.argv[1] or 0) / max(1, int(sys.argv[2])))' "$res" "$(stat -c %s "$file")"
}

# 1. The gpu-labelled tests (they skip without a GPU).
gpu_tests() {
  [ -x "$tests_bin" ] || { echo "no $tests_bin: gpu tests not run"; return 1; }
  (cd "$tmp" && timeout "$(cap 180)" "$tests_bin" --gtest_brief=1 2>&1 | tail -n 25; exit "${PIPESTATUS[0]}")
}

# 2. The Python package, for $py (see the header). Sets pkg on success.
python_package() {
  if [ -z "$prebuilt" ]; then
    if compgen -G "$build/python/sluice/_sluice*.so" >/dev/null; then pkg=$build/python; return 0; fi
    echo "the project's build left the Python package out: $(grep -h 'Python package is not built' "$build/configure.log" | head -n 1)"
    return 1
  fi
  local src=$kit/python-src pyver candidates=() c args log
  [ -f "$src/CMakeLists.txt" ] || { echo "the kit has no python-src/ (made by an older gpu-kit.sh)"; return 1; }
  command -v cmake >/dev/null || { echo "no cmake on PATH: the Python package cannot be built here"; return 1; }
  pyver=$("$py" -c 'import sys; print("%d%02d" % sys.version_info[:2])' 2>/dev/null) || { echo "$py does not run"; return 1; }
  local pip_dir torch_inc
  pip_dir=$("$py" -c 'import pybind11; print(pybind11.get_cmake_dir())' 2>/dev/null) && candidates+=(pip)
  torch_inc=$("$py" -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "include"))' 2>/dev/null)
  [ -n "$torch_inc" ] && [ -f "$torch_inc/pybind11/pybind11.h" ] || torch_inc=""
  if (( pyver >= 312 )); then [ -n "$torch_inc" ] && candidates+=(torch); candidates+=(kit)
  else candidates+=(kit); [ -n "$torch_inc" ] && candidates+=(torch); fi
  for c in "${candidates[@]}"; do
    case $c in
      pip) args=(-Dpybind11_DIR="$pip_dir") ;;
      kit) args=() ;;
      torch)  # torch's headers under the kit's CMake files (which find headers relative to themselves)
        mkdir -p "$tmp/pybind11-torch/include" "$tmp/pybind11-torch/lib/cmake"
        cp -r "$src/deps/lib/cmake/pybind11" "$tmp/pybind11-torch/lib/cmake/"
        ln -sfn "$torch_inc/pybind11" "$tmp/pybind11-torch/include/pybind11"
        args=(-Dpybind11_DIR="$tmp/pybind11-torch/lib/cmake/pybind11") ;;
    esac
    log=$tmp/python-build-$c.log
    rm -rf "$tmp/py"
    if timeout "$(cap 120)" cmake -S "$src" -B "$tmp/py" -DSLUICE_PYTHON="$py" "${args[@]}" >"$log" 2>&1 \
       && timeout "$(cap 240)" cmake --build "$tmp/py" -j "$(nproc)" >>"$log" 2>&1; then
      grep -h 'pybind11 .* from' "$log" | sed 's/^-- /built with /'
      pkg=$tmp/py/python
      return 0
    fi
    echo "building with pybind11 from $c failed; the first error:"
    grep -m1 -A3 -E 'cannot be built|CMake Error|error:' "$log" | grep -v '^[[:space:]]*$' | cut -c1-300 | sed 's/^/  /'
  done
  echo "the Python package could not be built for $py: the steps that need it skip"
  return 1
}
pyrun() {  # pyrun TIMEOUT ARGS...: $py with the package on its path, within TIMEOUT s (and the budget)
  local t=$1; shift
  timeout "$(cap "$t")" env PYTHONPATH="$pkg${PYTHONPATH:+:$PYTHONPATH}" "$py" "$@"
}

# 3. The table.
results="$tmp/results.jsonl"
measure() {  # label cache args...
  local label=$1 cache=$2 res=-1
  shift 2
  case $cache in
    cold) drop; res=$(resident) ;;
    warm) warm; res=$(resident) ;;
  esac
  (( $(left) > 5 )) || return 0
  timeout "$(cap 120)" "$@" --repeat 1 --json 2>"$tmp/err" | "$py" -c '
import json, sys
for line in sys.stdin:
    j = json.loads(line); j["label"] = sys.argv[1]; j["cache"] = sys.argv[2]; j["resident"] = float(sys.argv[3])
    print(json.dumps(j))' "$label" "$cache" "$res" >> "$results" \
    || say "$label ($cache) failed: $(tail -n 1 "$tmp/err")"
}
path_table() {
  local labels=("storage (host path)" direct bounce posix auto) r cache l p caches order
  : > "$results"
  for r in $(seq "$rounds"); do
    caches=(cold warm) order=("${labels[@]}")
    if (( r % 2 == 0 )); then caches=(warm cold); order=(auto posix bounce direct "storage (host path)"); fi
    for cache in "${caches[@]}"; do
      say "round $r, $cache"
      for l in "${order[@]}"; do
        if [ "$l" = "storage (host path)" ]; then p=host; else p=$l; fi
        measure "$l" "$cache" "$bin/sluice_gpu_bench" read "$file" --device cuda:0 --path "$p"
      done
    done
    measure "pinned H2D copy" "-" "$bin/sluice_gpu_bench" h2d --device cuda:0 --size 1G
  done
  "$py" - "$results" "$size" <<'PY'
import json, statistics as st, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
labels = ["storage (host path)", "pinned H2D copy", "direct", "bounce", "posix", "auto"]
def med(label, cache):
    v = [r["bytes"] / r["seconds"] / 2**30 for r in rows if r["label"] == label and r["cache"] == cache]
    return st.median(v) if v else None
def why(label, cache):
    return next((f'{r["path"]}: {r["reason"]}' for r in rows if r["label"] == label and r["cache"] == cache), None)
print(f"\n{'file -> GPU, ' + sys.argv[2] + ' (GiB/s, median)':<28} {'cold':>8} {'warm':>8}  path taken / reason")
for l in labels:
    caches = ["-"] if l == "pinned H2D copy" else ["cold", "warm"]
    vals = [med(l, c) for c in caches]
    cells = [f"{v:>8.2f}" if v is not None else f"{'n/a':>8}" for v in vals]
    if len(cells) == 1: cells = cells * 2
    reasons = [why(l, c) for c in caches]
    text = reasons[0] or "did not run"
    if len(reasons) == 2 and reasons[1] and reasons[1] != reasons[0]:
        text = f"cold: {reasons[0] or 'did not run'}; warm: {reasons[1]}"
    print(f"{l:<28} {cells[0]} {cells[1]}  {text[:200]}")
def span(cache):
    v = [r["resident"] for r in rows if r["cache"] == cache and r["resident"] >= 0]
    return f"{100 * min(v):.0f}-{100 * max(v):.0f}%" if v else "unknown (no fincore)"
print(f"cold: file dropped from the page cache before each run (resident before the runs: {span('cold')})")
print(f"warm: file read through the page cache before each run (resident: {span('warm')})")
print("all: cache_policy auto (host, bounce: what the cache holds buffered, the rest O_DIRECT; "
      "posix: buffered; direct: cuFile, the storage, whatever the cache holds)")
PY
}

# Whether $py has torch with a CUDA device (the steps that move tensors need it).
python_probe() {
  local out
  out=$("$py" -c 'import torch; print(torch.__version__, int(torch.cuda.is_available()))' 2>&1) \
    || { echo "no torch in $py: the torch steps skip"; return 0; }
  echo "torch $out (version, CUDA available)"
  [ "${out##* }" = 1 ] && torch_cuda=1
  "$py" -c 'import safetensors; print("safetensors", safetensors.__version__)' 2>/dev/null || echo "no safetensors in $py"
  "$py" -c 'import fastsafetensors as f; print("fastsafetensors", getattr(f, "__version__", "?"))' 2>/dev/null || echo "no fastsafetensors in $py"
  "$py" -c 'import cupy; print("cupy", cupy.__version__)' 2>/dev/null || echo "no cupy in $py"
  return 0
}

# 4. A ~2 GiB checkpoint of random bits (floats hold NaNs: comparisons are of bytes), then the
# loaders on it, in one process.
checkpoint() {
  timeout "$(cap 120)" "$py" - "$ckpt" <<'PY'
import sys, torch
from safetensors.torch import save_file
g = torch.Generator().manual_seed(1)
types = [torch.float32, torch.float16, torch.bfloat16, torch.int64]
sizes = [64 << 20] * 24 + [8 << 20] * 64 + [4096 * 3 + 8] * 120   # bytes: 2 GiB + 1.4 MiB
tensors = {}
for i, n in enumerate(sizes):
    t = torch.randint(0, 256, (n,), dtype=torch.uint8, generator=g).view(types[i % 4])
    tensors[f"layer{i}.w"] = t.reshape(-1, 4096) if t.numel() % 4096 == 0 else t
save_file(tensors, sys.argv[1])
print(f"{len(tensors)} tensors, {sum(sizes) / 2**30:.2f} GiB of data, F32/F16/BF16/I64")
PY
}
# fastsafetensors runs first alone, in a process of its own, once with GDS and, if that fails,
# once without (nogds): a crash in it then costs its own row, not the others'.
python_loads() {
  local fast=none m
  cat > "$tmp/loads.py" <<'PY'
import gc, json, os, statistics as st, struct, subprocess, sys, time
import torch, sluice, sluice.torch
from safetensors.torch import load_file as safetensors_load
ckpt, rounds, fast_mode, dev = sys.argv[1], int(sys.argv[2]), sys.argv[3], "cuda:0"
size = os.path.getsize(ckpt)
with open(ckpt, "rb") as f:
    names = [k for k in json.loads(f.read(struct.unpack("<Q", f.read(8))[0])) if k != "__metadata__"]

def drop():
    fd = os.open(ckpt, os.O_RDONLY); os.fdatasync(fd); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)
def warm():
    buf = bytearray(64 << 20)
    with open(ckpt, "rb", buffering=0) as f:
        while f.readinto(buf): pass
def resident():
    try:
        out = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", ckpt], capture_output=True, text=True, check=True)
        return int(out.stdout.strip() or 0) / size
    except Exception:
        return -1.0

def fast_load():  # fastsafetensors, fast_mode "gds" or "nogds"
    from fastsafetensors import SafeTensorsFileLoader, SingleGroup
    try:  # the device is a str in newer releases, a torch.device in older ones
        loader = SafeTensorsFileLoader(SingleGroup(), dev, nogds=(fast_mode == "nogds"))
    except (TypeError, AttributeError):
        loader = SafeTensorsFileLoader(SingleGroup(), torch.device(dev), nogds=(fast_mode == "nogds"))
    loader.add_filenames({0: [ckpt]})
    fb = loader.copy_files_to_device()
    out = {k: fb.get_tensor(tensor_name=k) for k in names}
    return out, lambda: (fb.close(), loader.close())
sides = {"sluice.torch.load_file": lambda: (sluice.torch.load_file(ckpt, device=dev), None),
         "safetensors.torch.load_file": lambda: (safetensors_load(ckpt, device=dev), None)}

def same(a, b):
    if a.keys() != b.keys(): return f"names differ: {sorted(a.keys() ^ b.keys())[:3]}"
    for k in a:
        x, y = a[k], b[k]
        if x.dtype != y.dtype or x.shape != y.shape or x.device != y.device:
            return f"{k}: {x.dtype} {tuple(x.shape)} {x.device} against {y.dtype} {tuple(y.shape)} {y.device}"
        if not torch.equal(x.reshape(-1).view(torch.uint8), y.reshape(-1).view(torch.uint8)):
            return f"{k}: bytes differ"
    return None

torch.zeros(1, device=dev); torch.cuda.synchronize()
if rounds == 0:  # the probe of fast_mode
    got, close = fast_load(); torch.cuda.synchronize(); del got; close()
    sys.exit(0)
if fast_mode != "none":
    sides[f"fastsafetensors ({fast_mode})"] = fast_load
# The check, untimed: each loader against safetensors, tensor by tensor, byte by byte.
ref = safetensors_load(ckpt, device=dev)
for name in list(sides)[2:] + list(sides)[:1]:
    got, close = sides[name]()
    torch.cuda.synchronize()
    print(f"check: {name} against safetensors: {same(got, ref) or f'all {len(ref)} tensors byte-equal'}")
    del got
    if close: close()
del ref; gc.collect(); torch.cuda.empty_cache()

times, res, why = {}, {}, {}
names_order = list(sides)
for r in range(rounds):
    order = names_order[r % len(names_order):] + names_order[:r % len(names_order)]
    for cache in (("cold", "warm") if r % 2 == 0 else ("warm", "cold")):
        for name in order:
            drop() if cache == "cold" else warm()
            res.setdefault(cache, []).append(resident())
            gc.collect(); torch.cuda.empty_cache(); torch.cuda.synchronize()
            t0 = time.perf_counter()
            out, close = sides[name]()
            torch.cuda.synchronize()
            times.setdefault((name, cache), []).append(time.perf_counter() - t0)
            if name.startswith("sluice"):
                rep = sluice.last_load_report(); why.setdefault(cache, f"{rep.path}: {rep.reason}")
            del out
            if close: close()
gib = size / 2**30
print(f"\n{f'load {gib:.2f} GiB, {len(names)} tensors -> {dev} (s, median of {rounds})':<56} {'cold':>8} {'warm':>8}")
for name in names_order:
    c, w = (st.median(times[(name, k)]) for k in ("cold", "warm"))
    print(f"  {name:<54} {c:>8.3f} {w:>8.3f}   ({gib / c:.2f} / {gib / w:.2f} GiB/s)")
base = names_order[0]
for name in names_order[1:]:
    ratios = [st.median(times[(name, k)]) / st.median(times[(base, k)]) for k in ("cold", "warm")]
    print(f"  {'speed-up of sluice over ' + name:<54} {ratios[0]:>7.2f}x {ratios[1]:>7.2f}x")
for cache in ("cold", "warm"):
    v = [x for x in res[cache] if x >= 0]
    span = f"{100 * min(v):.0f}-{100 * max(v):.0f}%" if v else "unknown (no fincore)"
    print(f"{cache}: resident before the runs {span}; sluice took {why.get(cache, '?')[:200]}")
print("timed: the call to torch.cuda.synchronize() after it, in one process with its CUDA context made; "
      "torch.cuda.empty_cache() before every run; order rotating, cold/warm alternating")
PY
  if "$py" -c 'import fastsafetensors' 2>/dev/null; then
    for m in gds nogds; do
      if pyrun 120 "$tmp/loads.py" "$ckpt" 0 "$m" > "$tmp/fast.log" 2>&1; then fast=$m; break; fi
      echo "fastsafetensors ($m) failed: $(tail -n 1 "$tmp/fast.log" | cut -c1-200)"
    done
  else
    echo "fastsafetensors: not installed in $py, not compared"
  fi
  pyrun 300 "$tmp/loads.py" "$ckpt" "$load_rounds" "$fast"
}

# 5. sluice.File.read into CUDA memory of torch and CuPy, on each path, checked against a host
# read of the same bytes (whatever the cache holds after the table: a check, not a figure).
python_reads() {
  pyrun 120 - "$file" <<'PY'
import os, sys, torch, sluice
path, dev = sys.argv[1], "cuda:0"
n = min(os.path.getsize(path), 512 << 20)
host = bytearray(n)
with open(path, "rb") as f:
    f.readinto(host)
want = torch.frombuffer(host, dtype=torch.uint8)
def one(kind, make, equal):
    for p in (None, "direct", "bounce", "posix"):
        try:
            buf = make()
            with sluice.File(path) as f:
                r = f.read(buf, 0, n, path=p)
            ok = "bytes equal" if equal(buf) else "BYTES DIFFER"
            print(f"  {kind:<6} path={p or 'auto':<7} {r.bytes >> 20} MiB {r.bytes / max(r.seconds, 1e-9) / 2**30:6.2f} GiB/s "
                  f"{ok}; took {r.path}: {r.reason[:160]}")
        except Exception as e:
            print(f"  {kind:<6} path={p or 'auto':<7} failed: {type(e).__name__}: {str(e)[:200]}")
print(f"sluice.File.read of {n >> 20} MiB into CUDA memory, against a host read:")
one("torch", lambda: torch.zeros(n, dtype=torch.uint8, device=dev),
    lambda t: torch.equal(t.cpu(), want))
try:
    import cupy, numpy
except ImportError as e:
    print(f"  cupy   skipped: {e}")
else:
    ref = numpy.frombuffer(host, dtype=numpy.uint8)
    one("cupy", lambda: cupy.zeros(n, dtype=cupy.uint8), lambda a: bool((cupy.asnumpy(a) == ref).all()))
PY
}

# 6. One cuFile program on NVIDIA's libcufile.so.0 and on libsluice_cufile (bounce, and handing
# aligned requests to NVIDIA's library as its direct path), interleaved with the order reversed
# in the second round, cold: the program opens the file with O_DIRECT, so the file is dropped
# from the page cache before each run.
cufile_program() {
  local nv_dir="" example="$tmp/read_to_gpu" link_dir r mode modes dirs extra line
  [ -n "${SLUICE_LIBCUFILE:-}" ] && nv_dir=$(dirname "$SLUICE_LIBCUFILE")
  link_dir=${nv_dir:-$kit/lib/sluice}
  if ! cc -O2 -I"$kit/include/sluice" -I"$here/examples/cufile" "$here/examples/cufile/read_to_gpu.c" -o "$example" \
       -L"$link_dir" -l:libcufile.so.0 -ldl -Wl,--allow-shlib-undefined 2>"$tmp/cc.err"; then
    say "cc could not build read_to_gpu.c ($(tail -n 1 "$tmp/cc.err")); using the kit's prebuilt drop-in build"
    example="$kit/bin/read_to_gpu_dropin"
  fi
  [ -x "$example" ] || { echo "no read_to_gpu program"; return 1; }
  # NVIDIA's library without nvidia-fs runs in compatibility mode only where its config allows it.
  printf '{ "logging": { "level": "ERROR" }, "properties": { "allow_compat_mode": true } }\n' > "$tmp/cufile.json"
  : > "$tmp/cufile.txt"
  for r in 1 2; do
    modes=(nvidia sluice sluice+nvidia-direct)
    [ "$r" = 2 ] && modes=(sluice+nvidia-direct sluice nvidia)
    for mode in "${modes[@]}"; do
      case $mode in
        nvidia) [ -n "$nv_dir" ] || continue; dirs=$nv_dir; extra=() ;;
        sluice) dirs=$kit/lib/sluice; extra=(SLUICE_LIBCUFILE=) ;;
        sluice+nvidia-direct) [ -n "$nv_dir" ] || continue; dirs=$kit/lib/sluice; extra=(SLUICE_LIBCUFILE="$nv_dir/libcufile.so.0") ;;
      esac
      drop
      line=$(cd "$tmp" && env "${extra[@]}" CUFILE_ENV_PATH_JSON="$tmp/cufile.json" LD_LIBRARY_PATH="$dirs:$kit/lib" \
             timeout "$(cap 120)" "$example" "$file" 2>&1 | tail -n 1)
      echo "$mode $line" >> "$tmp/cufile.txt"
    done
  done
  "$py" - "$tmp/cufile.txt" "$size" <<'PY'
import re, statistics as st, sys
rates = {}
for line in open(sys.argv[1]):
    mode, _, rest = line.partition(" ")
    m = re.search(r"= ([0-9.]+) GB/s", rest)
    if m: rates.setdefault(mode, []).append(float(m.group(1)))
    else: print(f"cuFile example on {mode}: {rest.strip()}")
print(f"\n{'cuFile read_to_gpu, ' + sys.argv[2] + ' cold (GB/s, median)':<48} {'value':>8}")
for mode in ("nvidia", "sluice", "sluice+nvidia-direct"):
    v = rates.get(mode)
    print(f"  {mode:<46} {st.median(v):>8.2f}" if v else f"  {mode:<46} {'n/a':>8}")
for mode in ("sluice", "sluice+nvidia-direct"):
    if rates.get(mode) and rates.get("nvidia"):
        print(f"  {'ratio ' + mode + ' / nvidia':<46} {st.median(rates[mode]) / st.median(rates['nvidia']):>8.2f}")
PY
}

# 6b. The same cuFile programs (cuda-python's call sequence, NVIDIA's samples 007 and
# error_and_properties) on NVIDIA's libcufile.so.0 and on libsluice_cufile: a program that passes
# on one and fails on the other shows where the two differ (bench/cufile-parity.sh).
cufile_parity() {
  local nv_dir=""
  [ -n "${SLUICE_LIBCUFILE:-}" ] && nv_dir=$(dirname "$SLUICE_LIBCUFILE")
  timeout "$(cap 300)" bash "$here/bench/cufile-parity.sh" "$kit/include/sluice" "$kit/lib/sluice" \
    "$nv_dir" "$tmp/parity"
}

# 7. sluice_load_bench (C++) against safetensors.torch.load_file, each in a fresh process.
load_vs_torch() {
  local cache
  for cache in cold warm; do
    timeout "$(cap 240)" bash "$here/bench/load-vs-torch.sh" --load-bench "$bin/sluice_load_bench" --python "$py" --cache "$cache" \
      --rounds "$load_rounds" "$ckpt" 2>&1 | tail -n 6
  done
}

# 8. The package's tests (CUDA cases run where torch has CUDA).
python_tests() {
  local tests
  if [ -n "$prebuilt" ]; then tests=$kit/python-src/python/tests; else tests=$here/python/tests; fi
  (cd "$tests" && PYTHONDONTWRITEBYTECODE=1 pyrun 240 -m pytest -q -p no:cacheprovider --basetemp="$tmp/pytest" \
     "$tests" 2>&1 | tail -n 15; exit "${PIPESTATUS[0]}")
}

# 9. and 10. The save and ingestion benchmarks into cuda:0, their scripts from the kit when it has
# them (bench/gpu-kit.sh copies them: the scripts of the package's commit), else this checkout's.
# A smaller dataset and state dict than the table's file: min(--size, 1 GiB), to fit the budget.
bench_script() {
  if [ -n "$prebuilt" ] && [ -f "$kit/bench/$1" ]; then echo "$kit/bench/$1"; else echo "$here/bench/$1"; fi
}
small_size() {
  local b
  b=$(numfmt --from=iec "$size" 2>/dev/null) || { echo 1G; return; }
  if (( b < 1 << 30 )); then echo "$size"; else echo 1G; fi
}
save_bench() {
  pyrun 150 "$(bench_script save.py)" --device cuda:0 --size "$(small_size)" --rounds "$rounds" --dir "$tmp"
}
ingest_bench() {
  pyrun 180 "$(bench_script ingest-vs-dataloader.py)" --device cuda:0 --size "$(small_size)" --steps 150 \
    --stall-steps 150 --rounds "$rounds" --prefix "$tmp/ingest/tokens"
}

# 11. sluice bench --compare all, one round (the gdsio-style transfer types side by side), each run
# from a cold cache (--drop-caches); its reads are O_DIRECT (sluice bench's --cache-policy is
# bypass by default) except cpu-cached-gpu's and cpu-gpu's (posix), which go through the cache.
bench_compare() {
  timeout "$(cap 150)" "$bin/sluice" bench --file "$file" --compare all --block-size 1M --iodepth 8 --threads 4 \
    --time 3 --warmup 1 --repeat 1 --drop-caches --device cuda:0 2>&1 | tail -n 20
}

# 12. Small random reads through the library, into host memory and into cuda:0.
small_reads() {
  [ -x "$bin/sluice_async_read_bench" ] || { echo "no $bin/sluice_async_read_bench (a kit from an older gpu-kit.sh)"; return 1; }
  local api mem
  for api in async batch; do
    for mem in host cuda:0; do
      local dev=(); [ "$mem" = host ] || dev=(--device "$mem")
      (( $(left) > 10 )) || return 0
      SLUICE_CACHE_POLICY=bypass timeout "$(cap 30)" "$bin/sluice_async_read_bench" "$file" --bs 4K --iodepth 32 \
        --time 3 --api "$api" "${dev[@]}" 2>&1 | cut -c1-400
    done
  done
}

skip() { say "skipped $1: $2"; }
step "gpu tests" gpu_tests
step "Python package" python_package
python_probe
say "writing a $size test file in $tmp"
head -c "$size" /dev/urandom > "$file" && sync "$file"
step "file -> GPU table" path_table
if [ -z "$pkg" ] || [ "$torch_cuda" != 1 ]; then
  skip "the Python loads and reads" "they need the package and torch with CUDA in $py"
elif ! "$py" -c 'import safetensors' 2>/dev/null; then
  skip "the Python loads" "no safetensors in $py"
  step "File.read into CUDA memory" python_reads
else
  step "writing a 2 GiB checkpoint" checkpoint
  step "Python loads" python_loads
  step "File.read into CUDA memory" python_reads
fi
step "cuFile program" cufile_program
step "cuFile parity (NVIDIA's libcufile and libsluice_cufile)" cufile_parity
if [ -f "$ckpt" ]; then step "sluice_load_bench against torch" load_vs_torch
else skip "sluice_load_bench against torch" "no checkpoint (it needs torch with CUDA and safetensors)"; fi
if [ -z "$pkg" ]; then skip "python tests" "no Python package"
elif ! "$py" -c 'import pytest' 2>/dev/null; then skip "python tests" "no pytest in $py"
else step "python tests" python_tests; fi
if [ -z "$pkg" ] || [ "$torch_cuda" != 1 ]; then
  skip "save into cuda:0 (bench/save.py)" "it needs the package and torch with CUDA in $py"
  skip "ingestion into cuda:0 (bench/ingest-vs-dataloader.py)" "it needs the package and torch with CUDA in $py"
else
  step "save into cuda:0 (bench/save.py)" save_bench
  step "ingestion into cuda:0 (bench/ingest-vs-dataloader.py)" ingest_bench
fi
step "sluice bench --compare all" bench_compare
step "small reads into cuda:0 (read_async, submit_batch)" small_reads
say "done"
