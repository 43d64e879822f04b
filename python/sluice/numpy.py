"""NumPy arrays from and to sluice: ``sluice.numpy.load_file`` and ``save_file``, drop-ins for
``safetensors.numpy``'s.

    from sluice.numpy import load_file      # was: from safetensors.numpy import load_file
    arrays = load_file("model.safetensors")
    save_file(arrays, "copy.safetensors")   # atomic and durable

The arrays are writable views of the loaded host memory (no copy), which they keep alive. Every
type NumPy has maps exactly, BOOL included, and so does an .npy type sluice does not know
(strings, big-endian, ...: its descr). BF16 and the F8 types raise TypeError: NumPy has none.
"""

from __future__ import annotations

import numpy as _numpy  # NumPy itself: imports are absolute

from . import _sluice

_NAMES = {
    "F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "|i1",
    "U64": "<u8", "U32": "<u4", "U16": "<u2", "U8": "|u1", "BOOL": "|b1", "C64": "<c8", "C128": "<c16",
}


def dtype_of(sluice_dtype: str) -> "_numpy.dtype":
    """NumPy's type for a sluice.Tensor dtype ("F32" -> float32, ">i4" as is); TypeError when
    NumPy has none (BF16, F8_*, F6_*, F4)."""
    name = _NAMES.get(sluice_dtype)
    if name is None and not sluice_dtype[:1].isupper():
        name = sluice_dtype  # an .npy descr sluice has no type for: NumPy reads it
    if name is None:
        raise TypeError(f"NumPy has no type for {sluice_dtype}")
    return _numpy.dtype(name)


def to_numpy(tensor: "_sluice.Tensor") -> "_numpy.ndarray":
    """A NumPy array on the host memory of a sluice.Tensor (no copy), which it keeps alive;
    BufferError for a tensor in CUDA memory."""
    try:
        dtype = dtype_of(tensor.dtype)
    except TypeError as e:
        raise TypeError(f"tensor {tensor.name!r}: {e}") from None
    flat = _numpy.frombuffer(tensor._host_bytes(), dtype=dtype)
    return flat.reshape(tuple(tensor.shape), order="F" if tensor.fortran_order else "C")


def _strided(flat: "_numpy.ndarray", offset: int, shape, strides) -> "_numpy.ndarray":
    """The elements of the 1-d ``flat`` at ``offset`` with ``shape`` and element ``strides``
    (negative ones too), C-contiguous: a view when they are all of ``flat`` in order, else a copy."""
    view = _numpy.lib.stride_tricks.as_strided(flat[offset:], shape=tuple(shape),
                                               strides=tuple(s * flat.itemsize for s in strides))
    if view.flags.c_contiguous and view.size == flat.size:
        return view
    return view.copy(order="C")


def load_file(filename, *, host_load="auto") -> "dict[str, _numpy.ndarray]":
    """As ``safetensors.numpy.load_file``: every tensor of ``filename`` in host memory; where the
    page cache holds the file, writable views of a private (copy-on-write) mapping of it, as
    safetensors' (``host_load``: "auto", "read" for a copy, "mapped"; docs/paths.md)."""
    return {name: to_numpy(t) for name, t in _sluice.load(filename, "cpu", host_load=host_load).items()}


def load(paths, device="cpu", *, tensors=None, rank=None, world=None,
         host_load="auto") -> "dict[str, _numpy.ndarray]":
    """``sluice.load`` with NumPy values (device "cpu", "pinned" or "sim": host-readable memory)."""
    loaded = _sluice.load(paths, device, tensors=tensors, rank=rank, world=world, host_load=host_load)
    return {name: to_numpy(t) for name, t in loaded.items()}


_SAFETENSORS = {_numpy.dtype(v).str: k for k, v in _NAMES.items()}


def save_file(tensor_dict, filename, metadata=None) -> None:
    """As ``safetensors.numpy.save_file``: ``tensor_dict`` ({name: numpy.ndarray}) as the
    safetensors file ``filename``, with ``metadata`` ({str: str}); atomic and durable (docs/save.md).
    Arrays that are not C-contiguous or little endian are converted first, as safetensors does."""
    import os

    if not isinstance(tensor_dict, dict):
        raise TypeError(f"tensor_dict must be a dict of str to numpy.ndarray, not {type(tensor_dict).__name__}")
    entries = []
    for name, a in tensor_dict.items():
        if not isinstance(name, str):
            raise TypeError(f"tensor names must be str, not {type(name).__name__}: {name!r}")
        a = _numpy.asarray(a)
        if a.dtype.byteorder == ">":
            a = a.astype(a.dtype.newbyteorder("<"))
        st = _SAFETENSORS.get(a.dtype.str)
        if st is None:
            raise TypeError(f"tensor {name!r}: safetensors has no type for {a.dtype}")
        shape = list(a.shape)  # ascontiguousarray makes a 0-d array 1-d
        a = _numpy.ascontiguousarray(a)
        entries.append((name, st, shape, a.reshape(-1).view(_numpy.uint8)))
    _sluice._save_safetensors(os.fspath(filename), entries, metadata, None)
