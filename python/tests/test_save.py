"""Saving from Python: sluice.torch.save_file, sluice.numpy.save_file and
sluice.torch.save_checkpoint. Every file is compared byte for byte with a reference writer written
here from the format's description (json + struct: no safetensors package on Debian), loaded back
bitwise, and checked for atomicity under injected ENOSPC and across torch.distributed ranks."""

import json
import os
import struct
import subprocess
import sys

import pytest
from conftest import need

import sluice
import sluice.numpy

np = need("numpy")

# The specification's dtypes in its order (huggingface/safetensors, tensor.rs, enum Dtype), which
# is by alignment: the writer sorts by descending position, then by name.
SPEC_ORDER = ["BOOL", "F4", "F6_E2M3", "F6_E3M2", "U8", "I8", "F8_E5M2", "F8_E4M3", "F8_E8M0", "F8_E4M3FNUZ",
              "F8_E5M2FNUZ", "I16", "U16", "F16", "BF16", "I32", "U32", "F32", "C64", "F64", "I64", "U64"]
NUMPY_TYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "|i1",
               "U64": "<u8", "U32": "<u4", "U16": "<u2", "U8": "|u1", "BOOL": "|b1", "C64": "<c8"}
SHAPES = [(), (0,), (3, 0, 2), (5,), (2, 3, 4)]


def reference_file(tensors, metadata=None):
    """The bytes of a safetensors file as the reference writer lays it out. tensors: {name:
    (dtype name, shape, bytes)}. Compact JSON (serde_json's form), __metadata__ first (its keys
    in order: the reference keeps a HashMap, so only sluice's order is fixed), tensors sorted
    by descending dtype then name, back to back; the header padded with spaces to 8 bytes."""
    order = sorted(tensors, key=lambda n: (-SPEC_ORDER.index(tensors[n][0]), n.encode()))
    parts, offset, blobs = [], 0, []
    if metadata is not None:
        parts.append('"__metadata__":' + json.dumps(dict(sorted(metadata.items())), separators=(",", ":"),
                                                    ensure_ascii=False))
    for name in order:
        dtype, shape, data = tensors[name]
        entry = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(data)]}
        parts.append(json.dumps(name, ensure_ascii=False) + ":" + json.dumps(entry, separators=(",", ":")))
        offset += len(data)
        blobs.append(data)
    header = ("{" + ",".join(parts) + "}").encode()
    header += b" " * (-len(header) % 8)
    return struct.pack("<Q", len(header)) + header + b"".join(blobs)


def random_array(dtype, shape, seed):
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    return np.frombuffer(rng.bytes(n), dtype=dtype).reshape(shape).copy()


def numpy_tensors():
    out = {}
    for k, (st, descr) in enumerate(NUMPY_TYPES.items()):
        for j, shape in enumerate(SHAPES):
            out[f"{st.lower()}.{j}"] = (st, random_array(descr, shape, 100 * k + j))
    out["naïve ü"] = ("F32", random_array("<f4", (2,), 7))  # a name beyond ASCII
    return out


def temporaries(folder):
    return [n for n in os.listdir(folder) if ".sluice-tmp-" in n]


def test_numpy_save_file_matches_the_reference_writer_and_loads_back(tmp_path):
    tensors = numpy_tensors()
    path = tmp_path / "np.safetensors"
    metadata = {"format": "np", "b": "ü \"quoted\"\n", "a": ""}
    sluice.numpy.save_file({n: a for n, (_, a) in tensors.items()}, path, metadata=metadata)
    want = reference_file({n: (st, a.shape, a.tobytes()) for n, (st, a) in tensors.items()}, metadata)
    assert path.read_bytes() == want
    loaded = sluice.numpy.load_file(str(path))
    for name, (_, a) in tensors.items():
        assert loaded[name].dtype == a.dtype and loaded[name].shape == a.shape
        assert loaded[name].tobytes() == a.tobytes()
    assert temporaries(tmp_path) == []
    report = sluice.last_save_report()
    assert report.bytes == len(want) and report.path == "host" and report.reason


def test_numpy_save_file_converts_non_contiguous_and_big_endian(tmp_path):
    a = np.arange(24, dtype=">i4").reshape(4, 6)[:, ::2]
    path = tmp_path / "conv.safetensors"
    sluice.numpy.save_file({"a": a}, path)
    b = sluice.numpy.load_file(str(path))["a"]
    assert b.dtype == np.dtype("<i4") and (b == a).all()
    assert path.read_bytes() == reference_file({"a": ("I32", a.shape, a.astype("<i4").tobytes())})


