"""Training batches from storage into GPU memory: ``sluice.data.Loader``.

    from sluice.data import Loader
    loader = Loader("/data/web_text_document", seq_len=2048, batch_size=8, device="cuda")
    for epoch in range(3):
        loader.set_epoch(epoch)
        for tokens in loader:           # torch.Tensor [8, 2049] of the token type, on cuda:N
            ...
    torch.save(loader.state_dict(), "loader.pt")   # resume exactly, on any world size

Megatron/NeMo indexed datasets (``PREFIX.bin`` + ``PREFIX.idx``), WebDataset ``.tar`` shards and
``.npy`` shards, shuffled by an order that depends only on (seed, epoch), this rank's share of
every global step, read ahead by the library's engine into a bounded memory budget, handed over
by DLPack with no copy. No worker processes: one native thread reads ahead. docs/ingest.md
("Python") has the rules; docs/ingest.md "Order and resume" the order and the state.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from . import _sluice

__all__ = ["Batch", "Loader", "rank_and_world"]

# Launchers' variables, in the order the library's detect_cluster_env() reads them
# (include/sluice/tools/cluster.hpp): (rank variable, world-size variables, only if this is set).
_LAUNCHERS = (
    ("OMPI_COMM_WORLD_RANK", ("OMPI_COMM_WORLD_SIZE",), None),
    ("PMIX_RANK", ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE"), None),
    ("PMI_RANK", ("PMI_SIZE",), None),
    ("SLURM_PROCID", ("SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"), "SLURM_STEP_ID"),
    ("RANK", ("WORLD_SIZE",), "WORLD_SIZE"),
)


def _env_int(env, name: str) -> int:
    text = env[name]
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"the launcher's variable {name}={text!r} is not a number") from None


def rank_and_world(environ=None) -> Tuple[int, int]:
    """This process's (rank, world) from the launcher's variables: Open MPI
    (OMPI_COMM_WORLD_RANK/SIZE), PMIx (PMIX_RANK), PMI/MPICH (PMI_RANK/PMI_SIZE), Slurm job steps
    (SLURM_PROCID with SLURM_STEP_NUM_TASKS or SLURM_NTASKS, only inside a step: SLURM_STEP_ID
    set) and torchrun (RANK/WORLD_SIZE), the first that is set; (0, 1) when none is.
    ValueError for a variable that is not a number or a rank outside the world."""
    env = os.environ if environ is None else environ
    for rank_var, size_vars, only_if in _LAUNCHERS:
        if only_if is not None and only_if not in env:
            continue
        if rank_var not in env:
            continue
        size_var = next((v for v in size_vars if v in env), None)
        if size_var is None:
            continue  # a rank without a world size is no position
        rank, world = _env_int(env, rank_var), _env_int(env, size_var)
        if world < 1 or not 0 <= rank < world:
            raise ValueError(f"the launcher says rank {rank} of {world} ({rank_var}, {size_var}), which cannot be")
        return rank, world
    return 0, 1


class Batch:
    """What the batch last handed out held: ``epoch``, ``step`` (global step within the epoch),
    ``rank``, ``samples`` (dataset indices, in batch order) and ``ids`` (integers for Megatron and
    npy, ``"SHARD/KEY"`` for WebDataset, as ``sluice ingest --emit`` writes them). It holds no
    memory of the batch (the tensors do); ``data_ptr`` is the address its bytes were at and
    ``nbytes`` their size."""

    __slots__ = ("epoch", "step", "rank", "samples", "ids", "nbytes", "data_ptr")

    def __init__(self, epoch: int, step: int, rank: int, samples: List[int], ids: List[Any], nbytes: int,
                 data_ptr: int):
        self.epoch = epoch
        self.step = step
        self.rank = rank
        self.samples = samples
        self.ids = ids
        self.nbytes = nbytes
        self.data_ptr = data_ptr

    def __repr__(self) -> str:
        return f"sluice.data.Batch(epoch={self.epoch}, step={self.step}, rank={self.rank}, samples={len(self.samples)})"


def _torch():
    import torch  # only when tensors are made: the Loader itself needs no PyTorch

    return torch


class Loader:
    """An iterable of training batches, one epoch per iteration, as torch tensors on ``device``
    (DLPack, no copy).

    ``paths``: Megatron prefixes (``PREFIX``, ``PREFIX.bin`` or ``PREFIX.idx``), WebDataset
    ``.tar`` shards or ``.npy`` shards, in order (a str or os.PathLike, or a list of them).
    ``format``: ``"megatron"``, ``"wds"`` or ``"npy"`` (None: told by the names). ``seq_len``:
    required for Megatron (samples of ``seq_len + 1`` tokens), refused otherwise. ``rank`` and
    ``world``: both or neither; None reads the launcher's variables (``rank_and_world()``).
    ``device``: ``"cuda"``, ``"cuda:N"``, an int N or a torch.device (device memory; no GPU is
    an error, never a fallback), ``"sim"`` (the simulated GPU), ``"pinned"`` or ``"cpu"`` (host
    memory). ``prefetch``: batches read ahead. ``memory_budget``: every byte the Loader holds
    (batches the consumer holds included), an int or ``"1G"``.

    Each batch is a torch.Tensor ``[B, seq_len + 1]`` of the token type (Megatron), ``[B, *row]``
    (npy), or for WebDataset a dict ``field -> (bytes, offsets)``: a uint8 tensor of the field's
    members packed back to back and a CPU int64 tensor of B + 1 offsets (sample i's bytes are
    ``bytes[offsets[i]:offsets[i+1]]``, empty where it lacks the field). A batch's memory goes
    back to the Loader when its last tensor goes; a consumer that holds every buffer of the
    budget and asks for more gets a ValueError at once.
    """

    def __init__(self, paths: Union[str, "os.PathLike[str]", Sequence[Union[str, "os.PathLike[str]"]]],
                 format: Optional[str] = None, batch_size: int = 1, seq_len: Optional[int] = None,
                 seed: int = 0, shuffle: bool = True, rank: Optional[int] = None,
                 world: Optional[int] = None, device: Any = "cuda", prefetch: int = 4,
                 memory_budget: Union[int, str] = "1G", drop_last: bool = True):
        if isinstance(paths, (list, tuple)):
            path_list = [os.fspath(p) for p in paths]
        else:
            path_list = [os.fspath(paths)]
        if not path_list:
            raise ValueError("paths is empty: give Megatron prefixes, .tar shards or .npy shards")
        if (rank is None) != (world is None):
            raise ValueError("rank and world go together (or neither: the launcher's variables)")
        if rank is None:
            rank, world = rank_and_world()
        if world < 1 or not 0 <= rank < world:
            raise ValueError(f"rank must be in [0, world): rank {rank}, world {world}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, not {batch_size}")
        if prefetch < 1:
            raise ValueError(f"prefetch must be at least 1, not {prefetch}")
        if seed < 0:
            raise ValueError(f"seed must be >= 0, not {seed}")
        if seq_len is not None and seq_len < 1:
            raise ValueError(f"seq_len must be at least 1, not {seq_len}")
        self._native = _sluice._Loader(path_list, format, int(batch_size), int(seq_len or 0), int(seed),
                                       bool(shuffle), int(rank), int(world), device, int(prefetch),
                                       memory_budget, bool(drop_last))
        self.batch_size = int(batch_size)
        self.rank = int(rank)
        self.world = int(world)
        self._finished = False
        self._last: Optional[Batch] = None

    # --- iteration -------------------------------------------------------------------------

    def __iter__(self) -> Iterator[Any]:
        """The rest of the current epoch (all of it after set_epoch or at the start); once an
        epoch has ended, iterating again starts the next one."""
        if self._finished:
            self.set_epoch(self._native.epoch + 1)
        while True:
            b = self._native.next()  # the GIL is released while it waits
            if b is None:
                self._finished = True
                return
            self._last = Batch(b.epoch, b.step, b.rank, b.samples, b.ids(), b.nbytes, b.data_ptr)
            yield self._tensors(b)

    def __len__(self) -> int:
        """Steps this rank takes in a whole epoch."""
        return int(self._native.steps_per_epoch)

    def _tensors(self, b: "_sluice._Batch") -> Any:
        if b.dtype is not None:  # fixed shape: one tensor
            return _as_torch(b, 0, list(b.shape), b.dtype)
        torch = _torch()
        out = {}
        for name, offset, offsets in b.fields:
            packed = _as_torch(b, offset, [offsets[-1]], "U8")
            out[name] = (packed, torch.tensor(offsets, dtype=torch.int64))
        return out

    @property
    def last_batch(self) -> Optional[Batch]:
        """The epoch, step, rank, sample indices and ids of the batch handed out last (None
        before the first)."""
        return self._last

    def set_epoch(self, epoch: int) -> None:
        """Starts epoch ``epoch`` from its first batch (reads ahead are discarded), as
        DistributedSampler.set_epoch: the order depends only on (seed, epoch)."""
        if epoch < 0:
            raise ValueError(f"epoch must be >= 0, not {epoch}")
        self._native.set_epoch(int(epoch))
        self._finished = False

    @property
    def epoch(self) -> int:
        """The epoch being read (or, once it ended, the one that ended)."""
        return int(self._native.epoch)

    # --- resume ----------------------------------------------------------------------------

    def state_dict(self) -> Dict[str, Any]:
        """Where the run stands, the same on every rank: ``{"format": "sluice-loader-state",
        "version": 1, "seed", "shuffle", "epoch", "consumed", "fingerprint"}`` (docs/ingest.md).
        After an epoch has ended: the next epoch at position 0."""
        state = json.loads(self._native.state())
        if self._finished:
            state["epoch"] = state["epoch"] + 1
            state["consumed"] = 0
        return state

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Continues from ``state``: the next batch is the one an uninterrupted run would have
        handed out next, with this Loader's world size (another one continues the same global
        order). ValueError for a state of other data (fingerprint) or a malformed one."""
        if not isinstance(state, dict):
            raise TypeError(f"state must be a dict (from state_dict()), not {type(state).__name__}")
        self._native.restore(json.dumps(state))
        self._finished = False
        self._last = None

    # --- figures ---------------------------------------------------------------------------

    def stats(self) -> Dict[str, Any]:
        """The figures of the steps handed out since the Loader was made or restored: steps,
        samples, bytes, dropped, wall_seconds, wait_seconds, wait_p50_seconds,
        wait_p99_seconds, stall_fraction, samples_per_second, bytes_per_second, path, reason,
        stall_cause (docs/ingest.md, "Reading the stall figures")."""
        return self._native.stats()

    def memory_in_use(self) -> int:
        """Bytes of the budget handed out now: batches not yet gone (their tensors alive, or
        queued) and staging of the batches being read."""
        return int(self._native.memory_in_use())

    def memory_high_water(self) -> int:
        """The most memory_in_use() has been."""
        return int(self._native.memory_high_water())

    def memory_reserved(self) -> int:
        """The regions allocated once, at most memory_budget."""
        return int(self._native.memory_reserved())

    @property
    def device(self) -> str:
        """Where the batches are: "cuda:N", "sim", "pinned" or "cpu"."""
        return self._native.device

    @property
    def format(self) -> str:
        """"megatron", "wds" or "npy"."""
        return self._native.format

    @property
    def num_samples(self) -> int:
        """Samples in the dataset (all ranks')."""
        return int(self._native.samples)

    def __repr__(self) -> str:
        return (f"sluice.data.Loader({self._native.describe()}; batch_size={self.batch_size}, "
                f"rank {self.rank} of {self.world}, device={self.device!r}, epoch {self.epoch})")


def _as_torch(b: "_sluice._Batch", offset: int, shape: List[int], dtype: str):
    """A torch.Tensor of ``shape`` and ``dtype`` at byte ``offset`` of batch ``b`` (no copy)."""
    torch = _torch()
    from .torch import _THROUGH_DLPACK, dtype_of

    if dtype in _THROUGH_DLPACK:
        return torch.from_dlpack(b.view(offset, shape, dtype))
    try:
        tdtype = dtype_of(dtype)
    except TypeError:
        signed = {"U16": "I16", "U32": "I32", "U64": "I64"}.get(dtype)
        if signed is None:
            raise
        tdtype = dtype_of(signed)
    count = 1
    for e in shape:
        count *= e
    nbytes = count * torch.empty((), dtype=tdtype).element_size()
    raw = torch.from_dlpack(b.view(offset, [nbytes], "U8"))
    return raw.view(tdtype).reshape(shape)
