"""Saving once across the ranks of torch.distributed (issue 34, item 3), gloo on CPU, real
processes: a replicated state dict saved by 4 ranks (each tensor written by one owner rank, each
rank its own shards, rank 0 the index last) loads on 2 and 3 ranks and in one process bit for bit;
save_file with a group writes one file; a rank killed with SIGKILL during a save leaves the
previous checkpoint loadable bit for bit, and the other ranks fail within the group's timeout.
Every wait has a deadline, so a hang fails the test instead of blocking it."""

import datetime
import json
import os
import signal
import time

import pytest

import sluice
import sluice.torch
from sluice import distributed

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
mp = pytest.importorskip("torch.multiprocessing")

DEADLINE_S = 120
FAIL_TIMEOUT_S = 10


def _state(seed):
    """Every dtype the loaders test, odd sizes, an empty tensor; 40 tensors, some large enough
    that the 16 KB shards hold one each."""
    g = torch.Generator().manual_seed(seed)
    state = {}
    for i in range(8):
        state[f"layer{i}.w"] = torch.randn(37, 29 + i, generator=g)
        state[f"layer{i}.b"] = torch.randn(29 + i, generator=g).to(torch.bfloat16)
        state[f"layer{i}.h"] = torch.randn(5000 + i, generator=g).to(torch.float16)
        state[f"layer{i}.i"] = torch.randint(-99, 99, (7, i + 1), generator=g, dtype=torch.int64)
        state[f"layer{i}.m"] = torch.rand(9, generator=g) > 0.5
    state["empty"] = torch.zeros(0, 3, dtype=torch.uint8)
    return state


def _equal(got, want):
    assert sorted(got) == sorted(want)
    for name, ref in want.items():
        t = got[name]
        assert t.dtype == ref.dtype and tuple(t.shape) == tuple(ref.shape), name
        assert torch.equal(t, ref), name


def _init(rank, world, store_path, timeout_s=60):
    dist.init_process_group("gloo", store=dist.FileStore(store_path, world), rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=timeout_s))


def _save_worker(rank, world, store_path, target, how, result_dir):
    _init(rank, world, store_path)
    try:
        from sluice.torch import save_checkpoint, save_file

        state = _state(34)  # the same on every rank: replicated
        if how == "file":
            save_file(state, target, {"format": "pt"}, group="default")
            files = [target] if rank == 0 else []
        else:
            files = save_checkpoint(state, target, max_shard_size="16KB", group=None)
        with open(os.path.join(result_dir, f"rank{rank}"), "w") as f:
            json.dump(files, f)
        dist.barrier()
    finally:
        dist.destroy_process_group()


def _load_worker(rank, world, store_path, target, how, result_dir):
    _init(rank, world, store_path)
    try:
        from sluice.torch import load_file

        got = load_file(target, "cpu", group="default") if how == "load_file" else \
            distributed.load(target, "cpu", None, scope="job")
        _equal(got, _state(34))
        dist.barrier()
    finally:
        dist.destroy_process_group()


def _spawn(worker, world, tmp_path, target, how, name):
    result_dir = tmp_path / f"results-{name}"
    result_dir.mkdir()
    ctx = mp.start_processes(worker, args=(world, str(tmp_path / f"store-{name}"), str(target), how,
                                           str(result_dir)), nprocs=world, join=False, start_method="spawn")
    deadline = time.monotonic() + DEADLINE_S
    try:
        while not ctx.join(timeout=1):
            assert time.monotonic() < deadline, f"{world} ranks did not finish in {DEADLINE_S} s: a hang"
    finally:
        for p in ctx.processes:
            if p.is_alive():
                p.kill()
                p.join()
    return result_dir


