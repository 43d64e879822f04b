"""Loading tensors from Python: sluice.load, sluice.Tensor and DLPack, the drop-ins for
safetensors (sluice.torch.load_file, sluice.numpy.load_file, sluice.safe_open), shares, devices,
memory lifetime and errors. Every load is compared with a reference reader written here (json +
struct for safetensors, numpy.load for .npy), never with sluice's own view of the bytes."""

import builtins
import gc
import json
import os
import struct

import pytest
from conftest import need

import sluice

np = need("numpy")


# --- A writer and a reference reader of safetensors, from the format's description ------------

def write_safetensors(path, tensors, metadata=None):
    """tensors: {name: (dtype name, shape, bytes)}, written in this order."""
    header, blobs, offset = {}, [], 0
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    if metadata is not None:
        header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    return str(path)


def read_safetensors(path):
    """{name: (dtype name, shape, bytes)} and the metadata, as the format says to read them."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    metadata = header.pop("__metadata__", None)
    data = blob[8 + n:]
    out = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        out[name] = (entry["dtype"], tuple(entry["shape"]), data[begin:end])
    return out, metadata


NUMPY_TYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "|i1",
               "U64": "<u8", "U32": "<u4", "U16": "<u2", "U8": "|u1", "BOOL": "|b1", "C64": "<c8"}


def reference_numpy(dtype, shape, data):
    return np.frombuffer(data, dtype=np.dtype(NUMPY_TYPES[dtype])).reshape(shape)


def reference_torch(dtype, shape, data):
    """A torch.Tensor of the bytes, built without DLPack and without views between sizes."""
    torch = need("torch")
    if dtype == "BF16":  # bf16 is the top half of an f32: widen exactly, then narrow exactly
        bits = np.frombuffer(data, dtype="<u2").astype("<u4") << 16
        return torch.from_numpy(bits.view("<f4").reshape(shape).copy()).to(torch.bfloat16)
    return torch.from_numpy(reference_numpy(dtype, shape, data).copy())


def sample(dtype, shape, rng):
    """Random bytes of a tensor: finite values for the float types, 0/1 for BOOL."""
    count = int(np.prod(shape, dtype=np.int64))
    if dtype == "BOOL":
        return rng.integers(0, 2, count, dtype=np.uint8).tobytes()
    if dtype == "BF16":
        f32 = rng.standard_normal(count).astype("<f4") * 1000
        return (f32.view("<u4") >> 16).astype("<u2").tobytes()
    numpy_type = np.dtype(NUMPY_TYPES[dtype])
    if numpy_type.kind in "fc":
        values = rng.standard_normal(count) * 1000
        if numpy_type.kind == "c":
            values = values + 1j * rng.standard_normal(count)
        return values.astype(numpy_type).tobytes()
    info = np.iinfo(numpy_type)
    return rng.integers(info.min, info.max, count, dtype=numpy_type, endpoint=True).tobytes()


SHAPES = [(), (0,), (7,), (3, 5), (2, 0, 4), (2, 3, 4)]


def model_file(path, dtypes, seed=1, metadata=None):
    rng = np.random.default_rng(seed)
    tensors = {}
    for dtype in dtypes:
        for i, shape in enumerate(SHAPES):
            tensors[f"{dtype.lower()}.{i}"] = (dtype, shape, sample(dtype, shape, rng))
    return write_safetensors(path, tensors, metadata)


TORCH_DTYPES = ["F64", "F32", "F16", "BF16", "I64", "I32", "I16", "I8", "U8", "BOOL", "C64"]


def assert_torch_equal(got, path):
    torch = need("torch")
    want, _ = read_safetensors(path)
    assert sorted(got) == sorted(want)
    for name, (dtype, shape, data) in want.items():
        ref = reference_torch(dtype, shape, data)
        assert got[name].dtype == ref.dtype, name
        assert tuple(got[name].shape) == shape, name
        assert torch.equal(got[name].cpu(), ref), name


# --- The drop-ins -------------------------------------------------------------------------------

def test_torch_load_file_equals_the_reference_for_every_torch_type(tmp_path):
    torch = need("torch")
    import sluice.torch

    path = model_file(tmp_path / "m.safetensors", TORCH_DTYPES)
    got = sluice.torch.load_file(path)
    assert_torch_equal(got, path)
    assert all(t.device == torch.device("cpu") for t in got.values())
    assert_torch_equal(sluice.torch.load_file(tmp_path / "m.safetensors", device=torch.device("cpu")), path)


def test_torch_types_this_torch_lacks_raise_a_type_error_naming_them(tmp_path):
    torch = need("torch")
    import sluice.torch

    f8 = write_safetensors(tmp_path / "f8.safetensors", {"w": ("F8_E4M3", (4,), bytes([0x38, 0x40, 0xb8, 0]))})
    if hasattr(torch, "float8_e4m3fn"):
        want = torch.tensor([1.0, 2.0, -1.0, 0.0], dtype=torch.float8_e4m3fn)
        assert torch.equal(sluice.torch.load_file(f8)["w"].float(), want.float())
    else:
        with pytest.raises(TypeError, match=r"'w'.*PyTorch .* no type for F8_E4M3"):
            sluice.torch.load_file(f8)
    u16 = write_safetensors(tmp_path / "u16.safetensors", {"u": ("U16", (2,), struct.pack("<HH", 1, 65535))})
    if hasattr(torch, "uint16"):
        assert sluice.torch.load_file(u16)["u"].tolist() == [1, 65535]
    else:
        with pytest.raises(TypeError, match="no type for U16"):
            sluice.torch.load_file(u16)


def test_numpy_load_file_equals_the_reference_and_is_writable(tmp_path):
    import sluice.numpy

    path = model_file(tmp_path / "m.safetensors", list(NUMPY_TYPES))
    got = sluice.numpy.load_file(path)
    want, _ = read_safetensors(path)
    assert sorted(got) == sorted(want)
    for name, (dtype, shape, data) in want.items():
        ref = reference_numpy(dtype, shape, data)
        assert got[name].dtype == ref.dtype and got[name].shape == shape, name
        assert np.array_equal(got[name], ref), name
        assert got[name].flags.writeable, name  # as safetensors' arrays are


def test_numpy_has_no_bfloat16_and_says_so(tmp_path):
    import sluice.numpy

    path = write_safetensors(tmp_path / "b.safetensors", {"b": ("BF16", (1,), b"\x80\x3f")})
    with pytest.raises(TypeError, match="'b'.*NumPy has no type for BF16"):
        sluice.numpy.load_file(path)


def test_safe_open_keys_metadata_and_tensors(tmp_path):
    torch = need("torch")
    path = model_file(tmp_path / "m.safetensors", ["F32", "BF16", "BOOL"], metadata={"format": "pt", "k": "v"})
    want, metadata = read_safetensors(path)
    with sluice.safe_open(path, framework="pt") as f:
        assert f.keys() == sorted(want)
        assert f.metadata() == metadata
        got = {name: f.get_tensor(name) for name in f.keys()}
        with pytest.raises(ValueError, match="nope"):
            f.get_tensor("nope")
    assert_torch_equal(got, path)
    with pytest.raises(ValueError, match="closed"):
        f.keys()
    with sluice.safe_open(path, framework="np") as f:
        ref = reference_numpy(*want["f32.3"])
        assert np.array_equal(f.get_tensor("f32.3"), ref)
    bare = write_safetensors(tmp_path / "bare.safetensors", {"x": ("F32", (1,), b"\0\0\x80\x3f")})
    with sluice.safe_open(bare, "pt", device="cpu") as f:
        assert f.metadata() is None
        assert f.get_tensor("x").tolist() == [1.0]
        assert isinstance(f.get_tensor("x"), torch.Tensor)
    with pytest.raises(ValueError, match="framework"):
        sluice.safe_open(path, framework="tf")


# Basic indexes a tensor of shape (6, 5, 4) takes, and the bytes from the first element each
# selects to the last (F32: 4 bytes each), which is what get_slice reads.
SLICE_INDEXES = [
    (0, 80), (-1, 80), (slice(1, 4), 240), ((slice(None), slice(1, 3)), 432), ((Ellipsis, 2), 468),
    ((None, slice(2, 5), Ellipsis, None), 240), ((slice(None, None, 2), -2), 336), ((slice(10, 20),), 0),
    ((), 480), (Ellipsis, 480), ((1, 2, 3), 4), ((np.int64(2), slice(-3, None)), 48), ((slice(2, 2),), 0),
]


def test_safe_open_get_slice_equals_indexing_the_whole_tensor(tmp_path):
    torch = need("torch")
    rng = np.random.default_rng(5)
    tensors = {f"{d.lower()}": (d, (6, 5, 4), sample(d, (6, 5, 4), rng)) for d in ["F32", "BF16", "I8", "BOOL", "F16"]}
    tensors["scalar"] = ("F64", (), sample("F64", (), rng))
    tensors["empty"] = ("I32", (3, 0), b"")
    path = write_safetensors(tmp_path / "s.safetensors", tensors)
    with sluice.safe_open(path, framework="pt") as f:
        s = f.get_slice("f32")
        assert (s.get_shape(), s.get_dtype()) == ([6, 5, 4], "F32")
        assert isinstance(s, sluice.SafeSlice) and "f32" in repr(s)
        for name, (dtype, shape, data) in tensors.items():
            whole = reference_torch(dtype, shape, data)
            indexes = [(i, None) for i, _ in SLICE_INDEXES] if shape == (6, 5, 4) else [((), None), (Ellipsis, None)]
            for index, _ in indexes:
                got = f.get_slice(name)[index]
                want = whole[index]
                assert got.dtype == want.dtype and got.shape == want.shape, (name, index)
                assert torch.equal(got, want), (name, index)
                assert got.is_contiguous(), (name, index)
        for index, span in SLICE_INDEXES:
            f.get_slice("f32")[index]
            assert sluice.last_load_report().bytes == span, index
    # Made before the file was closed, it still reads (as safetensors' does).
    assert torch.equal(s[3], reference_torch(*tensors["f32"])[3])
    with sluice.safe_open(path, framework="np") as f:
        whole = reference_numpy(*tensors["i8"])
        for index in [(slice(5, 1, -2),), (slice(None), slice(None, None, -1), 1), (1, 2, 3), (Ellipsis, None),
                      *(i for i, _ in SLICE_INDEXES)]:
            got = f.get_slice("i8")[index]
            assert isinstance(got, np.ndarray) and got.shape == whole[index].shape, index
            assert np.array_equal(got, whole[index]), index
    with sluice.safe_open(path, framework="pt", device="sim") as f:
        assert torch.equal(f.get_slice("bf16")[2:4, 1], reference_torch(*tensors["bf16"])[2:4, 1])
        assert sluice.last_load_report().path == "bounce"


def test_get_slice_of_column_major_npy_and_the_errors(tmp_path):
    torch = need("torch")
    a = np.asfortranarray(np.arange(60, dtype=np.float32).reshape(3, 4, 5))
    np.save(tmp_path / "f.npy", a)
    with sluice.safe_open(tmp_path / "f.npy", framework="np") as f:
        for index in [1, (slice(None), 2), (Ellipsis, slice(1, 3)), (2, 3, 4)]:
            assert np.array_equal(f.get_slice("f")[index], a[index]), index
    path = write_safetensors(tmp_path / "e.safetensors", {"x": ("F32", (6, 5, 4), bytes(480)),
                                                         "nib": ("F4", (4,), b"\x12\x34")})
    with sluice.safe_open(path, framework="pt") as f:
        s = f.get_slice("x")
        for index, error, says in [((0, 0, 0, 0), IndexError, "too many indices"),
                                   (6, IndexError, "out of bounds for dimension 0 with size 6"),
                                   ((0, -6), IndexError, "out of bounds for dimension 1 with size 5"),
                                   ([1, 2], TypeError, "advanced indexing"),
                                   (torch.tensor([1, 2]), TypeError, "advanced indexing"),
                                   (True, TypeError, "boolean"),
                                   ((Ellipsis, Ellipsis), IndexError, "single ellipsis"),
                                   (slice(None, None, -1), ValueError, "step must be greater than zero"),
                                   (slice(None, None, 0), ValueError, "cannot be zero")]:
            with pytest.raises(error, match=says):
                s[index]
        with pytest.raises(TypeError, match="'nib' has 4 bits per element"):
            f.get_slice("nib")[0:2]
        with pytest.raises(ValueError, match="no tensor named 'nope'"):
            f.get_slice("nope")
    with pytest.raises(ValueError, match="closed"):
        f.get_slice("x")


# --- sluice.load and sluice.Tensor --------------------------------------------------------------

def test_tensors_describe_themselves_and_export_through_dlpack(tmp_path):
    path = model_file(tmp_path / "m.safetensors", ["F32", "I16", "U8"])
    want, _ = read_safetensors(path)
    got = sluice.load(path, host_load="read")  # mapped loads: test_cpu_loads_of_a_cached_file_...
    assert list(got) == list(want)  # file order
    for name, (dtype, shape, data) in want.items():
        t = got[name]
        assert isinstance(t, sluice.Tensor)
        assert (t.name, t.dtype, t.shape, t.nbytes, t.device) == (name, dtype, shape, len(data), "cpu")
        assert t.__dlpack_device__() == (1, 0)
        assert np.array_equal(np.from_dlpack(t), reference_numpy(dtype, shape, data)), name
        assert bytes(np.from_dlpack(t.view_bytes())) == data, name
    report = sluice.last_load_report()
    assert report.bytes == sum(len(d) for _, _, d in want.values())
    assert report.path == "host" and report.reason and report.seconds >= 0


def test_npy_files_c_and_fortran_order_equal_numpy_load(tmp_path):
    torch = need("torch")
    import sluice.numpy
    import sluice.torch

    rng = np.random.default_rng(7)
    arrays = {
        "f32": rng.standard_normal((4, 5)).astype(np.float32),
        "i64": rng.integers(-9, 9, (3, 2, 2)),
        "u16": rng.integers(0, 65535, (6,), dtype=np.uint16),
        "flag": rng.integers(0, 2, (5, 3)).astype(bool),
        "c128": (rng.standard_normal((2, 3)) + 1j).astype(np.complex128),
        "half": rng.standard_normal((3, 3)).astype(np.float16),
        "scalar": np.array(3.5),
        "empty": np.zeros((0, 4), dtype=np.int8),
        "big": np.arange(6, dtype=">i4").reshape(2, 3),  # big-endian: a type sluice leaves to NumPy
        "text": np.array([b"ab", b"cde"], dtype="S3"),
    }
    folder = tmp_path / "npy"
    folder.mkdir()
    for name, a in arrays.items():
        np.save(folder / f"{name}.npy", a)
        np.save(folder / f"{name}_f.npy", np.asfortranarray(a))
    got = sluice.numpy.load(folder)
    assert sorted(got) == sorted([*arrays, *(f"{n}_f" for n in arrays)])
    for name in got:
        ref = np.load(folder / f"{name}.npy")
        assert got[name].dtype == ref.dtype and got[name].shape == ref.shape, name
        assert np.array_equal(got[name], ref), name
    as_torch = sluice.torch.load(folder, tensors=["f32_f", "flag_f", "i64_f", "half", "c128_f"])
    for name, t in as_torch.items():
        assert torch.equal(t, torch.from_numpy(np.ascontiguousarray(np.load(folder / f"{name}.npy")))), name
    raw = sluice.load(folder / "text.npy")["text"]
    assert raw.dtype == "|S3"
    with pytest.raises(TypeError, match="'text'.*DLPack cannot describe"):
        raw.__dlpack__()


def sharded(tmp_path):
    """Two shards, their index, and the reference of all their tensors."""
    folder = tmp_path / "sharded"
    folder.mkdir()
    shards = [model_file(folder / f"model-0000{i}-of-00002.safetensors", ["F32", "I32"], seed=i) for i in (1, 2)]
    want = {}
    weight_map = {}
    for i, shard in enumerate(shards):
        tensors, _ = read_safetensors(shard)
        renamed = {f"s{i}.{k}": v for k, v in tensors.items()}  # names unique across shards
        write_safetensors(shard, renamed)
        want.update(renamed)
        weight_map.update({k: os.path.basename(shard) for k in renamed})
    index = folder / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return folder, str(index), want


def test_sharded_index_folder_subset_and_shares(tmp_path):
    folder, index, want = sharded(tmp_path)
    for source in (index, folder, [str(p) for p in sorted(folder.glob("*.safetensors"))]):
        got = sluice.load(source)
        assert sorted(got) == sorted(want)
        for name, (dtype, shape, data) in want.items():
            assert np.array_equal(np.from_dlpack(got[name]), reference_numpy(dtype, shape, data)), name
    subset = ["s1.i32.2", "s0.f32.5"]
    assert sorted(sluice.load(index, tensors=subset)) == sorted(subset)
    assert list(sluice.load(index, tensors="s0.f32.1")) == ["s0.f32.1"]
    assert sluice.load(index, tensors=[]) == {}
    for world in (1, 2, 3, 5):
        shares = [set(sluice.load(index, rank=r, world=world)) for r in range(world)]
        assert sum(len(s) for s in shares) == len(want), world  # each tensor once...
        assert set().union(*shares) == set(want), world        # ...and every one
    mine = sluice.load(index, tensors=subset, rank=1, world=2)
    assert len(mine) == 1 and set(mine) <= set(subset)


def test_sim_and_pinned_memory_load_the_same_bytes(tmp_path):
    torch = need("torch")
    import sluice.torch

    path = model_file(tmp_path / "m.safetensors", ["F32", "BF16", "I8"])
    for device in ("sim", "pinned"):
        got = sluice.load(path, device=device)
        assert {t.device for t in got.values()} == {device}
        assert {t.__dlpack_device__() for t in got.values()} == {(1, 0)}
        assert_torch_equal({k: sluice.torch.to_torch(v) for k, v in got.items()}, path)
    assert_torch_equal(sluice.torch.load_file(path, device="sim"), path)
    assert isinstance(torch.from_dlpack(got["f32.2"]), torch.Tensor)


@pytest.mark.parametrize("device", ["cuda", "cuda:0"])
def test_cuda_loads_are_torch_cuda_tensors(tmp_path, device):
    torch = need("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    import sluice.torch

    path = model_file(tmp_path / "m.safetensors", TORCH_DTYPES)
    got = sluice.torch.load_file(path, device=device)
    assert {t.device for t in got.values()} == {torch.device("cuda:0")}
    assert_torch_equal(got, path)
    assert sluice.load(path, device=device)["f32.2"].__dlpack_device__() == (2, 0)
    want, _ = read_safetensors(path)
    with sluice.safe_open(path, framework="pt", device=device) as f:
        for name, index in [("f32.5", (slice(1, None), Ellipsis, slice(None, None, 2))), ("bf16.3", (slice(1, 3),))]:
            part = f.get_slice(name)[index]
            assert part.device == torch.device("cuda:0"), name
            assert torch.equal(part.cpu(), reference_torch(*want[name])[index]), name


# --- Memory lifetime ----------------------------------------------------------------------------

def test_memory_lives_while_any_framework_tensor_does(tmp_path):
    torch = need("torch")
    path = model_file(tmp_path / "m.safetensors", ["F32", "I64"])
    want, _ = read_safetensors(path)
    gc.collect()
    before = sluice.loaded_bytes_in_use()
    for device in ("cpu", "sim"):
        loaded = sluice.load(path, device=device)
        held = sluice.loaded_bytes_in_use() - before
        assert held >= sum(len(d) for _, _, d in want.values())
        kept = torch.from_dlpack(loaded["f32.5"])
        array = np.from_dlpack(loaded["i64.3"])
        unused = loaded["f32.2"].__dlpack__()  # a capsule nobody consumes frees its reference
        del loaded, unused
        gc.collect()
        assert sluice.loaded_bytes_in_use() - before == held
        assert torch.equal(kept, reference_torch(*want["f32.5"]))
        del kept
        gc.collect()
        assert sluice.loaded_bytes_in_use() - before == held, "the NumPy array still holds it"
        assert np.array_equal(array, reference_numpy(*want["i64.3"]))
        del array
        gc.collect()
        assert sluice.loaded_bytes_in_use() == before, device


def test_drop_in_results_keep_their_memory_alive(tmp_path):
    need("torch")
    import sluice.numpy
    import sluice.torch

    path = model_file(tmp_path / "m.safetensors", ["F32", "BOOL"])
    want, _ = read_safetensors(path)
    gc.collect()
    before = sluice.loaded_bytes_in_use()
    t = sluice.torch.load_file(path)["bool.5"]  # through the bytes route
    a = sluice.numpy.load_file(path)["f32.3"]
    gc.collect()
    assert sluice.loaded_bytes_in_use() > before
    assert np.array_equal(t.numpy(), reference_numpy(*want["bool.5"]))
    assert np.array_equal(a, reference_numpy(*want["f32.3"]))
    del t, a
    gc.collect()
    assert sluice.loaded_bytes_in_use() == before


# --- Mapped loads (docs/paths.md, "Loads into host memory") ------------------------------------

def _cache(path):
    """Reads the file through the page cache (it was just written, so it should be there)."""
    with open(path, "rb") as f:
        while f.read(1 << 20):
            pass


def test_cpu_loads_of_a_cached_file_view_a_private_mapping(tmp_path):
    torch = need("torch")
    import sluice.numpy
    import sluice.torch

    # U8 first: every tensor after it lies misaligned for its type, and is copied.
    path = model_file(tmp_path / "m.safetensors", ["U8"] + [d for d in TORCH_DTYPES if d != "U8"])
    np_path = model_file(tmp_path / "np.safetensors", ["U8"] + [d for d in NUMPY_TYPES if d != "U8"])
    loads = {
        "torch": (path, lambda: sluice.torch.load_file(path, device="cpu")),
        "numpy": (np_path, lambda: sluice.numpy.load_file(np_path)),
        "safe_open": (path, lambda: {k: sluice.safe_open(path, "pt").get_tensor(k) for k in ["f32.5", "u8.5"]}),
    }
    for how, (path, fn) in loads.items():
        with open(path, "rb") as f:
            file_bytes = f.read()
        _cache(path)
        got = fn()
        report = sluice.last_load_report()
        assert report.path == "mapped", (how, report.reason)
        assert "private (copy-on-write) mapping" in report.reason, how
        assert report.ios == 0, how
        if how == "torch":
            assert_torch_equal(got, path)
        want, _ = read_safetensors(path)

        def raw(t):  # the tensor's bytes, as a writable uint8 view of its memory
            return t.reshape(-1).view(np.uint8) if how == "numpy" else t.reshape(-1).view(torch.uint8).numpy()

        for name, t in got.items():
            assert raw(t).tobytes() == want[name][2], (how, name)
        for t in got.values():  # writable, copy-on-write: the file keeps its bytes
            raw(t)[:] = 0x5A
        with open(path, "rb") as f:
            assert f.read() == file_bytes, f"{how}: a write to a mapped tensor reached the file"
        again = sluice.load(path, tensors=list(got))  # a new load sees the file
        assert all(bytes(np.from_dlpack(again[n].view_bytes())) == want[n][2] for n in got), how


def test_mapped_tensors_outlive_their_handle_and_unmap_with_the_last(tmp_path):
    torch = need("torch")
    path = model_file(tmp_path / "m.safetensors", ["F32", "I64"])
    want, _ = read_safetensors(path)
    gc.collect()
    before = sluice.loaded_bytes_in_use()
    with sluice.safe_open(path, "pt") as f:
        t = f.get_tensor("f32.5")
    assert sluice.last_load_report().path in ("mapped", "host")
    kept = sluice.torch.load(path, host_load="mapped")["i64.5"]
    assert sluice.last_load_report().path == "mapped"
    os.unlink(path)  # the mapping holds the file's pages
    gc.collect()
    assert sluice.loaded_bytes_in_use() > before
    assert torch.equal(t, reference_torch(*want["f32.5"]))
    assert torch.equal(kept, reference_torch(*want["i64.5"]))
    del t, kept
    gc.collect()
    assert sluice.loaded_bytes_in_use() == before, "unmapped with the last tensor"


def test_read_asked_cold_files_and_other_devices_are_not_mapped(tmp_path):
    path = model_file(tmp_path / "m.safetensors", ["F32", "I16"])
    want, _ = read_safetensors(path)
    got = sluice.load(path, host_load="read")
    assert sluice.last_load_report().path == "host"
    assert bytes(np.from_dlpack(got["f32.5"].view_bytes())) == want["f32.5"][2]
    sluice.load(path, "sim")
    assert sluice.last_load_report().path != "mapped"
    sluice.load(path, "pinned")
    assert sluice.last_load_report().path == "host"
    with pytest.raises(ValueError, match="host_load"):
        sluice.load(path, host_load="copy")
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fdatasync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    got = sluice.load(path)
    report = sluice.last_load_report()
    if report.path == "mapped":
        pytest.skip("the page cache kept the file's pages (tmpfs?)")
    assert report.path == "host" and "not mapped: the page cache holds" in report.reason, report.reason
    assert bytes(np.from_dlpack(got["i16.5"].view_bytes())) == want["i16.5"][2]


# --- Errors -------------------------------------------------------------------------------------

def test_errors_have_the_documented_types(tmp_path):
    path = model_file(tmp_path / "m.safetensors", ["F32"])
    with pytest.raises(sluice.FileNotFoundError) as missing:
        sluice.load(tmp_path / "missing.safetensors")
    assert isinstance(missing.value, builtins.FileNotFoundError) and isinstance(missing.value, sluice.Error)
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(struct.pack("<Q", 8) + b"{oops}  ")
    with pytest.raises(sluice.Error) as malformed:
        sluice.load(bad)
    assert malformed.value.domain == "data" and str(bad) in str(malformed.value)
    with pytest.raises(ValueError, match="nope"):
        sluice.load(path, tensors=["nope"])
    with pytest.raises(ValueError, match="device"):
        sluice.load(path, device="gpu")
    with pytest.raises(ValueError):
        sluice.load(path, device="cuda:x")
    with pytest.raises(TypeError, match="device"):
        sluice.load(path, device=1.5)
    with pytest.raises(ValueError, match="rank and world"):
        sluice.load(path, rank=0)
    with pytest.raises(ValueError, match="rank"):
        sluice.load(path, rank=2, world=2)
    with pytest.raises(ValueError, match="world"):
        sluice.load(path, rank=0, world=0)
    with pytest.raises(ValueError, match="empty"):
        sluice.load([])


def test_every_public_name_is_exported_and_has_a_stub():
    import ast

    from sluice import _sluice

    stub_path = os.path.join(os.path.dirname(_sluice.__file__), "_sluice.pyi")
    with open(stub_path) as f:
        tree = ast.parse(f.read())
    stubbed = {node.name for node in tree.body if isinstance(node, (ast.ClassDef, ast.FunctionDef))}
    stubbed |= {t.id for node in tree.body if isinstance(node, ast.AnnAssign) for t in [node.target]}
    public = {name for name in dir(_sluice) if not name.startswith("_")} - {"Error"}
    assert public - stubbed == set()
    assert {"load", "Tensor", "last_load_report", "loaded_bytes_in_use", "safe_open", "SafeSlice"} <= set(sluice.__all__)
    assert all(hasattr(sluice, name) for name in sluice.__all__)
