#!/usr/bin/python3
"""The Python lanes of bench/soak.sh. Each call is one run and prints one line for the soak's
results, "OUTCOME BYTES", then what it saw (the error, the ranks' messages) on the next lines.

  soak_lanes.py file URL REFERENCE
      sluice.File(URL).read of the whole object (s3:// or http://, the endpoint and keys from the
      environment) into a bytearray, every byte compared with the file REFERENCE. ok when equal;
      wrong_bytes when not; failed NAME-OF-ERRNO on a sluice.Error (the soak checks its message
      names the URL and a range).

  soak_lanes.py ranks CHECKPOINT WORLD API WORKDIR FAULTS DEADLINE_S
      WORLD gloo processes (spawned, a FileStore in WORKDIR) load CHECKPOINT with API
      ("distributed": sluice.distributed.load, scope job; "load_file": sluice.torch.load_file with
      group="default"), SLUICE_FAULTS=FAULTS in every rank (its own seed and log, WORKDIR/rankR.faults),
      and compare every tensor with a single-process sluice.torch.load here, without faults.
      Outcomes: ok (every rank equal), wrong_bytes, false_success (a rank succeeded although a
      hard fault was injected into some rank), failed_as_injected (every rank raised a
      sluice.Error that names a rank given a hard fault, its file and a range), error_without_range,
      unexplained_failure (an error without a hard fault), rank_died, hang (not done in
      DEADLINE_S: the ranks are killed)."""
import datetime
import errno
import hashlib
import json
import os
import re
import sys
import time


def read_file(url, reference):
    import sluice

    with open(reference, "rb") as f:
        want = f.read()
    buf = bytearray(len(want) + 4096)
    try:
        with sluice.File(url) as f:
            r = f.read(buf, 0)
    except sluice.Error as e:
        print(f"failed {errno.errorcode.get(e.errno, e.errno)}\n{e}")
        return
    got = bytes(buf[: r.bytes])
    if got == want:
        print(f"ok {len(want)}")
    else:
        first = next((i for i in range(min(len(got), len(want))) if got[i] != want[i]), min(len(got), len(want)))
        print(f"wrong_bytes 0\n{r.bytes} of {len(want)} bytes, the first wrong at {first}")


def _digest(t):
    import torch

    return hashlib.blake2b(t.contiguous().view(-1).view(torch.uint8).numpy().tobytes(), digest_size=16).hexdigest()


def _rank(rank, world, ckpt, api, workdir, faults, want):
    # Read once per process, when the first engine is made: set before sluice makes one.
    os.environ["SLUICE_FAULTS"] = f"{faults},seed={rank * 7919 + os.getpid()},log={workdir}/rank{rank}.faults"
    import torch.distributed as dist

    import sluice
    from sluice import distributed

    store = dist.FileStore(os.path.join(workdir, "store"), world)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=20))
    result = {}
    try:
        if api == "load_file":
            from sluice.torch import load_file

            got = load_file(ckpt, "cpu", group="default")
        else:
            got = distributed.load(ckpt, "cpu", None, scope="job")
        wrong = [k for k in want if k not in got or _digest(got[k]) != want[k]]
        result = {"ok": not wrong, "wrong": wrong + sorted(set(got) - set(want))}
    except sluice.Error as e:
        result = {"error": str(e), "filename": e.filename}
    with open(os.path.join(workdir, f"rank{rank}.json"), "w") as f:
        json.dump(result, f)
    try:
        dist.destroy_process_group()
    except Exception:  # a failed load may leave the group unusable; the result is written
        pass


def _hard_faults(workdir, rank):
    try:
        with open(os.path.join(workdir, f"rank{rank}.faults")) as f:
            return sum(1 for line in f if re.search(r"fault=(eio|enospc)", line))
    except FileNotFoundError:
        return 0


def _classify(results, hard, ckpt, nbytes):
    world = len(results)
    if any(r is None for r in results):
        return "rank_died", 0
    faulted = [r for r in range(world) if hard[r]]
    errors = [r.get("error") for r in results]
    if not faulted:
        if all(r.get("ok") for r in results):
            return "ok", world * nbytes
        if any("wrong" in r and r["wrong"] for r in results):
            return "wrong_bytes", 0
        return "unexplained_failure", 0
    if any("error" not in r for r in results):
        return "false_success", 0
    named = [re.match(r"rank (\d+) could not", e) for e in errors]
    if all(m and int(m.group(1)) in faulted for m in named) and all(
            ckpt in e and "[offset " in e for e in errors):
        return "failed_as_injected", 0
    return "error_without_range", 0


def ranks(ckpt, world, api, workdir, faults, deadline_s):
    import torch.multiprocessing as mp

    from sluice.torch import load

    reference = load(ckpt)  # a single-process load, without faults
    want = {k: _digest(v) for k, v in reference.items()}
    nbytes = sum(v.numel() * v.element_size() for v in reference.values())
    del reference
    ctx = mp.start_processes(_rank, args=(world, ckpt, api, workdir, faults, want), nprocs=world, join=False,
                             start_method="spawn")
    end, hung = time.monotonic() + deadline_s, False
    while any(p.is_alive() for p in ctx.processes):
        if time.monotonic() > end:
            hung = True
            break
        time.sleep(0.1)
    for p in ctx.processes:
        if p.is_alive():
            p.kill()
        p.join()
    hard = [_hard_faults(workdir, r) for r in range(world)]
    results = []
    for r in range(world):
        try:
            with open(os.path.join(workdir, f"rank{r}.json")) as f:
                results.append(json.load(f))
        except (FileNotFoundError, json.JSONDecodeError):
            results.append(None)
    outcome, verified = ("hang", 0) if hung else _classify(results, hard, ckpt, nbytes)
    print(f"{outcome} {verified}")
    print(f"{world} ranks, {api}, hard faults by rank {hard}")
    for r, res in enumerate(results):
        print(f"  rank {r}: {json.dumps(res)}")


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "file":
        return read_file(sys.argv[2], sys.argv[3])
    if len(sys.argv) == 8 and sys.argv[1] == "ranks":
        _, _, ckpt, world, api, workdir, faults, deadline = sys.argv
        return ranks(ckpt, int(world), api, workdir, faults, float(deadline))
    sys.exit(__doc__)


if __name__ == "__main__":
    main()
