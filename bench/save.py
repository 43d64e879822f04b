#!/usr/bin/python3
"""bench/save.py: saving a ~2 GiB state dict, sluice against torch.save, a plain safetensors
writer and fio's sequential write, interleaved, medians (issue 21).

    PYTHONPATH=build/release/python /usr/bin/python3 bench/save.py [--dir /var/tmp] [--size 2G]
        [--rounds 3] [--device sim|cuda:N] [--fio-bs 1M] [--fio-depth 8] [--keep]

The state dict: tensors of mixed sizes and types (F32, BF16, F16, I64; from 4 KiB to 256 MiB)
adding up to --size, once in host memory and once on --device:
  sim          (the default) the simulated GPU, loaded there with
               sluice.torch.load_file(device="sim"): host memory underneath
  cuda:N       a CUDA GPU: each tensor copied there with .to("cuda:N") (one allocation each, as
               a model's state dict has them); torch without CUDA is an error (exit 1)
Sides, each round running every one once, the order rotating with the round:
  sluice       sluice.torch.save_file (atomic: temporary, fdatasync, rename, fsync of the folder;
               device="sim" for the sim dict: its bytes take the bounce path; CUDA tensors are
               told by their memory and take the bounce path or GPUDirect)
  torch.save   torch.save(state, path), then os.fsync: durable like sluice's (torch.save copies
               CUDA storages to host memory itself: the copy is in its time, as users pay it)
  plain        a plain serialise-and-write safetensors writer, what safetensors does: the header,
               then each tensor's bytes through one buffered file (f.write of the tensor's
               memory; a CUDA tensor is first copied to host memory with .cpu(), as
               safetensors' _tobytes does, inside the clock), then os.fsync
  fio          fio --rw=write --direct=1 --ioengine=io_uring --bs=BS --iodepth=QD --size=SIZE
               --end_fsync=1 on a fresh file in the same folder: the storage's sequential write
               throughput (fio's own bandwidth figure); left out, with a line, without fio
Before the rounds, untimed: sluice's save of the --device dict is compared byte for byte with
the host save of the same tensors. Each side writes a fresh file (the previous one removed
first). Throughput is file bytes over the call's wall time. Prints medians per side and source,
and the ratios of issue 21's targets: sluice >= 2x torch.save, sluice >= 0.9x fio. A missed
target is a result, not a failure.
"""

import argparse
import filecmp
import io
import json
import os
import shutil
import statistics
import struct
import subprocess
import sys
import time

import torch

import sluice
import sluice.torch as st

from benchlib import MiB, parse_size, check_device


