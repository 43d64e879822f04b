"""Type stubs of the extension module sluice._sluice (python/src/)."""

import os
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

__version__: str

Buffer = Any  # NumPy array, PyTorch tensor, CuPy array, bytearray, memoryview, ...: docs/python.md
Device = Union[None, str, int, Any]  # None, "cpu", "sim", "cuda", "cuda:N", ("pinned", "auto", an int N: load), a torch.device


class Result:
    """What a transfer did: bytes moved, the path they took and why."""

    @property
    def bytes(self) -> int: ...
    @property
    def path(self) -> str: ...
    @property
    def reason(self) -> str: ...
    @property
    def seconds(self) -> float: ...
    @property
    def ios(self) -> int: ...
    @property
    def cached_bytes(self) -> int: ...


class Future:
    """A transfer in flight; dropping it waits for the transfer."""

    def result(self, timeout: Optional[float] = None) -> Result: ...
    def done(self) -> bool: ...


class File:
    """A file open for transfers; a context manager."""

    def __init__(self, path: str, mode: str = "r", *, direct: bool = True) -> None: ...
    @property
    def path(self) -> str: ...
    @property
    def mode(self) -> str: ...
    @property
    def size(self) -> int: ...
    @property
    def closed(self) -> bool: ...
    @property
    def direct(self) -> bool: ...
    @property
    def direct_reason(self) -> str: ...
    @property
    def filesystem(self) -> str: ...
    def fileno(self) -> int: ...
    def close(self) -> None: ...
    def __enter__(self) -> "File": ...
    def __exit__(self, *args: Any) -> None: ...
    def read(self, buf: Buffer, offset: int = 0, size: Optional[int] = None, *, device: Device = None,
             path: Optional[str] = None) -> Result: ...
    def write(self, buf: Buffer, offset: int = 0, size: Optional[int] = None, *, device: Device = None,
              path: Optional[str] = None) -> Result: ...
    def read_async(self, buf: Buffer, offset: int = 0, size: Optional[int] = None, *,
                   device: Device = None, path: Optional[str] = None) -> Future: ...
    def write_async(self, buf: Buffer, offset: int = 0, size: Optional[int] = None, *,
                    device: Device = None, path: Optional[str] = None) -> Future: ...


class RemoteFile:
    """A URL (http://, https://, s3://) open read-only; sluice.File returns one for a URL."""

    def __init__(self, path: str, mode: str = "r", *, direct: bool = True) -> None: ...
    @property
    def path(self) -> str: ...
    @property
    def mode(self) -> str: ...
    @property
    def size(self) -> int: ...
    @property
    def closed(self) -> bool: ...
    @property
    def reason(self) -> str: ...
    def close(self) -> None: ...
    def __enter__(self) -> "RemoteFile": ...
    def __exit__(self, *args: Any) -> None: ...
    def read(self, buf: Buffer, offset: int = 0, size: Optional[int] = None) -> Result: ...
    def write(self, buf: Buffer, offset: int = 0, size: Optional[int] = None) -> Result: ...


PathLike = Union[str, "os.PathLike[str]"]


class Tensor:
    """One loaded tensor (sluice.load). Frameworks take it through DLPack without a copy
    (torch.from_dlpack, numpy.from_dlpack); the memory of its load is freed when the last tensor
    made from that load, sluice's or a framework's, goes."""

    @property
    def name(self) -> str: ...
    @property
    def dtype(self) -> str:
        """The safetensors spelling ("F32", "BF16", "BOOL"; "C128"), or an .npy descr sluice has no
        name for ("|S5", ">i4")."""
    @property
    def shape(self) -> Tuple[int, ...]: ...
    @property
    def nbytes(self) -> int: ...
    @property
    def device(self) -> str:
        """"cpu", "pinned", "sim" or "cuda:N"."""
    @property
    def fortran_order(self) -> bool:
        """Whether the bytes are column-major (an .npy saved so); the DLPack strides say so."""
    def __dlpack__(self, stream: Optional[int] = None, *, max_version: Optional[Tuple[int, int]] = None,
                   dl_device: Optional[Tuple[int, int]] = None, copy: Optional[bool] = None) -> Any:
        """A "dltensor" capsule (unversioned DLManagedTensor). TypeError for a type DLPack cannot
        describe; BufferError for copy=True or another dl_device."""
    def __dlpack_device__(self) -> Tuple[int, int]:
        """(1, 0) for host and sim memory (kDLCPU), (2, N) for cuda:N (kDLCUDA)."""
    def view_bytes(self) -> "Tensor":
        """The tensor's bytes as a 1-d "U8" Tensor on the same memory."""
    def _host_bytes(self) -> Any:
        """The bytes of host memory as a writable buffer (numpy.frombuffer); BufferError for CUDA."""


def load(paths: Union[PathLike, Sequence[PathLike]], device: Device = "cpu", *,
         tensors: Union[None, str, Sequence[str]] = None, rank: Optional[int] = None,
         world: Optional[int] = None, host_load: str = "auto") -> Dict[str, Tensor]:
    """Loads safetensors/.npy files, a sharded checkpoint's index JSON or a folder into `device`
    ("cpu", "pinned", "sim", "auto", "cuda", "cuda:N", an int N, a torch.device): {name: Tensor}.
    `tensors`: names to load (None: all). `rank`/`world`: this process's share (both or neither;
    None: everything). `host_load` ("cpu" only): "auto" (a private copy-on-write mapping of the
    file where the page cache holds it, else a read), "read" (a copy), "mapped".
    docs/python.md, "Loading tensors"."""


def last_load_report() -> Optional[Result]:
    """The Result of this thread's last successful load (bytes, seconds, path, reason, ios, cached_bytes);
    None before the first."""


