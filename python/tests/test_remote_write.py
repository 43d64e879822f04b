"""Saving to S3 from Python (docs/remote.md, "Writing to S3"; docs/save.md): sluice.torch.save_file,
sluice.numpy.save_file and sluice.torch.save_checkpoint to s3:// URLs, against the emulator that
checks SigV4 signatures (@20minutes/s3rver, installed by the build into
build/tests/remote/s3rver), read back by an independent client (boto3) and by sluice: the bytes
are those of the same save to a local file. Without node, the emulator or boto3 the cases skip,
except under SLUICE_TEST_STRICT=1."""

import json
import os
import pathlib
import shutil
import subprocess

import pytest

import sluice
import sluice.numpy  # noqa: F401  (sluice.numpy.save_file)
from conftest import need

_HERE = pathlib.Path(__file__).resolve().parent
_S3_SERVER = _HERE.parents[1] / "tests" / "remote" / "s3_server.js"


def _missing(what):
    if os.environ.get("SLUICE_TEST_STRICT") == "1":
        pytest.fail(f"{what} is missing under SLUICE_TEST_STRICT=1")
    pytest.skip(f"{what} is not available")


def _s3rver_modules():
    """node_modules holding @20minutes/s3rver: SLUICE_S3RVER_MODULES, else the build tree's (the
    package under test is build/python/sluice: its build/tests/remote/s3rver)."""
    env = os.environ.get("SLUICE_S3RVER_MODULES")
    if env:
        return pathlib.Path(env)
    return pathlib.Path(sluice.__file__).resolve().parents[2] / "tests" / "remote" / "s3rver" / "node_modules"


@pytest.fixture
def s3(tmp_path, monkeypatch):
    """The emulator on 127.0.0.1 with the bucket sluice-test, the AWS_* variables pointing at it;
    yields a boto3 client."""
    boto3 = need("boto3")
    from botocore.config import Config

    modules = _s3rver_modules()
    if shutil.which("node") is None:
        _missing("node (Debian nodejs)")
    if not (modules / "@20minutes" / "s3rver" / "package.json").exists():
        _missing(f"@20minutes/s3rver in {modules}")
    store = tmp_path / "store"
    store.mkdir()
    proc = subprocess.Popen(["node", str(_S3_SERVER), str(modules), str(store)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        port = int(proc.stdout.readline())
        endpoint = f"http://127.0.0.1:{port}"
        for name in ("AWS_ENDPOINT_URL_S3", "AWS_SESSION_TOKEN", "AWS_DEFAULT_REGION", "AWS_CA_BUNDLE",
                     "SLUICE_REMOTE_PART_SIZE", "AWS_PROFILE"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
        monkeypatch.setenv("AWS_REGION", "us-east-1")
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "S3RVER")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "S3RVER")
        yield boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                           aws_access_key_id="S3RVER", aws_secret_access_key="S3RVER",
                           config=Config(signature_version="s3v4", s3={"addressing_style": "path"}))
    finally:
        proc.stdin.close()
        proc.wait(timeout=10)


def _get(client, key):
    return client.get_object(Bucket="sluice-test", Key=key)["Body"].read()


def _state():
    torch = need("torch")
    import sluice.torch  # noqa: F401  (needs PyTorch: imported where a test has it)
    g = torch.Generator().manual_seed(7)
    return {
        "big": torch.randn(3 * 1024 * 1024 + 17, generator=g),  # 12 MiB: a multipart upload
        "small": torch.arange(10, dtype=torch.int16),
        "half": torch.randn(33, 7, generator=g).to(torch.bfloat16),
    }


def test_torch_save_file_to_s3_equals_a_local_save(s3, tmp_path):
    torch = need("torch")
    state = _state()
    sluice.torch.save_file(state, "s3://sluice-test/m/model.safetensors", metadata={"format": "pt"})
    report = sluice.last_save_report()
    assert "multipart upload of 2 parts of 8.00 MiB" in report.reason, report.reason
    sluice.torch.save_file(state, tmp_path / "model.safetensors", metadata={"format": "pt"})
    assert _get(s3, "m/model.safetensors") == (tmp_path / "model.safetensors").read_bytes()
    back = sluice.torch.load_file("s3://sluice-test/m/model.safetensors")
    assert set(back) == set(state)
    for name, t in state.items():
        assert torch.equal(back[name], t), name


def test_numpy_save_file_to_s3_equals_a_local_save(s3, tmp_path):
    np = need("numpy")
    arrays = {"a": np.arange(1000, dtype=np.float32), "b": np.ones((3, 5), dtype=np.uint8)}
    sluice.numpy.save_file(arrays, "s3://sluice-test/n/arrays.safetensors")
    assert "one PUT" in sluice.last_save_report().reason
    sluice.numpy.save_file(arrays, str(tmp_path / "arrays.safetensors"))
    assert _get(s3, "n/arrays.safetensors") == (tmp_path / "arrays.safetensors").read_bytes()


def test_save_checkpoint_to_an_s3_prefix(s3, tmp_path):
    torch = need("torch")
    state = _state()
    files = sluice.torch.save_checkpoint(state, "s3://sluice-test/ckpt/", max_shard_size="8MB")
    local = sluice.torch.save_checkpoint(state, tmp_path / "ckpt", max_shard_size="8MB")
    assert [f.rsplit("/", 1)[1] for f in files] == [os.path.basename(f) for f in local]
    assert len(files) > 1
    index = json.loads(_get(s3, "ckpt/model.safetensors.index.json"))
    assert index == json.loads((tmp_path / "ckpt" / "model.safetensors.index.json").read_text())
    for shard in sorted(set(index["weight_map"].values())):
        assert _get(s3, f"ckpt/{shard}") == (tmp_path / "ckpt" / shard).read_bytes(), shard
        for name, t in sluice.torch.load_file(f"s3://sluice-test/ckpt/{shard}").items():
            assert index["weight_map"][name] == shard
            assert torch.equal(t, state[name]), name


def test_wrong_secret_is_a_clear_error_and_no_object(s3, monkeypatch):
    botocore = need("botocore")
    state = _state()
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    with pytest.raises(sluice.Error, match="SignatureDoesNotMatch") as e:
        sluice.torch.save_file(state, "s3://sluice-test/denied.safetensors")
    assert "s3://sluice-test/denied.safetensors" in str(e.value)
    with pytest.raises(botocore.exceptions.ClientError):
        s3.head_object(Bucket="sluice-test", Key="denied.safetensors")


def test_https_writes_are_refused():
    np = need("numpy")
    with pytest.raises(ValueError, match="only s3:// URLs are written"):
        sluice.numpy.save_file({"a": np.zeros(4)}, "https://127.0.0.1:9/x.safetensors")
