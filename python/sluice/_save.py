"""What sluice.torch and sluice.numpy share for saving: sizes as Hugging Face writes them
("5GB"), and the sharded save's sequence, alone or across the ranks of torch.distributed."""

from __future__ import annotations

import os
import re

from . import _sluice
from ._remote import is_remote_url

_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
          "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}


def parse_size(size) -> int:
    """Bytes of ``max_shard_size``: an int, or text as huggingface_hub reads it ("5GB" is 5 * 10**9,
    "5GiB" 5 * 2**30, "500MB", "100KB"). ValueError for anything else."""
    if isinstance(size, bool):
        raise TypeError("max_shard_size must be an int or a size like '5GB', not bool")
    if isinstance(size, int):
        if size < 1:
            raise ValueError(f"max_shard_size must be at least 1 byte, not {size}")
        return size
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]I?B|B)?\s*", str(size).upper())
    if m is None:
        raise ValueError(f"max_shard_size must be an int or a size like '5GB' or '500MiB', not {size!r}")
    n = int(float(m.group(1)) * _UNITS[m.group(2) or ""])
    if n < 1:
        raise ValueError(f"max_shard_size must be at least 1 byte, not {size!r}")
    return n


def _distributed():
    """torch.distributed when it is initialised with more than one rank, else None."""
    try:
        import torch.distributed as dist
    except ImportError:
        return None
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        return dist
    return None


def save_checkpoint(entries, directory, max_shard_size, metadata, device):
    """entries: this rank's [(name, dtype, shape, buffer)]. Returns the shard files this rank wrote.

    Alone: plan, remove the old index, write the shards, write the index. Under torch.distributed
    every rank gathers every rank's (name, bytes), so all compute the same plan; rank 0 removes
    the old index, a barrier; each rank writes its own shards (durable when the call returns), a
    barrier; rank 0 writes the index and removes stale shards, a barrier (docs/save.md). An s3://
    prefix takes the same sequence: each shard an upload that appears whole, the index last."""
    limit = parse_size(max_shard_size)
    directory = os.fspath(directory)
    mine = [(name, _nbytes(shape, buf), 0) for name, _, shape, buf in entries]
    dist = _distributed()
    rank = 0
    if dist is None:
        plan = mine
    else:
        rank = dist.get_rank()
        gathered = [None] * dist.get_world_size()
        dist.all_gather_object(gathered, [(n, b) for n, b, _ in mine])
        plan = [(n, b, r) for r, part in enumerate(gathered) for n, b in part]
    if not is_remote_url(directory):  # an s3:// prefix needs no folder
        os.makedirs(directory, exist_ok=True)
    if rank == 0:
        _sluice._begin_checkpoint(directory, plan, limit)
    if dist is not None:
        dist.barrier()
    files = _sluice._save_shards(directory, plan, limit, rank, entries, metadata, device)
    if dist is not None:
        dist.barrier()
    if rank == 0:
        _sluice._finish_checkpoint(directory, plan, limit)
    if dist is not None:
        dist.barrier()
    return files


def _nbytes(shape, buf) -> int:
    nbytes = getattr(buf, "nbytes", None)
    if nbytes is None:  # a PyTorch tensor of bytes
        nbytes = buf.numel() * buf.element_size()
    return int(nbytes)
