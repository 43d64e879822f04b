"""URLs in the Python package (docs/remote.md, docs/python.md): sluice.File(URL) read-only with
read()/size, writes refused, and sluice.numpy/torch load_file(URL) equal to a local load, against
nginx started here on 127.0.0.1 (as tests/remote does). Without nginx the cases skip, except under
SLUICE_TEST_STRICT=1 (make deps installs nginx-light)."""

import os
import shutil
import socket
import subprocess
import time

import pytest

import sluice
from conftest import need


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _nginx_binary():
    for p in ("/usr/sbin/nginx", "/sbin/nginx"):
        if os.access(p, os.X_OK):
            return p
    return shutil.which("nginx")


@pytest.fixture
def www(tmp_path):
    """nginx serving tmp_path/www: (folder, url of a name); _requests(folder) reads its access log."""
    nginx = _nginx_binary()
    if nginx is None:
        if os.environ.get("SLUICE_TEST_STRICT") == "1":
            pytest.fail("nginx is missing under SLUICE_TEST_STRICT=1")
        pytest.skip("nginx (Debian nginx-light) is not installed")
    root, scratch = tmp_path / "www", tmp_path / "nginx"
    root.mkdir()
    scratch.mkdir()
    port = _free_port()
    (scratch / "nginx.conf").write_text(
        f"""daemon off;
master_process off;
pid {scratch}/nginx.pid;
error_log {scratch}/error.log;
events {{ worker_connections 256; }}
http {{
  log_format ranges '$request_method $uri $http_range $status $body_bytes_sent';
  access_log {scratch}/access.log ranges;
  client_body_temp_path {scratch}; proxy_temp_path {scratch}; fastcgi_temp_path {scratch};
  uwsgi_temp_path {scratch}; scgi_temp_path {scratch};
  server {{ listen 127.0.0.1:{port}; root {root}; }}
}}
"""
    )
    proc = subprocess.Popen([nginx, "-c", str(scratch / "nginx.conf"), "-p", str(scratch), "-e", str(scratch / "error.log")])
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.025)
        else:
            pytest.fail(f"nginx did not start (see {scratch}/error.log)")
        yield root, lambda name: f"http://127.0.0.1:{port}/{name}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_file_reads_a_url_and_refuses_writes(www):
    np = need("numpy")
    root, url = www
    payload = os.urandom(3 * 1024 * 1024 + 123)
    (root / "obj.bin").write_bytes(payload)
    with sluice.File(url("obj.bin")) as f:
        assert isinstance(f, sluice.RemoteFile)
        assert f.size == len(payload)
        assert f.path == url("obj.bin")
        buf = np.zeros(len(payload) + 10, dtype=np.uint8)
        r = f.read(buf, 0)
        assert r.bytes == len(payload)
        assert buf[: len(payload)].tobytes() == payload
        part = bytearray(1000)
        assert f.read(part, offset=12345).bytes == 1000
        assert bytes(part) == payload[12345:13345]
        assert "ranged GET" in f.reason
        with pytest.raises(sluice.Error) as e:
            f.write(part, 0)
        assert "read-only" in str(e.value)
    assert f.closed
    with pytest.raises(sluice.Error, match="read-only"):
        sluice.File(url("obj.bin"), "w")
    # A local path still opens a local File.
    with sluice.File(str(root / "obj.bin")) as local:
        assert isinstance(local, sluice.File)
        assert local.size == len(payload)


def _requests(root, at_least):
    """The requests nginx logged: (method, uri, Range header, status, body bytes sent), once it has
    logged `at_least` and a moment has passed for any more (nginx logs a request just after the
    client has its body)."""
    log = root.parent / "nginx" / "access.log"
    deadline = time.monotonic() + 10
    while True:
        rows = [line.split(" ") for line in log.read_text().splitlines() if line] if log.exists() else []
        if len(rows) >= at_least or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    time.sleep(0.2)
    rows = [line.split(" ") for line in log.read_text().splitlines() if line] if log.exists() else []
    return [(m, u, r, int(st), int(n)) for m, u, r, st, n in rows]


def test_file_is_the_extension_type_and_dispatches_urls_in_cpp(www):
    # sluice.File is the C++ type itself (no Python subclass in front of File.read, issue 37); the
    # URL check sits in its constructor.
    root, url = www
    assert sluice.File is sluice._sluice.File
    (root / "x.bin").write_bytes(b"0123456789")
    with sluice.File(str(root / "x.bin"), direct=False) as local:
        assert type(local) is sluice._sluice.File
    for remote in (sluice.File(url("x.bin")), sluice.File(path=url("x.bin"), mode="r", direct=False)):
        assert type(remote) is sluice.RemoteFile
        part = bytearray(4)
        assert remote.read(part, 3).bytes == 4 and bytes(part) == b"3456"
        remote.close()
    with pytest.raises(TypeError):
        sluice.File(url("x.bin"), "r", bogus=1)
    with pytest.raises(FileNotFoundError):
        sluice.File(str(root / "missing.bin"))

    class Mine(sluice.File):  # a Python subclass still constructs through super().__new__
        def __new__(cls, path, *args, **kwargs):
            return super().__new__(cls, path, *args, **kwargs)

    with Mine(str(root / "x.bin")) as mine:
        assert type(mine) is Mine and mine.size == 10
    assert type(Mine(url("x.bin"))) is sluice.RemoteFile


def test_missing_object_names_the_url(www):
    _, url = www
    f = sluice.File(url("nope.bin"))
    with pytest.raises(FileNotFoundError) as e:
        f.read(bytearray(10), 0)
    assert url("nope.bin") in str(e.value)
    with pytest.raises(FileNotFoundError) as e:
        sluice.load(url("nope.safetensors"))
    assert url("nope.safetensors") in str(e.value)


