#!/usr/bin/python3
"""bench/ingest-vs-dataloader.py: sluice.data.Loader against PyTorch's DataLoader over a
np.memmap of a Megatron dataset (what Megatron's GPTDataset does), interleaved, medians (issue 17).

    PYTHONPATH=build/release/python /usr/bin/python3 bench/ingest-vs-dataloader.py
        [--prefix /var/tmp/sluice-ingest-bench/tokens] [--size 2G] [--reuse] [--seq-len 2048]
        [--batch 16] [--steps 200] [--rounds 3] [--workers 0,2] [--stall-steps 200]
        [--device sim|cuda:N] [--keep]

The dataset: PREFIX.bin/.idx of u16 tokens (>= 2 GiB), written with numpy as Megatron-Core's
_IndexWriter lays them out (sequences of 500-4000 tokens back to back); --reuse keeps one
already there. Sample k is tokens [k*L, k*L+L] (L = --seq-len), drawn at random (shuffle).

Sides, each feeding --device: "sim" (the default: the simulated device) or "cuda:N" (a CUDA
GPU; torch without CUDA is an error, exit 1):
  sluice       sluice.data.Loader(PREFIX, seq_len=L, batch_size=B, device=DEVICE): reads into
               pinned staging, one copy into device memory per batch, handed over by DLPack
  dl-wN        torch.utils.data.DataLoader(MemmapTokens, batch_size=B, shuffle=True,
               num_workers=N, pin_memory=True): __getitem__ copies the sample's slice out of an
               np.memmap of PREFIX.bin (as Megatron does), default collate stacks the batch, the
               pin-memory thread copies it to pinned memory, then the batch goes to the device:
               sim: copied into a buffer of sim device memory (torch copy_ into memory
               sluice.load allocated on "sim": a memcpy; the sim device's copy model, ~10 us per
               copy, is not charged to this side); cuda:N: batch.to(DEVICE, non_blocking=True),
               as a training loop moves it
On cuda:N both sides call torch.cuda.synchronize() after every batch (a training step ends with
the batch used on the device), so a step's time includes its batch's copy to the GPU. Before the
rounds, one sluice batch is compared with the memmap's samples (copied back to the host).
Each run takes --steps batches. Cold: the page cache of PREFIX.bin is dropped before every run
(fdatasync + POSIX_FADV_DONTNEED; the .idx stays). Warm: the file is read once before the warm
rounds. Every round runs every side once, the order rotating. Prints, per mode, medians of
samples/s and of CPU seconds per 1,000 samples (getrusage of this process and its children: the
DataLoader's workers are joined at the end of each run, so theirs count), then sluice / the best
DataLoader. Then the stall check: cold, the consumer sleeping the best DataLoader's cold time per
step after each batch (a training step's compute), sluice's stall_fraction (target < 5%).
Targets: samples/s >= 2x the best DataLoader cold, >= 1x warm, CPU per sample <= the
DataLoader's. A missed target is a result, not a failure (exit 0).
"""

import argparse
import os
import resource
import statistics
import struct
import sys
import time

import numpy as np
import torch
import torch.utils.data as tud

import sluice
import sluice.data

from benchlib import MiB, parse_size, drop_cache, warm_cache, check_device


def write_dataset(prefix, size, seed=0):
    """PREFIX.bin of `size` bytes of u16 tokens in sequences of 500-4000 tokens, and its .idx."""
    os.makedirs(os.path.dirname(prefix), exist_ok=True)
    rng = np.random.default_rng(seed)
    tokens = size // 2
    lengths = []
    left = tokens
    while left > 0:
        n = int(min(left, rng.integers(500, 4000)))
        lengths.append(n)
        left -= n
    chunk = 32 * MiB
    with open(prefix + ".bin", "wb") as f:
        done = 0
        while done < tokens:
            n = min(chunk, tokens - done)
            f.write(rng.integers(0, 50257, size=n, dtype=np.uint16).tobytes())
            done += n
    lengths = np.array(lengths, dtype=np.int32)
    pointers = np.zeros(len(lengths), dtype=np.int64)
    pointers[1:] = np.cumsum(lengths[:-1], dtype=np.int64) * 2
    docs = np.arange(len(lengths) + 1, dtype=np.int64)
    with open(prefix + ".idx", "wb") as f:
        f.write(b"MMIDIDX\x00\x00" + struct.pack("<QB", 1, 8) + struct.pack("<QQ", len(lengths), len(docs)))
        f.write(lengths.tobytes() + pointers.tobytes() + docs.tobytes())