def make_state(total):
    """Tensors of mixed sizes: a few large, many middle-sized, some small, cycling over types."""
    sizes = [256 * MiB] * 4 + [16 * MiB] * 56 + [64 * 1024] * 200 + [4096] * 200
    sizes += [1 * MiB] * ((total - sum(sizes)) // MiB)  # the rest in 1 MiB tensors
    types = [torch.float32, torch.bfloat16, torch.float16, torch.int64]
    state, used, i = {}, 0, 0
    for n in sizes:
        if used + n > total:
            continue
        dtype = types[i % len(types)]
        t = torch.empty(n // torch.empty((), dtype=dtype).element_size(), dtype=dtype)
        t.view(torch.uint8).random_()
        state[f"layer.{i:04d}.weight"] = t
        used += n
        i += 1
    return state, used


def plain_writer(state, path):
    """What safetensors' serialize_to_file does: header, then every tensor through one buffered
    file, in its order (descending dtype, then name); then fsync for durability."""
    names = {torch.float64: "F64", torch.int64: "I64", torch.float32: "F32", torch.bfloat16: "BF16",
             torch.float16: "F16"}
    order = ["BOOL", "U8", "I8", "I16", "U16", "F16", "BF16", "I32", "U32", "F32", "F64", "I64", "U64"]
    items = sorted(state.items(), key=lambda kv: (-order.index(names[kv[1].dtype]), kv[0]))
    header, offset = {}, 0
    for name, t in items:
        n = t.numel() * t.element_size()
        header[name] = {"dtype": names[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + n]}
        offset += n
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb", buffering=io.DEFAULT_BUFFER_SIZE) as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for _, t in items:
            if t.device.type != "cpu":
                t = t.cpu()  # safetensors' _tobytes: a pageable host copy per tensor
            f.write(t.view(torch.uint8).numpy().data)
        f.flush()
        os.fsync(f.fileno())


def run_fio(path, size, bs, depth):
    cmd = ["fio", "--name=seqwrite", f"--filename={path}", "--rw=write", "--direct=1", "--ioengine=io_uring",
           f"--bs={bs}", f"--iodepth={depth}", f"--size={size}", "--end_fsync=1", "--output-format=json"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    job = json.loads(out[out.index("{"):])["jobs"][0]["write"]
    return size / job["bw_bytes"]


def timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def remove(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def on_device(state, src, device):
    """The state dict on `device`: sim by sluice's load (host memory underneath), CUDA by .to()."""
    if device == "sim":
        return st.load_file(src, device="sim")
    out = {k: v.to(device) for k, v in state.items()}
    torch.cuda.synchronize(device)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default="/var/tmp")
    ap.add_argument("--size", default="2G")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--device", default="sim", help="where the second copy of the state dict lives: sim or cuda:N")
    ap.add_argument("--fio-bs", default="1M")
    ap.add_argument("--fio-depth", type=int, default=8)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    check_device(a.device)
    dev = a.device

    state, total = make_state(parse_size(a.size))
    out = os.path.join(a.dir, f"sluice-save-bench-{os.getpid()}")
    os.makedirs(out, exist_ok=True)
    src = os.path.join(out, "source.safetensors")
    st.save_file(state, src)
    on_dev = on_device(state, src, dev)
    file_bytes = os.path.getsize(src)
    print(f"state dict: {len(state)} tensors, {total / MiB:.0f} MiB; file {file_bytes / MiB:.1f} MiB in {a.dir}; "
          f"sources host and {dev}; torch {torch.__version__}")

    target = os.path.join(out, "out")
    dev_arg = "sim" if dev == "sim" else None  # CUDA tensors are told by their memory, as a user writes it
    st.save_file(on_dev, target, device=dev_arg)
    same = filecmp.cmp(src, target, shallow=False)
    print(f"check: sluice's save from {dev} {'is byte-equal to' if same else 'DIFFERS from'} the host save "
          f"({sluice.last_save_report().path})", flush=True)
    if not same:
        sys.exit(f"save.py: the file saved from {dev} differs from the one saved from host memory")
    sides = {
        ("host", "sluice"): lambda: st.save_file(state, target),
        ("host", "torch.save"): lambda: _torch_save(state, target),
        ("host", "plain"): lambda: plain_writer(state, target),
        (dev, "sluice"): lambda: st.save_file(on_dev, target, device=dev_arg),
        (dev, "torch.save"): lambda: _torch_save(on_dev, target),
        (dev, "plain"): lambda: plain_writer(on_dev, target),
    }
    times = {k: [] for k in sides}
    if shutil.which("fio"):
        times[("-", "fio")] = []
    else:
        print("no fio on PATH: the fio side is left out")
    reasons = {}
    keys = list(times)
    for r in range(a.rounds):
        order = keys[r % len(keys):] + keys[:r % len(keys)]
        for key in order:
            remove(target)
            if key[1] == "fio":
                times[key].append(run_fio(target, file_bytes, a.fio_bs, a.fio_depth))
            else:
                times[key].append(timed(sides[key]))
                if key[1] == "sluice":
                    reasons[key[0]] = sluice.last_save_report().reason
        print(f"round {r + 1}: " + ", ".join(f"{k[0]}/{k[1]} {file_bytes / v[-1] / MiB:.0f} MiB/s"
                                              for k, v in times.items()), flush=True)

    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"\nmedians over {a.rounds} rounds (MiB/s; file bytes / wall time):")
    for k, v in med.items():
        print(f"  {k[0]:6} {k[1]:10} {file_bytes / v / MiB:8.0f}")
    for source in ("host", dev):
        print(f"  sluice path ({source}): {reasons.get(source)}")
    print("\nratios (speed of sluice / speed of the other; median of times):")
    for source in ("host", dev):
        s = med[(source, "sluice")]
        fio = f"{med[('-', 'fio')] / s:5.2f}x" if ("-", "fio") in med else "  n/a"
        print(f"  {source:6} vs torch.save {med[(source, 'torch.save')] / s:5.2f}x (target >= 2x)   "
              f"vs plain {med[(source, 'plain')] / s:5.2f}x   vs fio {fio} (target >= 0.9x)")
    remove(target)
    if not a.keep:
        remove(src)
        os.rmdir(out)


def _torch_save(state, path):
    with open(path, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())


if __name__ == "__main__":
    sys.exit(main())
