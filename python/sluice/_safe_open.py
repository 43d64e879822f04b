"""``sluice.safe_open``, a drop-in for ``safetensors.safe_open``."""

from __future__ import annotations

import importlib

from . import _sluice

_FRAMEWORKS = {"pt": "torch", "torch": "torch", "pytorch": "torch", "np": "numpy", "numpy": "numpy"}


class safe_open:  # noqa: N801 (safetensors' name)
    """A tensor file opened for reading tensors one at a time; a context manager.

    As ``safetensors.safe_open(filename, framework, device="cpu")``: ``keys()`` (sorted),
    ``get_tensor(name)`` (loads that tensor only, into ``device``), ``metadata()`` (the file's
    ``__metadata__``, or None). ``framework``: "pt" (PyTorch) or "np" (NumPy, host memory only).
    The header is read and checked once, here.
    """

    def __init__(self, filename, framework, device="cpu"):
        module = _FRAMEWORKS.get(str(framework).lower())
        if module is None:
            raise ValueError(f"framework must be 'pt' or 'np', not {framework!r}")
        if module == "numpy" and device not in ("cpu", None):
            raise ValueError(f"framework 'np' loads into host memory: device must be 'cpu', not {device!r}")
        self._convert = importlib.import_module(f"sluice.{module}")
        self._to = self._convert.to_torch if module == "torch" else self._convert.to_numpy
        self._device = device
        self._checkpoint = _sluice._Checkpoint(filename)

    def _open(self):
        if self._checkpoint is None:
            raise ValueError("I/O on a closed safe_open")
        return self._checkpoint

    def keys(self) -> "list[str]":
        return sorted(self._open().keys())

    def metadata(self) -> "dict[str, str] | None":
        return self._open().metadata()

    def get_tensor(self, name: str):
        loaded = self._open().load(self._device, tensors=[name])
        return self._to(loaded[name])

    def __enter__(self) -> "safe_open":
        return self

    def __exit__(self, *args) -> None:
        self._checkpoint = None