def test_metadata_none_and_empty_are_written_as_safetensors_writes_them(tmp_path):
    x = {"x": np.zeros(2, dtype="<f4")}
    for meta in (None, {}):
        path = tmp_path / f"m{meta is None}.safetensors"
        sluice.numpy.save_file(x, path, metadata=meta)
        assert path.read_bytes() == reference_file({"x": ("F32", (2,), bytes(8))}, meta)
    assert b'"__metadata__":{}' in (tmp_path / "mFalse.safetensors").read_bytes()
    with pytest.raises(TypeError):
        sluice.numpy.save_file(x, tmp_path / "bad.safetensors", metadata={"a": 1})


def torch_tensors(torch):
    from sluice.torch import _SAFETENSORS

    out = {}
    for k, (dtype, st) in enumerate(sorted(_SAFETENSORS.items(), key=lambda kv: kv[1])):
        for j, shape in enumerate(SHAPES):
            n = int(np.prod(shape, dtype=np.int64)) * torch.empty((), dtype=dtype).element_size()
            raw = np.random.default_rng(1000 * k + j).bytes(n)
            t = torch.frombuffer(bytearray(raw), dtype=torch.uint8) if n else torch.empty(0, dtype=torch.uint8)
            t = t.view(dtype).reshape(shape) if dtype != torch.bool else (t % 2).view(torch.bool).reshape(shape)
            out[f"{st}.{j}"] = (st, t)
    return out


def torch_bytes(torch, t):
    return t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def test_torch_save_file_every_dtype_round_trips_bitwise_and_matches_the_reference(tmp_path):
    torch = need("torch")
    import sluice.torch  # noqa: F401
    tensors = torch_tensors(torch)
    path = tmp_path / "pt.safetensors"
    sluice.torch.save_file({n: t for n, (_, t) in tensors.items()}, path, metadata={"format": "pt"})
    want = reference_file({n: (st, tuple(t.shape), torch_bytes(torch, t)) for n, (st, t) in tensors.items()},
                          {"format": "pt"})
    assert path.read_bytes() == want
    loaded = sluice.torch.load_file(str(path))
    assert set(loaded) == set(tensors)
    for name, (_, t) in tensors.items():
        assert loaded[name].dtype == t.dtype and loaded[name].shape == t.shape, name
        assert torch_bytes(torch, loaded[name]) == torch_bytes(torch, t), name


def test_torch_save_file_refuses_what_safetensors_refuses(tmp_path):
    torch = need("torch")
    import sluice.torch  # noqa: F401
    with pytest.raises(ValueError, match="non contiguous"):
        sluice.torch.save_file({"t": torch.zeros(4, 4).t()}, tmp_path / "x.safetensors")
    with pytest.raises(TypeError):
        sluice.torch.save_file({"t": [1, 2]}, tmp_path / "x.safetensors")
    with pytest.raises(FileNotFoundError):
        sluice.torch.save_file({"t": torch.zeros(1)}, tmp_path / "no" / "such" / "x.safetensors")
    with pytest.raises(TypeError, match="tensor names must be str, not int: 1"):
        sluice.torch.save_file({1: torch.zeros(1)}, tmp_path / "x.safetensors")
    with pytest.raises(TypeError, match="tensor names must be str, not int: 2"):
        sluice.numpy.save_file({2: np.zeros(1)}, tmp_path / "x.safetensors")
    # Tensors that overlap in memory (tied weights) are refused, naming each group once.
    w = torch.arange(12.0).reshape(3, 4)
    with pytest.raises(RuntimeError, match=r"share memory.*\[\['embed', 'head'\]\]"):
        sluice.torch.save_file({"embed": w, "head": w, "bias": torch.zeros(3)}, tmp_path / "x.safetensors")
    with pytest.raises(RuntimeError, match=r"\[\['a', 'b', 'd'\]\]"):
        sluice.torch.save_file({"a": w[:2], "b": w[1:], "c": w[1:2].clone(), "d": w[0]}, tmp_path / "x.safetensors")
    assert not (tmp_path / "x.safetensors").exists()
    # Views of one storage that do not overlap are saved, each its own bytes, as safetensors does.
    sluice.torch.save_file({"top": w[:1], "rest": w[1:], "none": w[:0], "none2": w[:0]}, tmp_path / "v.safetensors")
    back = sluice.torch.load_file(tmp_path / "v.safetensors")
    assert torch.equal(back["top"], w[:1]) and torch.equal(back["rest"], w[1:]) and back["none"].numel() == 0


def test_torch_save_file_from_the_sim_device_takes_the_bounce_path(tmp_path):
    torch = need("torch")
    import sluice.torch  # noqa: F401
    src = tmp_path / "src.safetensors"
    ref = {"a": torch.arange(1 << 20, dtype=torch.float32), "b": torch.ones(3, 5, dtype=torch.bfloat16)}
    sluice.torch.save_file(ref, src)
    on_sim = sluice.torch.load_file(str(src), device="sim")
    out = tmp_path / "out.safetensors"
    sluice.torch.save_file(on_sim, out, device="sim")
    assert "bounce" in sluice.last_save_report().reason
    assert out.read_bytes() == src.read_bytes()


