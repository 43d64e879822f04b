#!/usr/bin/python3
"""bench/fanout.py: every rank of a group loading the whole checkpoint, each on its own against
the read-once fan-out load (issue 34), gloo on CPU, interleaved rounds, medians.

    PYTHONPATH=build/release/python /usr/bin/python3 bench/fanout.py [--dir /var/tmp] [--size 512M]
        [--ranks 3] [--rounds 3] [--scope job|node] [--keep]

The checkpoint: 64 F32 tensors adding up to --size, written once with sluice.torch.save_file.
Sides, each round running both, the order alternating with the round, the file's pages dropped
from the page cache (posix_fadvise DONTNEED on that file only) before each:
  each     every rank sluice.torch.load(path): what a loader without fan-out does
  fanout   sluice.distributed.load(path, "cpu", None, scope=SCOPE)
Each side starts --ranks processes (torch.multiprocessing spawn, FileStore), which meet at a
barrier, load, and meet again: the wall time is from the first barrier to the last. Storage
bytes are the sum over the ranks of /proc/self/io read_bytes during the load (bytes the process
made the block layer fetch; the O_DIRECT reads sluice makes of a cold file count in full, while
reads served by the page cache that another rank filled do not, so "each" can read less than
ranks x size when its ranks share cached pages). Prints medians and the ratios fanout/each.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

import benchlib


def _io_read_bytes():
    with open("/proc/self/io") as f:
        for line in f:
            if line.startswith("read_bytes:"):
                return int(line.split()[1])
    return 0


def _worker(rank, world, store_path, path, side, scope, results):
    import torch
    import torch.distributed as dist

    import sluice.distributed
    import sluice.torch

    dist.init_process_group("gloo", store=dist.FileStore(store_path, world), rank=rank, world_size=world)
    try:
        dist.barrier()
        t0, io0 = time.monotonic(), _io_read_bytes()
        if side == "each":
            state = sluice.torch.load(path)
        else:
            state = sluice.distributed.load(path, "cpu", None, scope=scope)
        io1 = _io_read_bytes()
        dist.barrier()
        seconds = time.monotonic() - t0
        totals = torch.tensor([io1 - io0, sum(t.numel() * t.element_size() for t in state.values())],
                              dtype=torch.int64)
        dist.all_reduce(totals)
        if rank == 0:
            results.put((seconds, int(totals[0]), int(totals[1])))
    finally:
        dist.destroy_process_group()


def run(side, args, path, workdir, round_no):
    import torch.multiprocessing as mp

    benchlib.drop_cache(path)
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    store = os.path.join(workdir, f"store-{side}-{round_no}")
    mp.start_processes(_worker, args=(args.ranks, store, path, side, args.scope, results),
                       nprocs=args.ranks, join=True, start_method="spawn")
    return results.get(timeout=60)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default="/var/tmp")
    ap.add_argument("--size", default="512M")
    ap.add_argument("--ranks", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--scope", default="job", choices=["job", "node"])
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    import torch

    import sluice.torch

    size = benchlib.parse_size(args.size)
    workdir = tempfile.mkdtemp(prefix="sluice-fanout-", dir=args.dir)
    path = os.path.join(workdir, "m.safetensors")
    per = size // 64 // 4
    sluice.torch.save_file({f"t{i}": torch.full((per,), float(i)) for i in range(64)}, path)
    sides = ["each", "fanout"]
    got = {s: [] for s in sides}
    for r in range(args.rounds):
        for side in (sides if r % 2 == 0 else sides[::-1]):
            seconds, io, held = run(side, args, path, workdir, r)
            got[side].append((seconds, io, held))
            print(f"round {r} {side:6s} {seconds:7.2f} s  storage {io / 2**20:9.1f} MiB  "
                  f"held {held / 2**20:9.1f} MiB", file=sys.stderr)
    file_mib = os.path.getsize(path) / 2**20
    print(f"{args.ranks} ranks, gloo, CPU, checkpoint {file_mib:.0f} MiB, scope {args.scope}, "
          f"{args.rounds} rounds, medians")
    print(f"{'side':8s} {'wall s':>8s} {'storage MiB':>12s} {'x file':>7s}")
    med = {}
    for side in sides:
        wall = statistics.median(x[0] for x in got[side])
        io = statistics.median(x[1] for x in got[side])
        med[side] = (wall, io)
        print(f"{side:8s} {wall:8.2f} {io / 2**20:12.1f} {io / 2**20 / file_mib:7.2f}")
    print(f"fanout/each: wall {med['fanout'][0] / med['each'][0]:.2f}x, "
          f"storage {med['fanout'][1] / max(1, med['each'][1]):.2f}x")
    if not args.keep:
        for name in os.listdir(workdir):
            os.remove(os.path.join(workdir, name))
        os.rmdir(workdir)


if __name__ == "__main__":
    main()