class MemmapTokens(tud.Dataset):
    """Megatron's way: an np.memmap of the .bin, sample k sliced out of the token stream (the
    sequences lie back to back from byte 0, so the stream is the file) and copied."""

    def __init__(self, path, seq_len):
        self.path = path
        self.seq_len = seq_len
        self.n = (os.path.getsize(path) // 2 - 1) // seq_len
        self.tokens = None  # opened in each worker

    def __len__(self):
        return self.n

    def __getitem__(self, k):
        if self.tokens is None:
            self.tokens = np.memmap(self.path, dtype=np.uint16, mode="r")
        start = k * self.seq_len
        # PyTorch 1.13 has no uint16: the same bits as int16, as sluice hands them over.
        return torch.from_numpy(np.array(self.tokens[start:start + self.seq_len + 1]).view(np.int16))


def cpu_seconds():
    s = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def sim_buffer(batch, seq_len, tmpdir):
    """A [batch, seq_len + 1] int16 tensor in sim device memory (allocated by sluice.load)."""
    path = os.path.join(tmpdir, "sim-batch.npy")
    np.save(path, np.zeros((batch, seq_len + 1), dtype=np.int16))
    t = sluice.load(path, device="sim")["sim-batch"]
    os.remove(path)
    return torch.from_dlpack(t)


def step_done(a):
    """The end of a training step: on CUDA, the batch's copy (and any work on it) finished."""
    if a.device != "sim":
        torch.cuda.synchronize(a.device)


def run_sluice(a, seed, step_time=0.0):
    t0, c0 = time.perf_counter(), cpu_seconds()
    loader = sluice.data.Loader(a.prefix, seq_len=a.seq_len, batch_size=a.batch, seed=seed, device=a.device,
                                rank=0, world=1, prefetch=a.prefetch)
    steps = 0
    for batch in loader:
        step_done(a)
        del batch
        steps += 1
        if step_time:
            time.sleep(step_time)
        if steps == a.steps:
            break
    wall, cpu = time.perf_counter() - t0, cpu_seconds() - c0
    stats = loader.stats()
    del loader
    return steps * a.batch / wall, cpu / (steps * a.batch) * 1000, stats, wall / steps


def run_dataloader(a, seed, workers, sim):
    """sim: the sim device buffer the batches are copied into (None on CUDA)."""
    t0, c0 = time.perf_counter(), cpu_seconds()
    gen = torch.Generator()
    gen.manual_seed(seed)
    dl = tud.DataLoader(MemmapTokens(a.prefix + ".bin", a.seq_len), batch_size=a.batch, shuffle=True,
                        num_workers=workers, pin_memory=True, generator=gen, drop_last=True)
    it = iter(dl)
    steps = 0
    for batch in it:
        if sim is not None:
            sim.copy_(batch)
        else:
            batch = batch.to(a.device, non_blocking=True)  # from pinned memory: an async copy
            step_done(a)
        steps += 1
        if steps == a.steps:
            break
    del it  # joins the workers, so their CPU time counts as the children's
    wall, cpu = time.perf_counter() - t0, cpu_seconds() - c0
    return steps * a.batch / wall, cpu / (steps * a.batch) * 1000, None, wall / steps


def check_equal(a):
    """One batch of sluice against the memmap, as the DataLoader side reads it."""
    loader = sluice.data.Loader(a.prefix, seq_len=a.seq_len, batch_size=a.batch, device=a.device, rank=0, world=1)
    batch = next(iter(loader)).cpu()
    ref = MemmapTokens(a.prefix + ".bin", a.seq_len)
    for row, k in zip(batch, loader.last_batch.samples):
        if not torch.equal(row, ref[k]):
            sys.exit(f"sluice's sample {k} differs from the memmap's")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--prefix", default="/var/tmp/sluice-ingest-bench/tokens")
    p.add_argument("--size", default="2G")
    p.add_argument("--reuse", action="store_true", help="use the dataset at --prefix if it is there")
    p.add_argument("--seq-len", type=int, default=2048)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--workers", default="0,2")
    p.add_argument("--prefetch", type=int, default=4)
    p.add_argument("--stall-steps", type=int, default=200)
    p.add_argument("--device", default="sim", help="where batches go: sim or cuda:N")
    p.add_argument("--keep", action="store_true", help="keep the dataset (default: removed unless --reuse)")
    a = p.parse_args()
    check_device(a.device)
    size = parse_size(a.size)
    if not (a.reuse and os.path.exists(a.prefix + ".bin") and os.path.getsize(a.prefix + ".bin") >= size):
        t = time.perf_counter()
        write_dataset(a.prefix, size)
        print(f"wrote {a.prefix}.bin/.idx ({size / (1 << 30):.2f} GiB) in {time.perf_counter() - t:.1f} s")
    check_equal(a)
    workers = [int(w) for w in a.workers.split(",")]
    sim = sim_buffer(a.batch, a.seq_len, os.path.dirname(a.prefix)) if a.device == "sim" else None
    if sim is None:
        torch.zeros(1, device=a.device)  # the CUDA context, made before any clock starts
        torch.cuda.synchronize(a.device)
    sides = {"sluice": lambda seed: run_sluice(a, seed)}
    for w in workers:
        sides[f"dl-w{w}"] = lambda seed, w=w: run_dataloader(a, seed, w, sim)
    print(f"sluice {sluice.__version__}, torch {torch.__version__}, {os.cpu_count()} CPUs; "
          f"{os.path.getsize(a.prefix + '.bin') / (1 << 30):.2f} GiB of u16 tokens, seq_len {a.seq_len}, "
          f"batch {a.batch}, {a.steps} steps a run, {a.rounds} rounds, shuffled; into {a.device}")
    results = {}
    names = list(sides)
    for mode in ("cold", "warm"):
        if mode == "warm":
            warm_cache(a.prefix + ".bin")
        res = {n: [] for n in names}
        for r in range(a.rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            for n in order:
                if mode == "cold":
                    drop_cache(a.prefix + ".bin")
                res[n].append(sides[n](1000 * r + 17))
        results[mode] = res
    print(f"\n| mode | side | samples/s (median) | CPU s / 1k samples | s / step |")
    print("|---|---|---|---|---|")
    summary = {}
    for mode, res in results.items():
        med = {n: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v),
                   statistics.median(x[3] for x in v)) for n, v in res.items()}
        for n, (rate, cpu, per) in med.items():
            print(f"| {mode} | {n} | {rate:,.0f} | {cpu:.3f} | {per * 1e3:.2f} ms |")
        best = max((n for n in med if n != "sluice"), key=lambda n: med[n][0])
        summary[mode] = (med, best)
    print()
    targets = {"cold": 2.0, "warm": 1.0}
    for mode, (med, best) in summary.items():
        ratio = med["sluice"][0] / med[best][0]
        cpu_ratio = med["sluice"][1] / med[best][1]
        paired = statistics.median(s[0] / d[0] for s, d in zip(results[mode]["sluice"], results[mode][best]))
        ok = "ok" if ratio >= targets[mode] else "MISSED"
        cpu_ok = "ok" if cpu_ratio <= 1.0 else "MISSED"
        print(f"{mode}: sluice / best DataLoader ({best}): {ratio:.2f}x samples/s (paired {paired:.2f}x; target >= "
              f"{targets[mode]}x: {ok}), {cpu_ratio:.2f}x CPU per sample (target <= 1: {cpu_ok})")
    for mode in results:
        last = results[mode]["sluice"][-1][2]
        print(f"sluice {mode}, last run: path {last['path']} ({last['reason']})")
    med, best = summary["cold"]
    step_time = med[best][2]
    a.steps = a.stall_steps
    drop_cache(a.prefix + ".bin")
    rate, _, stats, _ = run_sluice(a, 999, step_time=step_time)
    verdict = "ok" if stats["stall_fraction"] < 0.05 else "MISSED"
    print(f"\nstall check (cold, step time {step_time * 1e3:.2f} ms = {best}'s cold time per step, {a.steps} steps): "
          f"sluice stall {100 * stats['stall_fraction']:.2f}% of wall (target < 5%: {verdict}), wait p50 "
          f"{stats['wait_p50_seconds'] * 1e3:.3f} ms, p99 {stats['wait_p99_seconds'] * 1e3:.3f} ms"
          + (f"; cause: {stats['stall_cause']}" if stats["stall_cause"] else ""))
    if not a.keep and not a.reuse:
        for ext in (".bin", ".idx"):
            os.remove(a.prefix + ext)


if __name__ == "__main__":
    main()
