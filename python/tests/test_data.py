"""Training batches from Python: sluice.data.Loader over Megatron, WebDataset and npy datasets
written here (numpy + struct for Megatron's .bin/.idx, tarfile for shards, numpy.save for .npy),
compared with what those files hold by the formats' own rules, never with sluice's view of them:
every sample once across ranks, one order per (seed, epoch), resume (elastic too), DLPack without
a copy, memory coming back, bad input and the launcher's variables."""

import collections
import gc
import io
import os
import struct
import tarfile

import pytest
from conftest import need

import sluice
from sluice import data as sdata

np = need("numpy")
torch = need("torch")

SEQ_LEN = 16


# --- Datasets, written by the formats' descriptions ------------------------------------------

def write_megatron(prefix, sequences, dtype=np.uint16, code=8, version=1):
    """PREFIX.bin/.idx of Megatron-Core's _IndexWriter: the sequences back to back."""
    arrays = [np.asarray(s, dtype=dtype) for s in sequences]
    with open(f"{prefix}.bin", "wb") as f:
        for a in arrays:
            f.write(a.tobytes())
    lengths = np.array([len(a) for a in arrays], dtype=np.int32)
    pointers = np.concatenate([[0], np.cumsum(lengths[:-1], dtype=np.int64) * np.dtype(dtype).itemsize]).astype(np.int64)
    docs = np.arange(len(arrays) + 1, dtype=np.int64)
    with open(f"{prefix}.idx", "wb") as f:
        f.write(b"MMIDIDX\x00\x00" + struct.pack("<Q", version) + struct.pack("<B", code))
        f.write(struct.pack("<Q", len(arrays)) + struct.pack("<Q", len(docs)))
        f.write(lengths.tobytes() + pointers.tobytes() + docs.tobytes())
    return str(prefix)


def megatron_samples(sequences, seq_len=SEQ_LEN):
    """Sample k = T[k*L .. k*L+L] of the stream T of all tokens."""
    stream = np.concatenate([np.asarray(s, dtype=np.uint16) for s in sequences])
    n = (len(stream) - 1) // seq_len
    return [stream[k * seq_len:k * seq_len + seq_len + 1] for k in range(n)]


def write_shard(path, samples):
    """A tar of members KEY.FIELD in order; samples: [(key, {field: bytes})]."""
    with tarfile.open(path, "w") as tar:
        for key, fields in samples:
            for field, payload in fields.items():
                info = tarfile.TarInfo(f"{key}.{field}")
                info.size = len(payload)
                tar.addfile(info, io.BytesIO(payload))
    return str(path)


@pytest.fixture
def megatron(tmp_path):
    rng = np.random.default_rng(1)
    sequences = [rng.integers(0, 65535, size=int(n), dtype=np.uint16) for n in rng.integers(1, 90, size=40)]
    prefix = write_megatron(tmp_path / "text_document", sequences)
    return prefix, megatron_samples(sequences)


@pytest.fixture
def npy(tmp_path):
    rng = np.random.default_rng(2)
    a = rng.standard_normal((70, 3, 5)).astype(np.float32)
    b = rng.standard_normal((33, 3, 5)).astype(np.float32)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    return [str(tmp_path / "a.npy"), str(tmp_path / "b.npy")], np.concatenate([a, b])


@pytest.fixture
def wds(tmp_path):
    rng = np.random.default_rng(3)
    shards, expected = [], {}
    for s in range(3):
        samples = []
        for i in range(25):
            key = f"s{s}/{i:04d}"
            fields = {"txt": rng.bytes(int(rng.integers(0, 300))), "cls": str(i % 7).encode()}
            if i % 3 == 0:
                fields["jpg"] = rng.bytes(int(rng.integers(1, 5000)))
            samples.append((key, fields))
            expected[f"shard-{s}.tar/{key}"] = fields
        shards.append(write_shard(tmp_path / f"shard-{s}.tar", samples))
    return shards, expected


def fixed_loader(path, **kw):
    kw.setdefault("device", "sim")
    kw.setdefault("rank", 0)
    kw.setdefault("world", 1)
    return sdata.Loader(path, **kw)