def test_a_checkpoint_saved_by_4_ranks_loads_on_2_and_3_ranks_and_alone(tmp_path):
    folder = tmp_path / "ckpt"
    results = _spawn(_save_worker, 4, tmp_path, folder, "checkpoint", "save")
    written = [json.loads((results / f"rank{r}").read_text()) for r in range(4)]
    files = [os.path.basename(f) for part in written for f in part]
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    # Each tensor written once: the ranks' files are disjoint and are the index's files.
    assert len(files) == len(set(files)) and set(files) == set(index["weight_map"].values())
    assert sorted(os.listdir(folder)) == sorted(files + ["model.safetensors.index.json"])
    assert all(written), f"every rank writes a share of a replicated dict: {written}"
    sizes = [sum(os.path.getsize(f) for f in part) for part in written]
    assert max(sizes) < 2 * min(sizes), sizes  # balanced by bytes
    _equal(sluice.torch.load(str(folder)), _state(34))
    _spawn(_load_worker, 2, tmp_path, folder, "fanout", "load2")
    _spawn(_load_worker, 3, tmp_path, folder, "load_file", "load3")


def test_save_file_with_a_group_writes_one_file_once(tmp_path):
    target = tmp_path / "m.safetensors"
    results = _spawn(_save_worker, 4, tmp_path, target, "file", "savefile")
    assert json.loads((results / "rank1").read_text()) == []
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(("m.", ".m."))] == ["m.safetensors"]
    _equal(sluice.torch.load(str(target)), _state(34))


def _killed_worker(rank, world, store_path, folder, how, result_dir):
    """Rank 2 writes its shards, then dies (SIGKILL) before the status exchange: the index of the
    new save is never written. The other ranks must raise within FAIL_TIMEOUT_S."""
    _init(rank, world, store_path, FAIL_TIMEOUT_S)
    from sluice import _sluice
    from sluice.torch import save_checkpoint

    if rank == 2:
        real = _sluice._save_shards

        def write_then_die(*args, **kwargs):
            real(*args, **kwargs)
            os.kill(os.getpid(), signal.SIGKILL)

        _sluice._save_shards = write_then_die
    t0 = time.monotonic()
    try:
        save_checkpoint(_state(35), folder, max_shard_size="16KB")
        outcome = "no error"
    except sluice.Error as e:
        outcome = f"{type(e).__name__}|{time.monotonic() - t0:.1f}|{e}"
    with open(os.path.join(result_dir, f"rank{rank}"), "w") as f:
        f.write(outcome)
    os._exit(0)  # the group cannot be torn down with a dead peer


def test_a_rank_killed_during_a_save_leaves_the_previous_checkpoint(tmp_path):
    folder = tmp_path / "ckpt"
    sluice.torch.save_checkpoint(_state(34), folder, max_shard_size="16KB")  # the previous one
    before = sorted(os.listdir(folder))
    result_dir = tmp_path / "results-kill"
    result_dir.mkdir()
    ctx = mp.start_processes(_killed_worker, args=(4, str(tmp_path / "store-kill"), str(folder), "", str(result_dir)),
                             nprocs=4, join=False, start_method="spawn")
    deadline = time.monotonic() + DEADLINE_S
    try:
        while any(p.is_alive() for p in ctx.processes):
            assert time.monotonic() < deadline, "a rank hangs after another was killed during a save"
            time.sleep(0.2)
    finally:
        for p in ctx.processes:
            if p.is_alive():
                p.kill()
                p.join()
    assert not (result_dir / "rank2").exists()  # killed
    for r in (0, 1, 3):
        kind, seconds, message = (result_dir / f"rank{r}").read_text().split("|", 2)
        assert kind in ("Error", "ConnectionResetError", "TimeoutError"), message
        assert float(seconds) < FAIL_TIMEOUT_S + 20 and f"rank {r}:" in message, message
    # The new save's shards (new names: the folder held a checkpoint) may be there; the index is
    # the old one and every file it names is the old file: the previous checkpoint, bit for bit.
    after = sorted(os.listdir(folder))
    assert set(before) <= set(after) and len(after) > len(before), (before, after)
    _equal(sluice.torch.load(str(folder)), _state(34))
    # The next save completes and removes the dead save's files along with the old shards.
    sluice.torch.save_checkpoint(_state(35), folder, max_shard_size="16KB")
    _equal(sluice.torch.load(str(folder)), _state(35))
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    assert sorted(os.listdir(folder)) == sorted(set(index["weight_map"].values()) | {"model.safetensors.index.json"})
