"""Sluice: bytes between files and GPU or host memory, saying which path they took and why.

    import numpy as np, sluice
    buf = np.empty(1 << 20, dtype=np.uint8)
    with sluice.File("data.bin") as f:
        r = f.read(buf, offset=0)
    print(r.bytes, r.path, r.reason)

``File.read``/``write`` take NumPy arrays, PyTorch tensors (CPU or CUDA), CuPy arrays, bytearrays
or anything with the buffer protocol, ``__cuda_array_interface__`` or ``__dlpack__``; the
``_async`` forms return a ``Future``. Every failure is a ``sluice.Error`` (an ``OSError``).

Tensor files (safetensors, .npy, sharded checkpoints, folders):

    tensors = sluice.load("model.safetensors", device="cuda:0")   # {name: sluice.Tensor}
    w = torch.from_dlpack(tensors["w"])                            # no copy
    print(sluice.last_load_report())                               # path, reason, bytes, seconds

and the drop-ins ``sluice.torch.load_file``, ``sluice.numpy.load_file`` and ``sluice.safe_open``
for safetensors' functions of those names. Saving: ``sluice.torch.save_file``,
``sluice.numpy.save_file`` (safetensors' drop-ins: atomic and durable) and
``sluice.torch.save_checkpoint`` (sharded, Hugging Face layout); ``sluice.last_save_report()``.
Training batches: ``sluice.data.Loader`` (docs/ingest.md, "Python"). docs/python.md has the
whole API, docs/save.md the save sequence.
"""

from . import data
from ._errors import Error, FileExistsError, FileNotFoundError, IsADirectoryError, PermissionError
from ._safe_open import SafeSlice, safe_open
from ._sluice import File, Future, RemoteFile, Result, Tensor, __version__, last_load_report, last_save_report, load
from ._sluice import loaded_bytes_in_use

__all__ = [
    "Error",
    "File",
    "FileExistsError",
    "FileNotFoundError",
    "Future",
    "RemoteFile",
    "IsADirectoryError",
    "PermissionError",
    "Result",
    "SafeSlice",
    "Tensor",
    "data",
    "__version__",
    "last_load_report",
    "last_save_report",
    "load",
    "loaded_bytes_in_use",
    "safe_open",
]
