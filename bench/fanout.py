#!/usr/bin/python3
"""bench/fanout.py: every rank of a group holding the whole checkpoint (or, --tp, its 1/world row
shard of every 2-D tensor), three ways, gloo on CPU, interleaved rounds, medians (issue 34).

    PYTHONPATH=build/release/python /usr/bin/python3 bench/fanout.py [--dir /var/tmp] [--size 1G]
        [--tensors 256] [--ranks 4] [--rounds 3] [--scope job|node] [--keep]

The checkpoint: --tensors tensors (2-D F32 and BF16 matrices and 1-D vectors) adding up to
--size, written once with sluice.torch.save_file. Sides, each round running all, the order
rotating with the round, the file's pages dropped from the page cache (posix_fadvise DONTNEED on
that file only, never the global drop_caches) before each:
  each     every rank sluice.torch.load_file(path) alone (whole), or sluice.safe_open get_slice of
           its rows (--tp): what a loader without fan-out does
  fanout   sluice.distributed.load(path, "cpu", None, scope=SCOPE[, parts=rows])
  mmap     every rank mmaps the file and copies each tensor (or its rows) out, as
           safetensors.torch.load_file does (torch.frombuffer over the mapping, .clone())
Each side starts --ranks processes (torch.multiprocessing spawn, FileStore), which meet at a
barrier, load, and meet again: the wall time is from the first barrier to the last, so it ends
when every rank holds its dict. Storage bytes: the sum over the ranks of /proc/self/io
read_bytes during the load (O_DIRECT reads count in full; a page another rank already brought
into the shared page cache does not, so "each" and "mmap" may read less than ranks x size on one
machine). CPU seconds: the sum over the ranks of user + system time during the load.
"""

import argparse
import mmap
import os
import resource
import statistics
import sys
import tempfile
import time
import warnings

import benchlib


def _io_read_bytes():
    with open("/proc/self/io") as f:
        for line in f:
            if line.startswith("read_bytes:"):
                return int(line.split()[1])
    return 0


def _cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _rows(shape, rank, world):
    return slice(rank * shape[0] // world, (rank + 1) * shape[0] // world)


def _parts(name, shape, rank, world):
    return _rows(shape, rank, world) if len(shape) == 2 else None


def _mmap_load(path, tp, rank, world):
    """As safetensors.torch.load_file: the file mapped, each tensor viewed and copied out."""
    import json
    import struct

    import torch

    from sluice.torch import dtype_of

    warnings.filterwarnings("ignore", "The given buffer is not writable")  # read-only mapping, copied out
    out = {}
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        (n,) = struct.unpack("<Q", m[:8])
        header = json.loads(m[8:8 + n])
        header.pop("__metadata__", None)
        for name, info in header.items():
            b, e = info["data_offsets"]
            shape = info["shape"]
            if e == b:
                continue
            t = torch.frombuffer(m, dtype=dtype_of(info["dtype"]), count=(e - b) * 8 // torch.finfo(
                dtype_of(info["dtype"])).bits, offset=8 + n + b).reshape(shape)
            out[name] = (t[_rows(shape, rank, world)] if tp and len(shape) == 2 else t).clone()
            del t
    return out


def _each_load(path, tp, rank, world):
    import sluice
    import sluice.torch

    if not tp:
        return sluice.torch.load_file(path)
    with sluice.safe_open(path, "pt") as f:
        return {n: (f.get_slice(n)[_rows(f.get_slice(n).get_shape(), rank, world)]
                    if len(f.get_slice(n).get_shape()) == 2 else f.get_tensor(n)) for n in f.keys()}


def _worker(rank, world, store_path, path, side, scope, tp, results):
    import torch
    import torch.distributed as dist

    import sluice.distributed

    dist.init_process_group("gloo", store=dist.FileStore(store_path, world), rank=rank, world_size=world)
    try:
        dist.barrier()
        t0, io0, cpu0 = time.monotonic(), _io_read_bytes(), _cpu()
        if side == "each":
            state = _each_load(path, tp, rank, world)
        elif side == "mmap":
            state = _mmap_load(path, tp, rank, world)
        else:
            state = sluice.distributed.load(path, "cpu", None, scope=scope, parts=_parts if tp else None)
        io1, cpu1 = _io_read_bytes(), _cpu()
        dist.barrier()
        seconds = time.monotonic() - t0
        totals = torch.tensor([io1 - io0, sum(t.numel() * t.element_size() for t in state.values()),
                               int((cpu1 - cpu0) * 1e6)], dtype=torch.int64)
        dist.all_reduce(totals)
        if rank == 0:
            results.put((seconds, int(totals[0]), int(totals[1]), totals[2].item() / 1e6))
    finally:
        dist.destroy_process_group()