def rows_of(loader):
    """[(Batch, tensor)] of one iteration of a fixed-shape loader, tensors copied."""
    out = []
    for t in loader:
        out.append((loader.last_batch, t.clone()))
    return out


# --- Every sample once, with the bytes the files hold -----------------------------------------

@pytest.mark.parametrize("drop_last", [True, False])
@pytest.mark.parametrize("world", [1, 2, 3])
def test_megatron_every_sample_once_across_ranks(megatron, world, drop_last):
    prefix, expected = megatron
    seen = []
    for rank in range(world):
        loader = sdata.Loader(prefix, seq_len=SEQ_LEN, batch_size=4, rank=rank, world=world, device="sim",
                              drop_last=drop_last, memory_budget="16M")
        for info, t in rows_of(loader):
            assert t.shape[1] == SEQ_LEN + 1 and t.dtype == torch.int16  # U16 as its bits (torch < 2.3)
            for k, row in zip(info.samples, t):
                assert np.array_equal(row.numpy().view(np.uint16), expected[k])
            seen += info.samples
    n = len(expected)
    assert sorted(seen) == sorted(set(seen))
    assert len(seen) == (n - n % (4 * world) if drop_last else n)


@pytest.mark.parametrize("world", [1, 2, 3])
def test_npy_every_sample_once_across_ranks(npy, world):
    paths, rows = npy
    seen = []
    for rank in range(world):
        loader = fixed_loader(paths, batch_size=5, rank=rank, world=world, device="cpu", drop_last=False)
        for info, t in rows_of(loader):
            assert t.dtype == torch.float32 and tuple(t.shape[1:]) == (3, 5)
            for k, row in zip(info.samples, t):
                assert np.array_equal(row.numpy(), rows[k])
            seen += info.samples
    assert sorted(seen) == list(range(len(rows)))


@pytest.mark.parametrize("world", [1, 2, 3])
def test_webdataset_every_sample_once_across_ranks(wds, world):
    shards, expected = wds
    seen = []
    for rank in range(world):
        loader = sdata.Loader(shards, batch_size=4, rank=rank, world=world, device="sim", drop_last=False)
        for batch in loader:
            info = loader.last_batch
            assert set(batch) <= {"txt", "cls", "jpg"}
            for i, sid in enumerate(info.ids):
                for field, (packed, offsets) in batch.items():
                    assert packed.dtype == torch.uint8 and offsets.dtype == torch.int64
                    assert len(offsets) == len(info.ids) + 1
                    got = packed[offsets[i]:offsets[i + 1]].numpy().tobytes()
                    assert got == expected[sid].get(field, b""), (sid, field)
            seen += info.ids
    assert sorted(seen) == sorted(expected)


# --- Order: one per (seed, epoch) ---------------------------------------------------------------

def test_one_seed_gives_equal_batches_and_two_epochs_differ(megatron):
    prefix, _ = megatron
    a = fixed_loader(prefix, seq_len=SEQ_LEN, batch_size=3, seed=7)
    b = fixed_loader(prefix, seq_len=SEQ_LEN, batch_size=3, seed=7)
    first_a, first_b = rows_of(a), rows_of(b)
    assert [i.samples for i, _ in first_a] == [i.samples for i, _ in first_b]
    assert all(torch.equal(x, y) for (_, x), (_, y) in zip(first_a, first_b))
    second = rows_of(a)  # iterating again starts the next epoch
    assert {i.epoch for i, _ in second} == {1}
    assert [i.samples for i, _ in second] != [i.samples for i, _ in first_a]
    assert sorted(s for i, _ in second for s in i.samples) == sorted(s for i, _ in first_a for s in i.samples)
    b.set_epoch(1)
    assert [i.samples for i, _ in rows_of(b)] == [i.samples for i, _ in second]
    other = fixed_loader(prefix, seq_len=SEQ_LEN, batch_size=3, seed=8)
    assert [i.samples for i, _ in rows_of(other)] != [i.samples for i, _ in first_a]


