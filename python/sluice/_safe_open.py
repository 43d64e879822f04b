"""``sluice.safe_open``, a drop-in for ``safetensors.safe_open``."""

from __future__ import annotations

import importlib
import operator

from . import _sluice

_FRAMEWORKS = {"pt": "torch", "torch": "torch", "pytorch": "torch", "np": "numpy", "numpy": "numpy"}


class safe_open:  # noqa: N801 (safetensors' name)
    """A tensor file opened for reading tensors one at a time; a context manager.

    As ``safetensors.safe_open(filename, framework, device="cpu")``: ``keys()`` (sorted),
    ``get_tensor(name)`` (loads that tensor only, into ``device``), ``get_slice(name)`` (a
    SafeSlice: ``[index]`` loads only the bytes that part of the tensor lies in),
    ``metadata()`` (the file's ``__metadata__``, or None). ``framework``: "pt" (PyTorch) or "np"
    (NumPy, host memory only). The header is read and checked once, here.
    """

    def __init__(self, filename, framework, device="cpu"):
        module = _FRAMEWORKS.get(str(framework).lower())
        if module is None:
            raise ValueError(f"framework must be 'pt' or 'np', not {framework!r}")
        if module == "numpy" and device not in ("cpu", None):
            raise ValueError(f"framework 'np' loads into host memory: device must be 'cpu', not {device!r}")
        self._numpy = module == "numpy"
        self._convert = importlib.import_module(f"sluice.{module}")
        self._to = self._convert.to_torch if module == "torch" else self._convert.to_numpy
        self._device = device
        self._checkpoint = _sluice._Checkpoint(filename)
        self._remote = isinstance(filename, str) and filename.startswith(_REMOTE_SCHEMES)

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

    def get_slice(self, name: str) -> "SafeSlice":
        """The tensor ``name``, unread: ``get_shape()``, ``get_dtype()``, and ``[index]``, which
        loads the part of it that ``index`` selects (ints, slices, ``...`` and ``None``, with the
        framework's semantics) and reads only the bytes from its first element to its last."""
        return SafeSlice(self, name)

    def __enter__(self) -> "safe_open":
        return self

    def __exit__(self, *args) -> None:
        self._checkpoint = None


