"""sluice.File: reads and writes from Python buffers, checked against os.pread; errors; futures;
threads."""

import errno
import inspect
import os
import pickle
import random
import subprocess
import sys
import threading

import pytest

import sluice
from conftest import need


def test_read_whole_file_into_numpy(data_file):
    np = need("numpy")
    path, payload = data_file
    buf = np.empty(len(payload), dtype=np.uint8)
    with sluice.File(path) as f:
        assert f.size == len(payload)
        r = f.read(buf)
    assert r.bytes == len(payload)
    assert r.path == "host"
    assert r.reason
    assert r.seconds >= 0 and r.ios >= 1
    assert buf.tobytes() == payload
    assert "sluice.Result(bytes=" in repr(r)


def test_random_ranges_and_misaligned_buffers_match_pread(data_file):
    np = need("numpy")
    path, payload = data_file
    rng = random.Random(7)
    fd = os.open(path, os.O_RDONLY)
    try:
        with sluice.File(path) as f:
            for _ in range(60):
                offset = rng.randrange(0, len(payload) + 100)
                size = rng.choice([1, 511, 4096, 4097, 65536 + 3, rng.randrange(1, 1 << 20)])
                shift = rng.randrange(0, 64)  # the buffer starts `shift` bytes into an allocation
                backing = np.zeros(size + shift + 8, dtype=np.uint8)
                view = backing[shift:shift + size]
                r = f.read(view, offset)
                want = os.pread(fd, size, offset)
                assert r.bytes == len(want), (offset, size)
                assert view[:r.bytes].tobytes() == want
                assert not backing[:shift].any() and not backing[shift + size:].any()
    finally:
        os.close(fd)


def test_size_and_offset_arguments(data_file):
    np = need("numpy")
    path, payload = data_file
    buf = np.zeros(10000, dtype=np.uint8)
    with sluice.File(path) as f:
        r = f.read(buf, 5, 1000)
        assert r.bytes == 1000
        assert buf[:1000].tobytes() == payload[5:1005]
        assert not buf[1000:].any()
        r = f.read(buf, offset=len(payload) - 10)  # the end of the file: fewer bytes
        assert r.bytes == 10
        assert f.read(buf, offset=len(payload) + 5).bytes == 0


def test_small_reads_follow_a_file_that_grows_or_shrinks(tmp_path):
    """Small reads take the size last seen without asking the kernel, yet read a grown file to
    its new end and a shrunk one to its new end."""
    path = tmp_path / "grows.bin"
    first = os.urandom(10000)
    path.write_bytes(first)
    buf = bytearray(4096)
    with sluice.File(str(path)) as f:
        assert f.read(buf, 0).bytes == 4096
        more = os.urandom(5000)
        with open(path, "ab") as w:
            w.write(more)
        whole = first + more
        r = f.read(buf, 9000)  # across the old end
        assert r.bytes == 4096 and bytes(buf) == whole[9000:13096]
        r = f.read(buf, 12000)
        assert r.bytes == 3000 and bytes(buf[:3000]) == whole[12000:]
        os.truncate(path, 6000)
        r = f.read(buf, 4096)  # within the size last seen
        assert r.bytes == 1904 and bytes(buf[:1904]) == whole[4096:6000]
        assert f.read(buf, 8192).bytes == 0
        assert f.size == 6000


def test_read_results_stay_what_they_were(data_file):
    """read(buf) and read(buf, offset) take a shorter way through the binding than calls with
    keywords: the same transfer, the same Result, and a Result kept stays as it was."""
    path, payload = data_file
    buf = bytearray(4096)
    with sluice.File(path) as f:
        kept = f.read(buf, 0)
        tail = f.read(buf, len(payload) - 100)
        for _ in range(3):
            f.read(buf, 4096)  # results dropped at once
        assert (kept.bytes, tail.bytes) == (4096, 100)
        again = f.read(buf, 8192)
        assert again is not kept and again is not tail and again.bytes == 4096
        assert bytes(buf) == payload[8192:12288]
        spelled = [f.read(buf, 8192), f.read(buf, offset=8192), f.read(buf=buf, offset=8192, size=4096, path="auto")]
        assert [(r.bytes, r.path, r.reason, r.cached_bytes) for r in spelled] == \
            [(again.bytes, again.path, again.reason, again.cached_bytes)] * 3
        with pytest.raises(ValueError, match="offset"):
            f.read(buf, -1)
        with pytest.raises(TypeError):
            f.read(buf, "0")
        with pytest.raises(TypeError, match="read-only"):
            f.read(b"0123", 0)
        with pytest.raises(TypeError, match="needs a buffer"):
            f.read(object())
        with pytest.raises(TypeError):
            f.read()
    assert "offset" in str(inspect.signature(sluice.File.read))

    class Mine(sluice.File):  # a subclass takes the same way
        pass

    with Mine(path) as f:
        assert f.read(buf, 4096).bytes == 4096 and bytes(buf) == payload[4096:8192]


