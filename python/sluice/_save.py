"""What sluice.torch and sluice.numpy share for saving: sizes as Hugging Face writes them
("5GB"), and the sharded save's sequence, alone or across the ranks of torch.distributed."""

from __future__ import annotations

import errno
import os
import re
import secrets

from . import _errors, _sluice

_URL_SCHEMES = ("http://", "https://", "s3://")


def _is_url(path) -> bool:
    """Whether ``path`` names a remote object: no folder to create or list (docs/remote.md)."""
    return isinstance(path, str) and path.startswith(_URL_SCHEMES)


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


def _distributed(group=None):
    """torch.distributed when ``group`` (None: the default group) has more than one rank, else None."""
    try:
        import torch.distributed as dist
    except ImportError:
        return None
    if dist.is_available() and dist.is_initialized() and dist.get_world_size(group) > 1:
        return dist
    return None


def owners(held, world):
    """``held``: per rank [(name, bytes)]. Per rank the names it writes: a name held by several ranks
    (replicated) goes to one of them, largest tensors first, each to its least-loaded holder (ties:
    the lowest rank), so every rank computes the same owners and the bytes written are balanced."""
    holders, size = {}, {}
    for r, part in enumerate(held):
        for name, nbytes in part:
            holders.setdefault(name, []).append(r)
            if size.setdefault(name, nbytes) != nbytes:
                raise ValueError(f"tensor {name!r} has {size[name]} bytes on one rank and {nbytes} on rank {r}")
    load, owner = [0] * world, {}
    for name in sorted(size, key=lambda n: (-size[n], n)):
        r = min(holders[name], key=lambda x: (load[x], x))
        owner[name] = r
        load[r] += size[name]
    return [[(n, b) for n, b in part if owner[n] == r] for r, part in enumerate(held)]


def _status(dist, group, world, rank, failure):
    """Every rank's failure (None: none), exchanged; raises on every rank the lowest rank's. A
    collective that fails (a rank died, the group's timeout) raises a sluice.Error at once."""
    from .distributed import _collective_failed, _raise_first

    failures = [None] * world
    try:
        dist.all_gather_object(failures, failure, group=group)
    except RuntimeError as e:
        raise _collective_failed(rank, e) from e
    _raise_first(failures)


def _failure(rank, e, what, path):
    from .distributed import _failure as account

    if not isinstance(e, _errors.Error):
        e = _errors.Error(getattr(e, "errno", None) or errno.EIO, str(e), path, op="save")
    if e.filename is None:
        e.filename = path
    return account(rank, e, what)


def _tag(directory, plan) -> str:
    """"" when no planned shard name exists in ``directory``, else 8 hex digits for new names, so
    that an index already there never names a file this save writes (docs/save.md)."""
    shards, index_file, _total = plan
    if not index_file or not any(os.path.exists(os.path.join(directory, f)) for f, *_ in shards):
        return ""
    while True:
        tag = secrets.token_hex(4)
        if not any(os.path.exists(os.path.join(directory, f[:-12] + "-" + tag + ".safetensors"))
                   for f, *_ in shards):
            return tag


def save_checkpoint(entries, directory, max_shard_size, metadata, device, group=None):
    """entries: this rank's [(name, dtype, shape, buffer)]. Returns the shard files this rank wrote.

    Alone, or under torch.distributed (``group``, None: the default group, with more than one
    rank): every rank gathers every rank's (name, bytes); a tensor several ranks hold is written by
    one owner (``owners``); rank 0 plans the shards and picks their names (new ones, tagged, when
    the folder holds a checkpoint); each rank writes its own shards, durable on return; a status
    exchange; rank 0 writes the index (atomic, durable) and then removes what the old checkpoint
    had; a status exchange. The old index stays until the new one replaces it, so a crash at any
    point leaves the previous checkpoint or the new one loadable (docs/save.md). An s3:// prefix
    cannot be listed for free names: rank 0 deletes the old index first (no checkpoint until the
    new index is uploaded, never a mix), each shard an upload that appears whole, the index last."""
    limit = parse_size(max_shard_size)
    directory = os.fspath(directory)
    mine = [(name, _nbytes(shape, buf)) for name, _, shape, buf in entries]
    dist = _distributed(group)
    rank, world = 0, 1
    if dist is not None:
        rank, world = dist.get_rank(group), dist.get_world_size(group)
    held = [mine]
    if dist is not None:
        held = [None] * world
        dist.all_gather_object(held, mine, group=group)
    plan_entries = [(n, b, r) for r, part in enumerate(owners(held, world)) for n, b in part]
    tag, failure = "", None
    if rank == 0:
        try:
            if _is_url(directory):
                _sluice._begin_checkpoint(directory, plan_entries, limit)
            else:
                os.makedirs(directory, exist_ok=True)
                tag = _tag(directory, _sluice._plan_shards(plan_entries, limit))
        except (OSError, _errors.Error) as e:
            failure = _failure(rank, e, "prepare the folder", directory)
    if dist is not None:
        got = [None] * world
        try:
            dist.all_gather_object(got, (tag, failure), group=group)
        except RuntimeError as e:
            from .distributed import _collective_failed

            raise _collective_failed(rank, e) from e
        tag = got[0][0]
        from .distributed import _raise_first

        _raise_first([f for _t, f in got])
    elif failure is not None:
        raise _errors.Error(failure[1], failure[2], failure[3], op="save")
    files, failure = [], None
    try:
        files = _sluice._save_shards(directory, plan_entries, limit, rank, entries, metadata, device, tag)
    except (OSError, _errors.Error) as e:
        if dist is None:
            raise
        failure = _failure(rank, e, "write its shards of", directory)
    if dist is not None:
        _status(dist, group, world, rank, failure)
    failure = None
    if rank == 0:
        try:
            _sluice._finish_checkpoint(directory, plan_entries, limit, tag)
        except (OSError, _errors.Error) as e:
            if dist is None:
                raise
            failure = _failure(rank, e, "write the index of", directory)
    if dist is not None:
        _status(dist, group, world, rank, failure)
    return files


def _nbytes(shape, buf) -> int:
    nbytes = getattr(buf, "nbytes", None)
    if nbytes is None:  # a PyTorch tensor of bytes
        nbytes = buf.numel() * buf.element_size()
    return int(nbytes)