def loaded_bytes_in_use() -> int:
    """Bytes of memory that live loads of this process hold, until the last tensor of each load
    (sluice's or a framework's) is gone."""


class _Checkpoint:
    """Opened tensor files, every header checked (behind sluice.safe_open)."""

    def __init__(self, paths: Union[PathLike, Sequence[PathLike]]) -> None: ...
    def keys(self) -> List[str]: ...
    def metadata(self) -> Optional[Dict[str, str]]: ...
    def load(self, device: Device = "cpu", *, tensors: Union[None, str, Sequence[str]] = None,
             rank: Optional[int] = None, world: Optional[int] = None,
             host_load: str = "auto") -> Dict[str, Tensor]: ...
    def describe(self, name: str) -> Tuple[str, Tuple[int, ...], bool, int]:
        """(dtype, shape, fortran_order, bits per element) of tensor `name`; ValueError when none."""
    def load_part(self, name: str, first: int, count: int, device: Device = "cpu",
                  host_load: str = "auto") -> Tensor:
        """Elements [first, first + count) of tensor `name`, in storage order, as a 1-d Tensor on
        `device`: only their bytes are read."""


def last_save_report() -> Optional[Result]:
    """The Result of this thread's last successful save (bytes written, seconds, path, reason, ios);
    None before the first."""


SaveEntry = Tuple[str, str, Sequence[int], Buffer]
ShardEntry = Tuple[str, int, int]


def _save_safetensors(path: str, tensors: Sequence[SaveEntry], metadata: Optional[Dict[str, str]] = None,
                      device: Optional[str] = None) -> Result:
    """Saves [(name, safetensors dtype, shape, buffer)] as one safetensors file, atomically."""


def _plan_shards(entries: Sequence[ShardEntry],
                 max_shard_bytes: int, tag: str = "") -> Tuple[List[Tuple[str, int, List[str], int]], str, int]: ...
def _begin_checkpoint(directory: str, entries: Sequence[ShardEntry], max_shard_bytes: int) -> bool: ...
def _save_shards(directory: str, entries: Sequence[ShardEntry], max_shard_bytes: int, rank: int,
                 tensors: Sequence[SaveEntry], metadata: Optional[Dict[str, str]] = None,
                 device: Optional[str] = None, tag: str = "") -> List[str]: ...
def _finish_checkpoint(directory: str, entries: Sequence[ShardEntry], max_shard_bytes: int,
                       tag: str = "") -> None: ...


class _View:
    """A region of a batch with a type and shape, for DLPack consumers (no copy); each export
    keeps the batch's memory alive."""

    @property
    def shape(self) -> Tuple[int, ...]: ...
    @property
    def dtype(self) -> str: ...
    @property
    def data_ptr(self) -> int:
        """The address of its first byte."""
    def __dlpack__(self, stream: Optional[int] = None, *, max_version: Optional[Tuple[int, int]] = None,
                   dl_device: Optional[Tuple[int, int]] = None, copy: Optional[bool] = None) -> Any:
        """A "dltensor" capsule (unversioned DLManagedTensor); BufferError for copy=True or another
        dl_device, TypeError for a type without a DLPack code."""
    def __dlpack_device__(self) -> Tuple[int, int]:
        """(1, 0) for host and sim memory (kDLCPU), (2, N) for cuda:N (kDLCUDA)."""


class _Batch:
    """One batch of a sluice.data.Loader: its lease on the Loader's memory and what it holds."""

    @property
    def epoch(self) -> int: ...
    @property
    def step(self) -> int: ...
    @property
    def rank(self) -> int: ...
    @property
    def samples(self) -> List[int]: ...
    def ids(self) -> List[Union[int, str]]:
        """The --emit ids: ints (Megatron, npy) or "SHARD/KEY" (WebDataset)."""
    @property
    def nbytes(self) -> int: ...
    @property
    def data_ptr(self) -> int: ...
    @property
    def dtype(self) -> Optional[str]:
        """The safetensors spelling of the sample type; None for WebDataset."""
    @property
    def shape(self) -> Optional[List[int]]:
        """[samples, *sample shape]; None for WebDataset."""
    @property
    def fields(self) -> List[Tuple[str, int, List[int]]]:
        """(name, byte offset in the batch, B + 1 offsets within the field) per field."""
    def view(self, offset: int, shape: Sequence[int], dtype: str) -> _View:
        """`shape` elements of `dtype` at byte `offset`; ValueError past the batch's end."""
    def xxh3(self, i: int) -> int:
        """XXH3-64 of sample i's bytes as they landed."""


class _Loader:
    """sluice::Loader over a Dataset; sluice.data.Loader is the public class."""

    def __init__(self, paths: Sequence[str], format: Optional[str], batch_size: int, seq_len: int, seed: int,
                 shuffle: bool, rank: int, world: int, device: Device, prefetch: int,
                 memory_budget: Union[int, str], drop_last: bool) -> None: ...
    def next(self) -> Optional[_Batch]:
        """The next batch of the epoch, or None at its end (the GIL released meanwhile)."""
    def set_epoch(self, epoch: int) -> None: ...
    def restore(self, state_json: str) -> None: ...
    def state(self) -> str: ...
    @property
    def epoch(self) -> int: ...
    @property
    def steps_per_epoch(self) -> int: ...
    def stats(self) -> Dict[str, Any]: ...
    def memory_in_use(self) -> int: ...
    def memory_high_water(self) -> int: ...
    def memory_reserved(self) -> int: ...
    @property
    def device(self) -> str: ...
    @property
    def format(self) -> str: ...
    @property
    def samples(self) -> int: ...
    def describe(self) -> str: ...