def _write_model(path, np):
    rng = np.random.default_rng(7)
    tensors = {
        "a": rng.standard_normal((300, 257)).astype(np.float32),
        "b": rng.integers(0, 255, size=1000, dtype=np.uint8),
        "c": rng.standard_normal((3, 5, 7)).astype(np.float16),
    }
    import sluice.numpy

    sluice.numpy.save_file(tensors, str(path))
    return tensors


def test_numpy_load_file_from_a_url_equals_a_local_load(www):
    np = need("numpy")
    import sluice.numpy

    root, url = www
    tensors = _write_model(root / "m.safetensors", np)
    got = sluice.numpy.load_file(url("m.safetensors"))
    assert sluice.last_load_report().reason.startswith("remote:")
    local = sluice.numpy.load_file(str(root / "m.safetensors"))
    assert sorted(got) == sorted(tensors)
    for name, t in tensors.items():
        assert got[name].dtype == t.dtype and got[name].shape == t.shape
        assert np.array_equal(got[name], local[name])
        assert np.array_equal(got[name], t)
    subset = sluice.numpy.load(url("m.safetensors"), tensors=["b"])
    assert list(subset) == ["b"] and np.array_equal(subset["b"], tensors["b"])


def test_torch_load_file_from_a_url(www):
    np = need("numpy")
    torch = need("torch")
    import sluice.torch

    root, url = www
    tensors = _write_model(root / "m.safetensors", np)
    got = sluice.torch.load_file(url("m.safetensors"), device="cpu")
    for name, t in tensors.items():
        assert torch.equal(got[name], torch.from_numpy(t))


def test_safe_open_of_a_url_reads_tensors_and_slices(www):
    np = need("numpy")
    root, url = www
    tensors = _write_model(root / "m.safetensors", np)
    with sluice.safe_open(url("m.safetensors"), "np") as f:
        assert sorted(f.keys()) == sorted(tensors)
        assert np.array_equal(f.get_tensor("c"), tensors["c"])
        assert np.array_equal(f.get_slice("a")[10:20], tensors["a"][10:20])
    assert sluice.last_load_report().reason.startswith("remote:")


def test_safe_open_slice_of_a_url_reads_only_its_rows(www):
    # A row slice is one contiguous run: one ranged GET of exactly its bytes, not the tensor.
    np = need("numpy")
    import sluice.numpy

    root, url = www
    big = np.random.default_rng(3).standard_normal((2048, 1024)).astype(np.float32)  # 8 MiB
    sluice.numpy.save_file({"big": big, "small": np.arange(10, dtype=np.int64)}, str(root / "s.safetensors"))
    with sluice.safe_open(url("s.safetensors"), "np") as f:
        opened = len(_requests(root, 1))  # the header's ranged read
        got = f.get_slice("big")[1000:1016]
        after = _requests(root, opened + 1)[opened:]
        with sluice.safe_open(str(root / "s.safetensors"), "np") as local:
            assert np.array_equal(got, local.get_slice("big")[1000:1016])
    assert np.array_equal(got, big[1000:1016])
    assert [(m, s) for m, _, _, s, _ in after] == [("GET", 206)]
    assert after[0][4] == 16 * 1024 * 4


def test_safe_open_strided_slice_of_a_url_reads_run_by_run(www):
    # Rows 2 MiB apart: one ranged GET per row (4 KiB each), not the 6 MiB between the first and
    # the last; columns of neighbouring rows (gaps under 1 MiB) stay one ranged read.
    np = need("numpy")
    import sluice.numpy

    root, url = www
    big = np.random.default_rng(4).standard_normal((2048, 1024)).astype(np.float32)  # rows of 4 KiB
    sluice.numpy.save_file({"big": big}, str(root / "s.safetensors"))
    with sluice.safe_open(url("s.safetensors"), "np") as f, sluice.safe_open(str(root / "s.safetensors"), "np") as local:
        opened = len(_requests(root, 1))
        rows = f.get_slice("big")[::512, 8:]
        after = _requests(root, opened + 4)[opened:]
        assert np.array_equal(rows, local.get_slice("big")[::512, 8:])
        assert np.array_equal(rows, big[::512, 8:])
        assert sorted(n for _, _, _, _, n in after) == [1016 * 4] * 4
        cols = f.get_slice("big")[100:110, 0:16]
        more = _requests(root, opened + 5)[opened + 4 :]
        assert np.array_equal(cols, big[100:110, 0:16])
        assert [(s, n) for _, _, _, s, n in more] == [(206, (9 * 1024 + 16) * 4)]
        # Negative steps (NumPy) and single rows read run by run too, and equal NumPy's indexing.
        assert np.array_equal(f.get_slice("big")[::-700, 5:1:-1], big[::-700, 5:1:-1])
        assert np.array_equal(f.get_slice("big")[1500, ::300], big[1500, ::300])
    torch = need("torch")
    with sluice.safe_open(url("s.safetensors"), "pt") as f:
        assert torch.equal(f.get_slice("big")[::512, 3:9], torch.from_numpy(big[::512, 3:9].copy()))


def test_loader_over_a_url_says_it_is_not_supported_yet():
    # Ingest reads local files only: a URL is refused by name, not reported as a missing file.
    with pytest.raises(ValueError, match="not supported yet") as e:  # a usage error
        sluice.data.Loader(["https://example.com/b/shard-000.tar"], batch_size=2, device="cpu")
    assert "https://example.com/b/shard-000.tar" in str(e.value)