def test_a_save_that_fails_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "m.safetensors"
    sluice.numpy.save_file({"w": np.arange(10, dtype="<f4")}, path)
    old = path.read_bytes()
    code = ("import numpy as np, sluice.numpy as sn, sys\n"
            "try:\n"
            f"    sn.save_file({{'w': np.ones(1 << 20, dtype='<f4')}}, {str(path)!r})\n"
            "except OSError as e:\n"
            "    print(e.errno, e); sys.exit(3)\n")
    env = dict(os.environ, SLUICE_FAULTS="enospc=1,only=write")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 3, r.stdout + r.stderr
    assert r.stdout.startswith("28 "), r.stdout  # ENOSPC
    assert path.read_bytes() == old
    assert temporaries(tmp_path) == []


def test_save_checkpoint_shards_index_and_loads_back(tmp_path):
    torch = need("torch")
    import sluice.torch  # noqa: F401
    state = {f"layer.{i}.weight": torch.full((256,), float(i)) for i in range(7)}  # 1 KiB each
    state["embed"] = torch.arange(1000, dtype=torch.int64)  # 8000 bytes: a shard of its own
    folder = tmp_path / "ckpt"
    files = sluice.torch.save_checkpoint(state, folder, max_shard_size="3KB")
    names = sorted(os.listdir(folder))
    assert names == sorted([os.path.basename(f) for f in files] + ["model.safetensors.index.json"])
    assert names[0] == "model-00001-of-00005.safetensors"
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    assert index["metadata"] == {"total_size": 7 * 1024 + 8000}
    assert index["weight_map"]["layer.0.weight"] == "model-00001-of-00005.safetensors"
    assert index["weight_map"]["embed"] == "model-00005-of-00005.safetensors"
    loaded = sluice.torch.load(str(folder))
    assert set(loaded) == set(state)
    for name, t in state.items():
        assert torch.equal(loaded[name], t)
    with open(folder / "model-00001-of-00005.safetensors", "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        assert json.loads(f.read(n))["__metadata__"] == {"format": "pt"}
    # A smaller model saved over it: one file, the old shards and index gone.
    sluice.torch.save_checkpoint({"x": torch.zeros(3)}, folder, max_shard_size=1 << 30)
    assert sorted(os.listdir(folder)) == ["model.safetensors"]


def test_max_shard_size_reads_as_hugging_face_reads_it():
    from sluice._save import parse_size

    assert parse_size("5GB") == 5 * 10**9
    assert parse_size("5GiB") == 5 * 2**30
    assert parse_size("500MB") == 500 * 10**6
    assert parse_size("1.5KB") == 1500
    assert parse_size(1234) == 1234
    for bad in ("5 parsecs", "", 0, "-1GB"):
        with pytest.raises(ValueError):
            parse_size(bad)


DISTRIBUTED = r"""
import os, sys, torch, torch.distributed as dist, sluice.torch as st
rank, world = int(sys.argv[1]), int(sys.argv[2])
dist.init_process_group("gloo", init_method="file://" + sys.argv[3], rank=rank, world_size=world)
state = {f"r{rank}.w{i}": torch.full((512,), float(10 * rank + i)) for i in range(3)}  # 2 KiB each
files = st.save_checkpoint(state, sys.argv[4], max_shard_size="4KiB")
print(rank, sorted(os.path.basename(f) for f in files))
dist.destroy_process_group()
"""


def test_save_checkpoint_under_torch_distributed_each_rank_writes_its_shards(tmp_path):
    torch = need("torch")
    import sluice.torch  # noqa: F401
    dist = pytest.importorskip("torch.distributed")
    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available")
    folder = tmp_path / "dist"
    script = tmp_path / "rank.py"
    script.write_text(DISTRIBUTED)
    rendezvous = str(tmp_path / "rendezvous")
    procs = [subprocess.Popen([sys.executable, str(script), str(r), "2", rendezvous, str(folder)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(2)]
    outs = [p.communicate(timeout=240) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, out + err
    # Rank 0's three tensors make shards 1-2, rank 1's shards 3-4: no shard mixes ranks.
    assert outs[0][0].split(" ", 1)[1].strip() == str(["model-00001-of-00004.safetensors",
                                                       "model-00002-of-00004.safetensors"])
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    assert index["weight_map"]["r1.w0"] == "model-00003-of-00004.safetensors"
    loaded = sluice.torch.load(str(folder))
    for rank in range(2):
        for i in range(3):
            assert torch.equal(loaded[f"r{rank}.w{i}"], torch.full((512,), float(10 * rank + i)))