# --- Resume -----------------------------------------------------------------------------------

def steps_of(loaders, limit=None):
    """Global steps of `loaders` (one per rank) run side by side: [[ids of rank 0, rank 1, ...]]."""
    out = []
    its = [iter(l) for l in loaders]
    while limit is None or len(out) < limit:
        step = []
        for l, it in zip(loaders, its):
            if next(it, None) is None:
                return out
            step.append(l.last_batch.samples)
        out.append(step)
    return out


def test_resume_equals_the_uninterrupted_run(npy):
    paths, _ = npy
    make = lambda rank: fixed_loader(paths, batch_size=4, rank=rank, world=2, seed=3)
    whole = steps_of([make(0), make(1)])
    first = [make(0), make(1)]
    head = steps_of(first, limit=5)
    state = first[0].state_dict()
    assert state == first[1].state_dict()  # the same on every rank
    assert state["consumed"] == 5 * 4 * 2 and state["epoch"] == 0 and state["format"] == "sluice-loader-state"
    again = [make(0), make(1)]
    for l in again:
        l.load_state_dict(state)
    assert head + steps_of(again) == whole


def test_resume_with_another_world_size_sees_every_sample_once(megatron):
    prefix, expected = megatron
    make = lambda rank, world: fixed_loader(prefix, seq_len=SEQ_LEN, batch_size=2, rank=rank, world=world,
                                            seed=5, drop_last=False)
    first = [make(r, 2) for r in range(2)]
    head = steps_of(first, limit=3)
    state = first[0].state_dict()
    rest = []
    for r in range(3):
        l = make(r, 3)
        l.load_state_dict(state)
        rest += [s for info, _ in rows_of(l) for s in info.samples]
    seen = [s for step in head for ids in step for s in ids] + rest
    assert sorted(seen) == list(range(len(expected)))


def test_a_state_after_an_epoch_starts_the_next(npy):
    paths, _ = npy
    a = fixed_loader(paths, batch_size=10)
    rows_of(a)
    state = a.state_dict()
    assert (state["epoch"], state["consumed"]) == (1, 0)
    b = fixed_loader(paths, batch_size=10)
    b.load_state_dict(state)
    assert [i.samples for i, _ in rows_of(b)] == [i.samples for i, _ in rows_of(a)]


def test_a_state_of_other_data_is_refused(npy, megatron):
    paths, _ = npy
    state = fixed_loader(megatron[0], seq_len=SEQ_LEN, batch_size=2).state_dict()
    loader = fixed_loader(paths, batch_size=2)
    with pytest.raises(ValueError, match="other data"):
        loader.load_state_dict(state)
    with pytest.raises(ValueError):
        loader.load_state_dict({"format": "something else"})
    with pytest.raises(TypeError):
        loader.load_state_dict("{}")


# --- DLPack without a copy, memory lifetime -----------------------------------------------------

@pytest.mark.parametrize("device", ["sim", "cpu", "pinned"])
def test_tensors_are_the_batch_memory_without_a_copy(npy, wds, device):
    paths, _ = npy
    loader = fixed_loader(paths, batch_size=4, device=device)
    t = next(iter(loader))
    assert loader.device == device
    assert t.device.type == "cpu"  # sim and pinned memory are host memory: kDLCPU
    assert t.data_ptr() == loader.last_batch.data_ptr
    assert t.is_contiguous() and t.numel() * t.element_size() == loader.last_batch.nbytes
    shards, _ = wds
    wl = sdata.Loader(shards, batch_size=4, device=device, rank=0, world=1)
    batch = next(iter(wl))
    base = wl.last_batch.data_ptr
    ptrs = sorted(packed.data_ptr() for packed, _ in batch.values() if packed.numel() > 0)
    assert all(base <= p < base + wl.last_batch.nbytes for p in ptrs)


