"""Sluice: bytes between files and GPU or host memory, saying which path they took and why.

    import numpy as np, sluice
    buf = np.empty(1 << 20, dtype=np.uint8)
    with sluice.File("data.bin") as f:
        r = f.read(buf, offset=0)
    print(r.bytes, r.path, r.reason)

``File.read``/``write`` take NumPy arrays, PyTorch tensors (CPU or CUDA), CuPy arrays, bytearrays
or anything with the buffer protocol, ``__cuda_array_interface__`` or ``__dlpack__``; the
``_async`` forms return a ``Future``. Every failure is a ``sluice.Error`` (an ``OSError``).
docs/python.md has the whole API.
"""

from ._errors import Error, FileExistsError, FileNotFoundError, IsADirectoryError, PermissionError
from ._sluice import File, Future, Result, __version__

__all__ = [
    "Error",
    "File",
    "FileExistsError",
    "FileNotFoundError",
    "Future",
    "IsADirectoryError",
    "PermissionError",
    "Result",
    "__version__",
]