def test_write_then_read_back(tmp_path):
    np = need("numpy")
    path = str(tmp_path / "out.bin")
    data = np.frombuffer(os.urandom(1 << 20), dtype=np.uint8)
    with sluice.File(path, "w") as f:
        r = f.write(data)
        assert r.bytes == data.nbytes
        assert f.write(b"tail", offset=data.nbytes).bytes == 4  # bytes: read-only is fine to write from
    assert open(path, "rb").read() == data.tobytes() + b"tail"
    with sluice.File(path, "r+") as f:
        f.write(bytearray(b"XY"), offset=3)
        back = bytearray(8)
        f.read(back)
    assert bytes(back) == data.tobytes()[:3] + b"XY" + data.tobytes()[5:8]
    with sluice.File(path, "w"):  # "w" truncates
        pass
    assert os.path.getsize(path) == 0


def test_bytearray_memoryview_and_torch(data_file):
    path, payload = data_file
    with sluice.File(path) as f:
        ba = bytearray(4096)
        assert f.read(ba, 100).bytes == 4096 and bytes(ba) == payload[100:4196]
        mv = memoryview(bytearray(300))
        assert f.read(mv, 7).bytes == 300 and mv.tobytes() == payload[7:307]
        torch = need("torch")
        t = torch.zeros(1000, dtype=torch.float32)  # no buffer protocol: DLPack
        assert f.read(t, 64).bytes == 4000
        assert t.numpy().tobytes() == payload[64:4064]


def test_bad_buffers_are_refused_with_the_reason(data_file):
    np = need("numpy")
    path, _ = data_file
    with sluice.File(path) as f:
        with pytest.raises(TypeError, match="read-only"):
            f.read(b"immutable")
        with pytest.raises(ValueError, match="not contiguous"):
            f.read(np.zeros((64, 64), dtype=np.uint8)[:, ::2])
        with pytest.raises(TypeError, match="needs a buffer"):
            f.read(12345)
        with pytest.raises(ValueError, match="larger than the buffer"):
            f.read(bytearray(10), 0, 11)
        with pytest.raises(ValueError, match="offset"):
            f.read(bytearray(10), -1)
        with pytest.raises(ValueError, match="path must be"):
            f.read(bytearray(10), path="warp")
        ro = np.zeros(16, dtype=np.uint8)
        ro.flags.writeable = False
        with pytest.raises(TypeError, match="read-only"):
            f.read(ro)
        assert f.read(np.zeros((4, 8), dtype=np.uint8, order="F")).bytes == 32  # Fortran order: one range


def test_bad_arguments_to_file():
    with pytest.raises(ValueError, match="mode"):
        sluice.File("/nonexistent", "a")


def test_missing_file_is_file_not_found(tmp_path):
    missing = str(tmp_path / "missing.bin")
    with pytest.raises(FileNotFoundError) as info:
        sluice.File(missing)
    e = info.value
    assert isinstance(e, sluice.Error) and isinstance(e, OSError)
    assert e.errno == errno.ENOENT
    assert e.filename == missing
    assert missing in str(e)
    assert e.op == "open"
    again = pickle.loads(pickle.dumps(e))
    assert type(again) is type(e) and again.errno == e.errno and str(again) == str(e)
    with pytest.raises(FileNotFoundError):
        sluice.File(missing, "r+")  # r+ does not create


def test_errors_of_the_os_carry_errno_and_file(tmp_path):
    with pytest.raises(sluice.Error) as info:
        sluice.File(str(tmp_path))  # a folder
    assert info.value.errno != 0 and info.value.filename == str(tmp_path)
    path = str(tmp_path / "w.bin")
    with sluice.File(path, "w") as f:
        with pytest.raises(ValueError, match="opened for writing only"):
            f.read(bytearray(16))  # a usage error, as io's UnsupportedOperation is a ValueError


FAULTY_READS = """
import errno, sys, sluice
path = sys.argv[1]
with sluice.File(path) as f:
    for call in ("sync", "async"):
        try:
            if call == "sync":
                f.read(bytearray(8192), 4096)
            else:
                f.read_async(bytearray(8192), 4096).result()
        except sluice.Error as e:
            assert e.errno == errno.EIO, e.errno
            assert e.filename == path and e.op == "read" and e.domain == "os"
            assert e.offset is not None and e.length is not None
            print(call, "EIO", e.offset, e.length)
        else:
            sys.exit(call + ": no error")
"""