def test_memory_comes_back_when_the_tensors_go(npy):
    paths, _ = npy
    loader = fixed_loader(paths, batch_size=4, prefetch=2)
    it = iter(loader)
    held = [next(it), next(it)]
    views = [held[0][1:3], held[1].view(-1)]  # views of a batch keep it too
    each = loader.last_batch.nbytes
    assert loader.memory_in_use() >= 2 * each
    del held
    gc.collect()
    assert loader.memory_in_use() >= 2 * each  # the views hold both batches
    del views
    collections.deque(it, maxlen=0)  # the rest of the epoch, each batch dropped at once
    gc.collect()
    assert loader.memory_in_use() == 0
    assert 0 < loader.memory_high_water() <= loader.memory_reserved()


def test_a_consumer_holding_every_buffer_is_told_at_once(npy):
    paths, _ = npy
    loader = fixed_loader(paths, batch_size=4, prefetch=1)  # two batch buffers
    it = iter(loader)
    held = [next(it), next(it)]
    with pytest.raises(ValueError, match="holds 2 batches.*drop a batch"):
        next(it)
    step = loader.last_batch.step
    del held
    t = next(iter(loader))  # the same epoch goes on
    assert loader.last_batch.step == step + 1 and t.shape[0] == 4


def test_batches_outlive_their_loader(npy):
    paths, rows = npy
    loader = fixed_loader(paths, batch_size=4)
    t = next(iter(loader))
    ids = loader.last_batch.samples
    del loader
    gc.collect()
    assert np.array_equal(t.numpy(), rows[ids])


def test_stats_have_the_stall_figures(npy):
    paths, _ = npy
    loader = fixed_loader(paths, batch_size=4)
    n = sum(1 for _ in loader)
    s = loader.stats()
    assert s["steps"] == n == len(loader) and s["samples"] == 4 * n
    assert s["dropped"] == 103 % 4
    assert 0 <= s["stall_fraction"] <= 1 and s["wait_p99_seconds"] >= s["wait_p50_seconds"]
    assert s["path"] == "bounce" and s["reason"]


# --- Bad input --------------------------------------------------------------------------------

def test_bad_files_are_refused_naming_file_and_field(tmp_path, megatron):
    prefix, _ = megatron
    with open(f"{prefix}.bin", "r+b") as f:
        f.truncate(os.path.getsize(f"{prefix}.bin") - 10)
    with pytest.raises(sluice.Error, match="truncated") as e:
        fixed_loader(prefix, seq_len=SEQ_LEN, batch_size=2)
    assert e.value.domain == "data" and e.value.filename.endswith(".bin")
    bad = write_megatron(tmp_path / "bad_code", [[1, 2, 3]], code=99)
    with pytest.raises(sluice.Error, match="dtype") as e:
        fixed_loader(bad, seq_len=1, batch_size=1)
    assert e.value.filename.endswith(".idx")
    shard = write_shard(tmp_path / "x.tar", [("a", {"txt": b"hello"})])
    with open(shard, "r+b") as f:
        f.seek(148)  # the header's checksum field
        f.write(b"000001\x00 ")
    with pytest.raises(sluice.Error, match="chksum"):
        sdata.Loader(shard, batch_size=1, device="sim")
    np.save(tmp_path / "i.npy", np.zeros((4, 2), dtype=np.int32))
    np.save(tmp_path / "f.npy", np.zeros((4, 2), dtype=np.float32))
    with pytest.raises(sluice.Error, match="dtype"):
        fixed_loader([str(tmp_path / "i.npy"), str(tmp_path / "f.npy")], batch_size=1)
    with pytest.raises(FileNotFoundError):
        fixed_loader(str(tmp_path / "missing.npy"), batch_size=1)


