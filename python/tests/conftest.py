"""Shared helpers of the Python tests (run by ctest: python/CMakeLists.txt)."""

import importlib
import os

import pytest


def need(module_name):
    """Imports a module the test needs; skips without it, or fails under SLUICE_TEST_STRICT=1
    (CI), where `make deps` has installed it."""
    try:
        return importlib.import_module(module_name)
    except ImportError as e:
        if os.environ.get("SLUICE_TEST_STRICT") == "1":
            pytest.fail(f"{module_name} is missing under SLUICE_TEST_STRICT=1: {e}")
        pytest.skip(f"{module_name} is not installed: {e}")


@pytest.fixture
def data_file(tmp_path):
    """A 3 MiB + 123 byte file of known random bytes: (path, bytes)."""
    payload = os.urandom(3 * 1024 * 1024 + 123)
    path = tmp_path / "data.bin"
    path.write_bytes(payload)
    return str(path), payload