def run(side, args, path, workdir, tag):
    import torch.multiprocessing as mp

    benchlib.drop_cache(path)
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    store = os.path.join(workdir, f"store-{tag}")
    mp.start_processes(_worker, args=(args.ranks, store, path, side, args.scope, args.tp_now, results),
                       nprocs=args.ranks, join=True, start_method="spawn")
    return results.get(timeout=60)


def _checkpoint(path, size, count):
    """count tensors adding up to about size: 2-D F32 and BF16 matrices, 1-D F32 vectors."""
    import torch

    import sluice.torch

    per = max(1, size * 64 // (count * 49))  # 3 matrices of per bytes and a vector of per/16 in 4
    state = {}
    for i in range(count):
        if i % 4 == 3:
            state[f"layer{i // 4}.norm"] = torch.full((max(1, per // 64),), float(i))
        elif i % 4 == 2:
            cols = 1024
            state[f"layer{i // 4}.w{i % 4}"] = torch.full((max(4, per // (2 * cols)), cols), float(i),
                                                          dtype=torch.bfloat16)
        else:
            cols = 1024
            state[f"layer{i // 4}.w{i % 4}"] = torch.full((max(4, per // (4 * cols)), cols), float(i))
    sluice.torch.save_file(state, path)


def _table(args, got, sides, file_mib, title):
    print(f"{title}: {args.ranks} ranks, gloo, CPU, checkpoint {file_mib:.0f} MiB ({args.tensors} tensors), "
          f"scope {args.scope}, {args.rounds} rounds, medians")
    print(f"{'side':8s} {'wall s':>8s} {'storage MiB':>12s} {'x file':>7s} {'CPU s':>7s} {'held MiB':>9s}")
    med = {}
    for side in sides:
        wall, io, held, cpu = (statistics.median(x[k] for x in got[side]) for k in range(4))
        med[side] = (wall, io)
        print(f"{side:8s} {wall:8.2f} {io / 2**20:12.1f} {io / 2**20 / file_mib:7.2f} {cpu:7.2f} {held / 2**20:9.1f}")
    for other in ("each", "mmap"):
        print(f"fanout/{other}: wall {med['fanout'][0] / med[other][0]:.2f}x, "
              f"storage {med['fanout'][1] / max(1, med[other][1]):.2f}x")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default="/var/tmp")
    ap.add_argument("--size", default="1G")
    ap.add_argument("--tensors", type=int, default=256)
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--scope", default="job", choices=["job", "node"])
    ap.add_argument("--no-tp", action="store_true", help="skip the tensor-parallel case")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    workdir = tempfile.mkdtemp(prefix="sluice-fanout-", dir=args.dir)
    path = os.path.join(workdir, "m.safetensors")
    _checkpoint(path, benchlib.parse_size(args.size), args.tensors)
    file_mib = os.path.getsize(path) / 2**20
    sides = ["each", "fanout", "mmap"]
    for tp in ([False] if args.no_tp else [False, True]):
        args.tp_now = tp
        got = {s: [] for s in sides}
        for r in range(args.rounds):
            for side in sides[r % 3:] + sides[:r % 3]:
                res = run(side, args, path, workdir, f"{side}-{r}-{int(tp)}")
                got[side].append(res)
                print(f"{'tp' if tp else 'whole'} round {r} {side:6s} {res[0]:7.2f} s  storage "
                      f"{res[1] / 2**20:9.1f} MiB  CPU {res[3]:6.2f} s  held {res[2] / 2**20:9.1f} MiB",
                      file=sys.stderr)
        _table(args, got, sides, file_mib, "tensor parallel (1/world rows of each 2-D tensor)" if tp
               else "whole checkpoint on every rank")
    if not args.keep:
        for name in os.listdir(workdir):
            os.remove(os.path.join(workdir, name))
        os.rmdir(workdir)


if __name__ == "__main__":
    main()