def test_bad_arguments_are_refused(npy, megatron):
    paths, _ = npy
    with pytest.raises(ValueError, match="batch_size"):
        fixed_loader(paths, batch_size=0)
    with pytest.raises(ValueError, match="together"):
        sdata.Loader(paths, batch_size=1, rank=0, device="sim")
    with pytest.raises(ValueError, match="rank"):
        sdata.Loader(paths, batch_size=1, rank=2, world=2, device="sim")
    with pytest.raises(ValueError, match="format"):
        fixed_loader(paths, batch_size=1, format="parquet")
    with pytest.raises(ValueError, match="seq_len"):
        fixed_loader(paths, batch_size=1, seq_len=8)
    with pytest.raises(ValueError, match="seq_len"):
        fixed_loader(megatron[0], batch_size=1)
    with pytest.raises(ValueError, match="device"):
        fixed_loader(paths, batch_size=1, device="tpu")
    with pytest.raises(ValueError, match="memory_budget"):
        fixed_loader(paths, batch_size=1, memory_budget="lots")
    with pytest.raises(ValueError, match="memory budget"):
        fixed_loader(paths, batch_size=100, memory_budget=4096)
    with pytest.raises(ValueError, match="empty"):
        sdata.Loader([], batch_size=1)


def test_cuda_without_a_gpu_fails_clearly(npy):
    if torch.cuda.is_available():
        pytest.skip("a GPU is here")
    if os.environ.get("SLUICE_LIBCUDA"):  # bench/gpu-check.sh's dry run on the fake libcuda
        pytest.skip(f"SLUICE_LIBCUDA names a driver: {os.environ['SLUICE_LIBCUDA']}")
    paths, _ = npy
    with pytest.raises(sluice.Error, match="cuda"):
        sdata.Loader(paths, batch_size=1, rank=0, world=1)  # device="cuda" by default


# --- Rank and world from the launcher ------------------------------------------------------------

@pytest.mark.parametrize("env, expected", [
    ({}, (0, 1)),
    ({"RANK": "2", "WORLD_SIZE": "4"}, (2, 4)),
    ({"RANK": "2"}, (0, 1)),  # no world size: no position
    ({"SLURM_PROCID": "1", "SLURM_NTASKS": "3", "SLURM_STEP_ID": "0"}, (1, 3)),
    ({"SLURM_PROCID": "1", "SLURM_NTASKS": "3"}, (0, 1)),  # a batch script, not a step
    ({"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "8", "RANK": "0", "WORLD_SIZE": "2"}, (3, 8)),
    ({"PMI_RANK": "1", "PMI_SIZE": "2"}, (1, 2)),
])
def test_rank_and_world_from_the_launcher(env, expected):
    assert sdata.rank_and_world(env) == expected


def test_bad_launcher_variables_are_refused():
    with pytest.raises(ValueError, match="RANK"):
        sdata.rank_and_world({"RANK": "x", "WORLD_SIZE": "2"})
    with pytest.raises(ValueError, match="cannot be"):
        sdata.rank_and_world({"RANK": "4", "WORLD_SIZE": "2"})


def test_the_loader_takes_its_share_from_torchrun_variables(npy, monkeypatch):
    paths, _ = npy
    for var in ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "3")
    loader = sdata.Loader(paths, batch_size=2, device="sim")
    assert (loader.rank, loader.world) == (1, 3)
    explicit = sdata.Loader(paths, batch_size=2, device="sim", rank=1, world=3)
    assert [i.samples for i, _ in rows_of(loader)] == [i.samples for i, _ in rows_of(explicit)]


# --- Every public name documented and stubbed ----------------------------------------------------

def test_every_public_name_has_a_docstring_and_the_native_classes_a_stub():
    import ast
    import inspect

    from sluice import _sluice

    for name in sdata.__all__:
        obj = getattr(sdata, name)
        assert inspect.getdoc(obj), name
        if inspect.isclass(obj):
            for member, value in vars(obj).items():
                if not member.startswith("_") and (callable(value) or isinstance(value, property)):
                    assert inspect.getdoc(value), f"{name}.{member}"
    with open(os.path.join(os.path.dirname(_sluice.__file__), "_sluice.pyi")) as f:
        tree = ast.parse(f.read())
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    for cls in ("_Loader", "_Batch", "_View"):
        assert cls in classes, cls
        stubbed = {n.name for n in classes[cls].body if isinstance(n, ast.FunctionDef)}
        native = {m for m in dir(getattr(_sluice, cls)) if not m.startswith("_")} | {"__dlpack__"} & set(
            dir(getattr(_sluice, cls)))
        assert native - stubbed == set(), cls
    assert "data" in sluice.__all__