class SafeSlice:
    """One tensor of a ``safe_open`` file, not yet read (``safetensors``' ``PySafeSlice``):
    ``get_shape()``, ``get_dtype()``, and ``[index]``, the part ``index`` selects, read alone.

    ``index`` takes what basic indexing takes: ints (negative ones count from the end), slices
    (with steps; PyTorch refuses negative ones, NumPy takes them), one ``...`` and ``None``. The
    result equals ``get_tensor(name)[index]``, made contiguous: what is read is the range of
    the file from the selected part's first element to its last, into ``device``, and a part
    that is not that whole range is copied out of it on that device. A row range (``[a:b]``) of
    a row-major tensor is one range and no copy; a column range (``[:, a:b]``) reads from its
    first row's first column to its last row's last.
    """

    def __init__(self, opened: safe_open, name: str):
        # What it needs of the safe_open, so that it works after that is closed, as safetensors' does.
        self._checkpoint = opened._open()
        self._device = opened._device
        self._to = opened._to
        self._strided = opened._convert._strided
        self._numpy = opened._numpy
        self._remote = opened._remote
        self._name = name
        self._dtype, shape, self._fortran_order, self._bits = self._checkpoint.describe(name)
        self._shape = tuple(shape)

    def get_shape(self) -> "list[int]":
        """The shape of the whole tensor."""
        return list(self._shape)

    def get_dtype(self) -> str:
        """The type of the tensor, as safetensors spells it ("F32", "BF16")."""
        return self._dtype

    def __getitem__(self, index):
        offset, shape, strides = _select(index, self._shape, _strides(self._shape, self._fortran_order),
                                         negative_steps=self._numpy)
        if self._bits % 8 != 0:
            raise TypeError(f"tensor {self._name!r} has {self._bits} bits per element: get_slice reads whole "
                            "bytes (load it with get_tensor)")
        numel = 1
        for n in shape:
            numel *= n
        if numel == 0:
            first, count = 0, 0
        else:
            first = offset + sum(min(0, (n - 1) * s) for n, s in zip(shape, strides))
            count = offset + sum(max(0, (n - 1) * s) for n, s in zip(shape, strides)) + 1 - first
        ranges = _runs(offset - first, shape, strides, max(1, _REMOTE_GAP_BITS // self._bits)) if (
            self._remote and numel) else None
        if ranges is None or len(ranges) == 1:
            flat = self._to(self._checkpoint.load_part(self._name, first, count, self._device))
        else:
            flat = self._gather(first, count, ranges)
        return self._strided(flat, offset - first if numel else 0, shape, strides)

    def _gather(self, first, count, ranges):
        # The span's buffer, with only the runs read into it: the gaps are never looked at.
        parts = [self._to(self._checkpoint.load_part(self._name, first + a, b - a, self._device)) for a, b in ranges]
        if self._numpy:
            import numpy

            flat = numpy.empty(count, dtype=parts[0].dtype)
        else:
            flat = parts[0].new_empty(count)
        for (a, b), part in zip(ranges, parts):
            flat[a:b] = part
        return flat

    def __repr__(self) -> str:
        return f"sluice.SafeSlice({self._name!r}, dtype={self._dtype!r}, shape={list(self._shape)})"


# A URL's slice is read run by run (one ranged read each) where runs lie more than this apart;
# nearer runs are read as one range with their gap, as a local file's slice is read whole.
_REMOTE_SCHEMES = ("http://", "https://", "s3://")
_REMOTE_GAP_BITS = 8 << 20  # 1 MiB
_MAX_RUNS = 1 << 16


def _runs(offset, shape, strides, gap):
    """The element ranges [a, b) of a strided part (offsets from its first element), contiguous
    runs merged where less than ``gap`` elements apart; None when there are too many to list."""
    run, outer = 1, []
    dims = [(n, s) for n, s in zip(shape, strides) if n != 1]
    while dims and dims[-1][1] == run:
        run *= dims.pop()[0]
    count = 1
    for n, _ in dims:
        count *= n
    if count > _MAX_RUNS:
        return None
    starts = [offset]
    for n, s in dims:
        starts = [a + i * s for a in starts for i in range(n)]
    merged = []
    for a in sorted(set(starts)):
        if merged and a - merged[-1][1] < gap:
            merged[-1][1] = max(merged[-1][1], a + run)
        else:
            merged.append([a, a + run])
    return [(a, b) for a, b in merged]


def _strides(shape, fortran_order: bool) -> "list[int]":
    """Element strides of a dense tensor of ``shape`` in row-major (or column-major) order."""
    strides = [0] * len(shape)
    step = 1
    order = range(len(shape)) if fortran_order else reversed(range(len(shape)))
    for d in order:
        strides[d] = step
        step *= shape[d]
    return strides


def _select(index, shape, strides, negative_steps: bool):
    """Where ``tensor[index]`` lies in a tensor of ``shape`` with element ``strides``, for basic
    indexing as NumPy (``negative_steps``) and PyTorch do it: (offset of its first element, its
    shape, its strides)."""
    if not isinstance(index, tuple):
        index = (index,)
    ellipses = sum(1 for i in index if i is Ellipsis)
    if ellipses > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    taking = sum(1 for i in index if i is not None and i is not Ellipsis)
    if taking > len(shape):
        raise IndexError(f"too many indices for a tensor of {len(shape)} dimension(s): {taking} given")
    expanded = []
    for i in index:
        if i is Ellipsis:
            expanded.extend([slice(None)] * (len(shape) - taking))
        else:
            expanded.append(i)
    if not ellipses:
        expanded.extend([slice(None)] * (len(shape) - taking))
    offset, out_shape, out_strides, dim = 0, [], [], 0
    for i in expanded:
        if i is None:
            out_shape.append(1)
            out_strides.append(0)
            continue
        n, s = shape[dim], strides[dim]
        if isinstance(i, slice):
            if not negative_steps and i.step is not None and operator.index(i.step) < 0:
                raise ValueError("step must be greater than zero")  # as PyTorch says it
            start, stop, step = i.indices(n)
            length = len(range(start, stop, step))
            if length:
                offset += start * s
            out_shape.append(length)
            out_strides.append(step * s)
        else:
            if isinstance(i, bool):
                raise TypeError("get_slice takes no boolean index: use get_tensor(name)[index]")
            try:
                k = operator.index(i)
            except TypeError:
                raise TypeError(f"get_slice takes ints, slices, ... and None, not {type(i).__name__}: for "
                                "advanced indexing use get_tensor(name)[index]") from None
            if not -n <= k < n:
                raise IndexError(f"index {k} is out of bounds for dimension {dim} with size {n}")
            offset += (k % n) * s
        dim += 1
    return offset, out_shape, out_strides
