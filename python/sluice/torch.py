"""PyTorch tensors from sluice: ``sluice.torch.load_file``, a drop-in for
``safetensors.torch.load_file``.

    from sluice.torch import load_file      # was: from safetensors.torch import load_file
    state = load_file("model.safetensors", device="cuda:0")

Each tensor comes from ``sluice.load`` through DLPack, without a copy. Types PyTorch cannot take
through DLPack in this version (BOOL; U16, U32, U64 and the F8 types where PyTorch has them) go as
their bytes, viewed as the type. A type this PyTorch lacks (the F8 types before 2.1, U16/U32/U64
before 2.3) raises TypeError.
"""

from __future__ import annotations

import torch as _torch  # PyTorch itself: imports are absolute

from . import _sluice

# The safetensors names and PyTorch's types, where this PyTorch has them.
_NAMES = {
    "F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16",
    "I64": "int64", "I32": "int32", "I16": "int16", "I8": "int8", "U8": "uint8", "BOOL": "bool",
    "U16": "uint16", "U32": "uint32", "U64": "uint64", "C64": "complex64", "C128": "complex128",
    "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2", "F8_E4M3FNUZ": "float8_e4m3fnuz",
    "F8_E5M2FNUZ": "float8_e5m2fnuz", "F8_E8M0": "float8_e8m0fnu",
}
# What every PyTorch since 1.10 takes through DLPack; the rest goes as bytes.
_THROUGH_DLPACK = {"F64", "F32", "F16", "BF16", "I64", "I32", "I16", "I8", "U8", "C64", "C128"}


def dtype_of(sluice_dtype: str) -> "_torch.dtype":
    """PyTorch's type for a sluice.Tensor dtype ("BF16" -> torch.bfloat16); TypeError when this
    PyTorch has none."""
    dtype = getattr(_torch, _NAMES.get(sluice_dtype, "?"), None)
    if not isinstance(dtype, _torch.dtype):
        raise TypeError(f"PyTorch {_torch.__version__} has no type for {sluice_dtype}")
    return dtype


def to_torch(tensor: "_sluice.Tensor") -> "_torch.Tensor":
    """A torch.Tensor on the memory of a sluice.Tensor (no copy), which it keeps alive."""
    try:
        dtype = dtype_of(tensor.dtype)
    except TypeError as e:
        raise TypeError(f"tensor {tensor.name!r}: {e}") from None
    if tensor.dtype in _THROUGH_DLPACK:
        return _torch.from_dlpack(tensor)
    shape = tuple(tensor.shape)
    flat = _torch.from_dlpack(tensor.view_bytes()).view(dtype)
    if not tensor.fortran_order:
        return flat.reshape(shape)
    # Column-major bytes: the C-order array of the reversed shape, transposed.
    return flat.reshape(shape[::-1]).permute(*reversed(range(len(shape))))


def load_file(filename, device="cpu") -> "dict[str, _torch.Tensor]":
    """As ``safetensors.torch.load_file``: every tensor of ``filename`` on ``device`` ("cpu",
    "cuda", "cuda:N", an int N, a torch.device; also sluice's "sim" and "pinned")."""
    return {name: to_torch(t) for name, t in _sluice.load(filename, device).items()}


def load(paths, device="cpu", *, tensors=None, rank=None, world=None) -> "dict[str, _torch.Tensor]":
    """``sluice.load`` with torch.Tensor values: files, indexes and folders, a subset, a share."""
    loaded = _sluice.load(paths, device, tensors=tensors, rank=rank, world=world)
    return {name: to_torch(t) for name, t in loaded.items()}