def test_storage_errors_reach_python_with_their_range(data_file):
    """Every read fails with EIO (SLUICE_FAULTS): the sync and async calls raise sluice.Error."""
    path, _ = data_file
    env = dict(os.environ, SLUICE_FAULTS="eio=1")
    out = subprocess.run([sys.executable, "-c", FAULTY_READS, path], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.split("\n")
    assert lines[0].startswith("sync EIO ") and lines[1].startswith("async EIO ")


def test_closed_file_refuses_io(data_file):
    path, _ = data_file
    f = sluice.File(path)
    f.close()
    assert f.closed
    with pytest.raises(ValueError, match="closed file"):
        f.read(bytearray(8))
    assert "closed" in repr(f)


def test_futures(data_file):
    np = need("numpy")
    path, payload = data_file
    chunk = 256 * 1024
    with sluice.File(path) as f:
        bufs = [np.empty(chunk, dtype=np.uint8) for _ in range(len(payload) // chunk)]
        futures = [f.read_async(b, i * chunk) for i, b in enumerate(bufs)]
        for i, (b, fut) in enumerate(zip(bufs, futures)):
            r = fut.result(timeout=60)
            assert fut.done()
            assert r.bytes == chunk and b.tobytes() == payload[i * chunk:(i + 1) * chunk]
            assert fut.result().bytes == chunk  # a second call gives the same result
        # Dropping a future waits for its transfer: the buffer it holds stays valid until then.
        for _ in range(20):
            f.read_async(np.empty(chunk, dtype=np.uint8), 0)


def test_write_async_and_timeout(tmp_path):
    np = need("numpy")
    path = str(tmp_path / "async.bin")
    data = np.frombuffer(os.urandom(1 << 20), dtype=np.uint8)
    with sluice.File(path, "w") as f:
        fut = f.write_async(data)
        assert fut.result(timeout=60).bytes == data.nbytes
        assert fut.result(timeout=0).bytes == data.nbytes  # done: no wait
    assert open(path, "rb").read() == data.tobytes()


def test_threads_read_at_once(data_file):
    np = need("numpy")
    path, payload = data_file
    errors = []
    chunk = 64 * 1024

    def worker(seed):
        rng = random.Random(seed)
        buf = np.empty(chunk, dtype=np.uint8)
        try:
            with sluice.File(path) as f:
                for _ in range(40):
                    off = rng.randrange(0, len(payload) - chunk)
                    f.read(buf, off)
                    if buf.tobytes() != payload[off:off + chunk]:
                        errors.append(f"bytes differ at {off}")
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(repr(e))

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


_FORK_SCRIPT = r"""
import os, sys
import numpy as np
import sluice

path = sys.argv[1]
want = open(path, "rb").read()


def aligned(n):  # O_DIRECT-aligned memory, so read_async takes the async I/O thread
    a = np.empty(n + 4096, dtype=np.uint8)
    off = (-a.ctypes.data) % 4096
    return a[off:off + n]


def reads(who):
    with sluice.File(path) as f:
        buf = aligned(1 << 16)
        f.read(buf, 4096)
        assert buf.tobytes() == want[4096:4096 + (1 << 16)], who
        futs = [(i, aligned(4096)) for i in range(16)]
        futs = [(i, b, f.read_async(b, i * 8192)) for i, b in futs]
        for i, b, fut in futs:
            r = fut.result(timeout=20)
            assert b.tobytes() == want[i * 8192:i * 8192 + 4096], who
            assert r.reason == "O_DIRECT; async I/O thread", (who, r.reason)


reads("parent")
pid = os.fork()
if pid == 0:
    try:
        reads("child")
    except BaseException as e:  # noqa: BLE001 (reported through the exit status)
        print("child:", repr(e), file=sys.stderr, flush=True)
        os._exit(1)
    os._exit(0)
_, status = os.waitpid(pid, 0)
assert os.waitstatus_to_exitcode(status) == 0, f"the child ended with {status}"
reads("parent, after the fork")
print("ok")
"""


def test_a_forked_child_reads_after_its_parent_did(data_file):
    """PyTorch's DataLoader workers and multiprocessing fork processes that may have read through
    sluice already: the child reads too. Before, its io_uring was its parent's (EEXIST) and its
    async I/O thread did not exist (a read_async never completed)."""
    need("numpy")
    path, _ = data_file
    env = dict(os.environ, SLUICE_CACHE_POLICY="bypass")  # the file was just written: O_DIRECT all the same
    out = subprocess.run([sys.executable, "-c", _FORK_SCRIPT, path], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_version_from_the_command_line():
    out = subprocess.run([sys.executable, "-m", "sluice", "--version"], check=True, capture_output=True, text=True)
    assert out.stdout.startswith(f"sluice {sluice.__version__} ")
