"""sluice.distributed: the fan-out planner from Python, and load() over torch.distributed (gloo on
CPU) in 2, 3 and 4 processes, every rank's tensors equal to a single-process load (whole tensors,
and row and column parts against slices of the reference). The processes share a FileStore in a
temporary folder; every wait has a deadline, so a hang fails the test instead of blocking it."""

import os
import time

import pytest

import sluice
from sluice import distributed

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
mp = pytest.importorskip("torch.multiprocessing")

DEADLINE_S = 120


def _checkpoint(path):
    g = torch.Generator().manual_seed(34)
    state = {
        "w.f32": torch.randn(12, 10, generator=g),
        "w.bf16": torch.randn(7, 5, generator=g).to(torch.bfloat16),
        "w.f16": torch.randn(33, 8, generator=g).to(torch.float16),
        "b.i64": torch.arange(3, dtype=torch.int64),
        "mask": torch.rand(4, 4, generator=g) > 0.5,
        "empty": torch.zeros(0, 6, dtype=torch.uint8),
        "big": torch.randn(5000, generator=g),  # cut into chunks by the small exchange budget
    }
    from sluice.torch import save_file

    save_file(state, path)


def _parts(name, shape, rank, world):
    """Rows of the float tensors of 2 dimensions, columns of the bfloat16 one, "big" whole on
    ranks 0 and 1 and none of it on the others (a move to some ranks only), the rest whole."""
    if name == "big":
        return slice(None) if rank < 2 else slice(0, 0)
    if name in ("w.f32", "w.f16"):
        return slice(rank * shape[0] // world, (rank + 1) * shape[0] // world)
    if name == "w.bf16":
        return (slice(None), slice(rank * shape[1] // world, (rank + 1) * shape[1] // world))
    return None


def _worker(rank, world, store_path, ckpt, scope, use_parts):
    store = dist.FileStore(store_path, world)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world)
    try:
        from sluice.torch import load as single
        from sluice.torch import load_file

        if scope == "load_file":  # sluice.torch.load_file with the default group: node scope
            got = load_file(ckpt, "cpu", group="default")
        else:
            got = distributed.load(ckpt, "cpu", None, parts=_parts if use_parts else None, scope=scope,
                                   exchange_budget=4096)
        want = single(ckpt)
        assert sorted(got) == sorted(want)
        for name, ref in want.items():
            index = _parts(name, tuple(ref.shape), rank, world) if use_parts else None
            expected = ref if index is None else ref[index]
            t = got[name]
            assert t.dtype == expected.dtype, name
            assert tuple(t.shape) == tuple(expected.shape), (name, t.shape, expected.shape)
            assert torch.equal(t, expected.contiguous()), name
        # Bytes read from storage, as the library's reads reported them, summed over the ranks:
        # every byte once (one machine is one node, so scope node reads once too; the parts of
        # _parts cover every tensor, so the union of the needs is the whole checkpoint).
        report = distributed.last_report()
        totals = torch.tensor([report["read_bytes"], report["sent_bytes"], report["received_bytes"]])
        dist.all_reduce(totals)
        unique = sum(t.numel() * t.element_size() for t in want.values())
        assert totals[0] == unique, (totals, unique)
        assert totals[1] == totals[2]  # every byte sent is received once
        if not use_parts:  # each rank needs every byte: its own reads plus what it received
            assert report["read_bytes"] + report["received_bytes"] == unique
            assert report["plan_amplification"] == 1.0
        dist.barrier()
    finally:
        dist.destroy_process_group()


def _read_bytes():
    """This process's bytes fetched from the storage layer (/proc/self/io read_bytes): what the
    kernel counted, not what sluice says it read."""
    with open("/proc/self/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("read_bytes:"))


def _proc_io_worker(rank, world, store_path, ckpt, _scope, _use_parts):
    store = dist.FileStore(store_path, world)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world)
    try:
        before = _read_bytes()
        got = distributed.load(ckpt, "cpu", None, scope="job")
        sums = torch.tensor([_read_bytes() - before, distributed.last_report()["reads"]])
        dist.all_reduce(sums)
        delta, reads = sums[0], sums[1].item()
        unique = sum(t.numel() * t.element_size() for t in got.values())
        # With cache_policy bypass every tensor byte comes from the disk (O_DIRECT), each once
        # in the job: the sum is the checkpoint's tensors plus 4 KiB alignment at the edges of
        # each rank's reads (and a header page), far from the world x unique of every rank
        # reading alone.
        slack = (reads * 2 + 2 * world) * 4096
        assert unique <= delta.item() <= unique + slack, (delta.item(), unique, slack)
        assert delta.item() < 1.5 * unique, (delta.item(), unique)
        dist.barrier()
    finally:
        dist.destroy_process_group()


def _large_checkpoint(path):
    """6 MiB in 7 tensors: large beside the 4 KiB alignment of O_DIRECT reads."""
    g = torch.Generator().manual_seed(35)
    state = {f"layer{i}.w": torch.randn(1024, 256, generator=g) for i in range(6)}
    state["odd"] = torch.randn(1001, generator=g).to(torch.float16)
    from sluice.torch import save_file

    save_file(state, path)


def _spawn(world, tmp_path, scope, use_parts, worker=_worker, make=_checkpoint):
    ckpt = str(tmp_path / "m.safetensors")
    make(ckpt)
    store = str(tmp_path / f"store-{world}-{scope}-{use_parts}")
    ctx = mp.start_processes(worker, args=(world, store, ckpt, scope, use_parts), nprocs=world, join=False,
                             start_method="spawn")
    deadline = time.monotonic() + DEADLINE_S
    try:
        while not ctx.join(timeout=1):
            if time.monotonic() > deadline:
                pytest.fail(f"{world} processes did not finish within {DEADLINE_S} s")
    finally:
        for p in ctx.processes:
            if p.is_alive():
                p.kill()
                p.join()


@pytest.mark.parametrize("world", [2, 3])
@pytest.mark.parametrize("scope", ["node", "job"])
def test_every_rank_gets_the_single_process_dict(world, scope, tmp_path):
    _spawn(world, tmp_path, scope, use_parts=False)


@pytest.mark.parametrize("world", [2, 4])
def test_torch_load_file_with_the_default_group_reads_each_byte_once(world, tmp_path):
    _spawn(world, tmp_path, "load_file", use_parts=False)


def test_the_kernel_counts_each_byte_read_once_in_the_job(tmp_path, monkeypatch):
    """/proc/PID/io, summed over 3 ranks, with cache_policy bypass: on one machine the shared page
    cache would otherwise hide a repeated read."""
    probe = tmp_path / "o_direct"
    probe.write_bytes(b"x")
    try:
        os.close(os.open(probe, os.O_RDONLY | os.O_DIRECT))
    except OSError:  # tmpfs: no O_DIRECT, every read buffered and never counted as storage
        pytest.skip(f"no O_DIRECT in {tmp_path}: the kernel's count would see no storage reads")
    monkeypatch.setenv("SLUICE_CACHE_POLICY", "bypass")
    _spawn(3, tmp_path, "job", use_parts=False, worker=_proc_io_worker, make=_large_checkpoint)


def test_torch_load_file_with_group_default_and_no_group_loads_alone(tmp_path):
    from sluice.torch import load, load_file

    ckpt = str(tmp_path / "m.safetensors")
    _checkpoint(ckpt)
    assert not dist.is_initialized()
    got, want = load_file(ckpt, "cpu", group="default"), load(ckpt)
    assert sorted(got) == sorted(want)
    assert all(torch.equal(got[k], want[k]) for k in want)


@pytest.mark.parametrize("world", [2, 3])
def test_row_and_column_parts_equal_slices_of_the_reference(world, tmp_path):
    _spawn(world, tmp_path, "job", use_parts=True)


def test_the_plan_reads_each_byte_once_per_scope(tmp_path):
    ckpt = str(tmp_path / "m.safetensors")
    _checkpoint(ckpt)
    table = sluice._sluice._fanout_items([ckpt])
    items = [(t[0], t[2], t[3], t[4]) for t in table]
    total = sum(t[4] for t in table)
    # 4 replicas on 2 nodes: once per node reads the checkpoint twice, once per job once.
    ranks = [(r, r // 2, None) for r in range(4)]
    node = distributed.plan_fanout(items, ranks, nodes=2, scope="node", exchange_budget=4096)
    job = distributed.plan_fanout(items, ranks, nodes=2, scope="job", exchange_budget=4096)
    assert node["unique_bytes"] == job["unique_bytes"] == total
    assert node["read_bytes"] == 2 * total and node["amplification"] == 2.0
    assert job["read_bytes"] == total and job["amplification"] == 1.0
    assert sum(r[0] for r in job["ranks"]) == total
    assert all(r[4] <= 4096 for r in job["reads"])
    # Every receiver of a move is another rank; every rank ends with the whole checkpoint.
    for _read, kind, source, receivers in job["moves"]:
        assert source not in receivers and kind == ("send" if len(receivers) == 1 else "broadcast")
    received = [r[2] for r in job["ranks"]]
    for r in range(4):
        own = sum(x[4] for x in job["reads"] if x[5] == r)
        assert own + received[r] == total
    assert distributed.slice_ranges(5, 3, 4, 1, 2) == [(24, 36)]
    assert distributed.slice_ranges(2, 5, 2, 1, 2, columns=True) == [(4, 6), (14, 6)]


def test_bad_input_raises_a_usage_error():
    with pytest.raises(ValueError, match="unknown node"):
        distributed.plan_fanout([("t", 0, 0, 10)], [(0, 1, None)], nodes=1)
    with pytest.raises(ValueError, match="out of range"):
        distributed.plan_fanout([("t", 0, 0, 10)], [(1, 0, None)], nodes=1)
    with pytest.raises(ValueError, match="scope"):
        distributed.plan_fanout([("t", 0, 0, 10)], [(0, 0, None)], scope="rack")


# Failures never hang: every rank raises the same sluice.Error naming the failed rank, or (a rank
# killed) fails within the group's short timeout; the parent's deadline catches a hang.

FAIL_TIMEOUT_S = 10


def _failing_worker(rank, world, store_path, ckpts, how, result_dir):
    import datetime
    import os
    import signal

    if how == "eio" and rank == 1:
        os.environ["SLUICE_FAULTS"] = "eio=1,only=read"
    if how == "eio-mid" and rank == 1:  # the header reads well, the second chunk fails (a double)
        start = distributed._Reads._start

        class Failed:
            def __init__(self, error):
                self.error = error

            def result(self):
                raise self.error

        def start_then_fail(self, k):
            start(self, k)
            if len(self._started) + self._report["reads"] == 2:
                buf, future = self._started[k]
                future.result()
                _item, _file, _offset, file_offset, size = self._plan["reads"][k][:5]
                self._started[k] = (buf, Failed(sluice.Error(5, "read: Input/output error", ckpts[rank],
                                                             offset=file_offset, length=size, op="read")))

        distributed._Reads._start = start_then_fail
    if how == "kill" and rank == 2:
        take = distributed._Reads.take

        def take_then_die(self, k):
            buf = take(self, k)
            os.kill(os.getpid(), signal.SIGKILL)
            return buf

        distributed._Reads.take = take_then_die
    store = dist.FileStore(store_path, world)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=FAIL_TIMEOUT_S))
    started = time.monotonic()
    try:
        distributed.load(ckpts[rank], "cpu", None, scope="job", exchange_budget=4096)
        text = "no error"
    except sluice.Error as e:
        text = f"{type(e).__name__}|{e.filename}|{time.monotonic() - started:.1f}|{e}"
    with open(os.path.join(result_dir, f"rank{rank}"), "w") as f:
        f.write(text)


def _spawn_failing(world, tmp_path, how, delete=None):
    ckpts = []
    for r in range(world):  # each rank its own copy, so one rank's view can lack its file
        ckpts.append(str(tmp_path / f"m{r}.safetensors"))
        _checkpoint(ckpts[-1])
    if delete is not None:
        import os

        os.unlink(ckpts[delete])
    store = str(tmp_path / "store")
    ctx = mp.start_processes(_failing_worker, args=(world, store, ckpts, how, str(tmp_path)), nprocs=world,
                             join=False, start_method="spawn")
    deadline = time.monotonic() + DEADLINE_S
    hung = False
    try:
        while not all(not p.is_alive() for p in ctx.processes):
            if time.monotonic() > deadline:
                hung = True
                break
            time.sleep(0.2)
    finally:
        for p in ctx.processes:
            if p.is_alive():
                p.kill()
            p.join()
    assert not hung, f"{world} processes still running after {DEADLINE_S} s"
    results = {}
    for r in range(world):
        f = tmp_path / f"rank{r}"
        results[r] = f.read_text() if f.exists() else None
    return ckpts, results


def test_a_file_missing_on_one_rank_fails_every_rank_naming_it(tmp_path):
    ckpts, results = _spawn_failing(3, tmp_path, "missing", delete=1)
    for r in range(3):
        kind, filename, _seconds, message = results[r].split("|", 3)
        assert kind == "FileNotFoundError", results[r]
        assert filename == ckpts[1] and "rank 1 could not" in message and ckpts[1] in message, message
        assert "No such file or directory" in message


def test_an_eio_on_one_rank_fails_every_rank_naming_it(tmp_path):
    ckpts, results = _spawn_failing(3, tmp_path, "eio")
    for r in range(3):
        kind, filename, _seconds, message = results[r].split("|", 3)
        assert kind == "Error" and filename == ckpts[1], results[r]
        assert "rank 1 could not" in message and "Input/output error" in message, message


def test_an_eio_mid_load_on_one_rank_fails_every_rank_after_the_moves(tmp_path):
    ckpts, results = _spawn_failing(3, tmp_path, "eio-mid")
    for r in range(3):
        kind, filename, _seconds, message = results[r].split("|", 3)
        assert kind == "Error" and filename == ckpts[1], results[r]
        assert message.startswith(f"rank 1 could not read {ckpts[1]} [offset ") and "Input/output error" in message


def test_a_rank_killed_mid_load_fails_the_others_within_the_timeout(tmp_path):
    _ckpts, results = _spawn_failing(3, tmp_path, "kill")
    assert results[2] is None  # killed
    for r in (0, 1):
        assert results[r] is not None and results[r] != "no error", results
        _kind, _filename, seconds, message = results[r].split("|", 3)
        assert float(seconds) < FAIL_TIMEOUT_S + 20, results[r]
        assert f"rank {r}: a move of the load failed" in message, message
