"""Loading a checkpoint across the ranks of a ``torch.distributed`` group, each byte read from
storage once per node (``scope="node"``, the default) or once per job (``scope="job"``), then
moved to the other ranks that need it over the group's backend (gloo for CPU tensors, NCCL for
CUDA tensors).

    import torch.distributed as dist, sluice.distributed
    dist.init_process_group("gloo")
    state = sluice.distributed.load("model.safetensors", "cpu", None)   # None: the default group

``plan_fanout`` is the planner under it (libsluice's ``sluice::plan_fanout``): who reads which
byte range and which moves follow, the same on every rank. docs/scale.md, section 7.

Moves run in plan order, with this rank's reads started READ_AHEAD chunks ahead. Failures never
hang: a rank that cannot read makes every rank raise the same sluice.Error naming that rank, the
file and the range (a status exchange before the moves and one after them); a rank that dies makes
the others fail within the group's timeout (docs/scale.md, section 7). Saving once:
sluice.torch.save_checkpoint(..., group=...) (docs/save.md).
"""

from __future__ import annotations

import errno as _errno
import os
import socket

from . import _errors, _sluice

EXCHANGE_BUDGET = 64 * 1024 * 1024
"""Default largest read and move, in bytes: larger ranges are cut into chunks of this size."""

_last_report = None


def last_report():
    """What this process's last ``load`` did, or None: ``{"read_bytes"`` (from storage, as the
    reads reported them), ``"sent_bytes"`` (once per receiver), ``"received_bytes"``,
    ``"reads"``, ``"plan_amplification"`` (of the plan this rank computed: its node's with scope
    node, the job's with scope job)``}``."""
    return None if _last_report is None else dict(_last_report)


def plan_fanout(items, ranks, *, nodes=1, scope="node", exchange_budget=EXCHANGE_BUDGET,
                only_node=None) -> dict:
    """The fan-out plan. ``items``: ``(name, file_index, offset, bytes)`` per tensor; ``ranks``:
    ``(rank, node, needs)`` per rank, ``needs`` None for every item or ``{item index: [(offset,
    size), ...]}`` (byte ranges within the item). Returns ``{"reads": [(item, file_index, offset,
    file_offset, size, reader, group)], "moves": [(read index, "send" | "broadcast", source,
    [receivers])], "ranks": [(read, sent, received)] by rank id, "unique_bytes", "read_bytes",
    "amplification"}``. Bad input raises sluice.Error (a ValueError)."""
    return _sluice._plan_fanout(items, ranks, nodes, scope, exchange_budget, only_node)


def slice_ranges(rows, cols, element_bytes, part, world, *, columns=False) -> "list[tuple[int, int]]":
    """Byte ranges of part ``part`` of ``world`` of a row-major [rows, cols] tensor, split by rows
    (one range) or by columns (one range per row); part p holds [p*n//world, (p+1)*n//world)."""
    return _sluice._slice_ranges(rows, cols, element_bytes, part, world, columns)


def _index_ranges(name, shape, bits, index):
    """(byte ranges, result shape) of ``index`` in a C-ordered tensor: a slice of dimension 0
    (rows of any tensor), or (slice(None), slice) of a 2-d tensor (columns)."""
    if bits % 8:
        raise ValueError(f"{name}: a part of a tensor of {bits}-bit elements is not whole bytes")
    elem = bits // 8
    rows = shape[0] if shape else 1
    if isinstance(index, slice) and len(shape) >= 1:
        first, last, step = index.indices(rows)
        if step != 1:
            raise ValueError(f"{name}: a slice with a step is not supported")
        last = max(first, last)
        row_bytes = elem
        for d in shape[1:]:
            row_bytes *= d
        size = (last - first) * row_bytes
        return ([(first * row_bytes, size)] if size else []), (last - first, *shape[1:])
    if (isinstance(index, tuple) and len(index) == 2 and len(shape) == 2 and index[0] == slice(None)
            and isinstance(index[1], slice)):
        first, last, step = index[1].indices(shape[1])
        if step != 1:
            raise ValueError(f"{name}: a slice with a step is not supported")
        width = max(0, last - first) * elem
        ranges = [((r * shape[1] + first) * elem, width) for r in range(rows)] if width else []
        return ranges, (rows, max(0, last - first))
    raise ValueError(f"{name}: parts must return None, a slice of dimension 0, or (slice(None), slice) "
                     f"of a 2-d tensor, not {index!r}")


def _failure(rank, e, what):
    """A picklable account of this rank's failure ``e``: (rank, errno, message, file, offset, size, op)."""
    err = e.errno or _errno.EIO
    where = f" [offset {e.offset}, {e.length} bytes]" if e.offset is not None else ""
    reason = os.strerror(err) if getattr(e, "domain", "os") == "os" else str(e)
    message = f"rank {rank} could not {what} {e.filename}{where}: {reason} (errno {err})"
    return (rank, err, message, e.filename, e.offset, e.length, getattr(e, "op", ""))


def _raise_first(failures):
    """Raise, on every rank alike, the failure of the lowest failed rank (failures are exchanged)."""
    for f in failures:
        if f is not None:
            rank, err, message, filename, offset, length, op = f
            raise _errors.class_for(err)(err, message, filename, offset=offset, length=length, op=op)


def _collective_failed(rank, e):
    """A collective that raised (a rank died, or the group's timeout passed) as a sluice.Error."""
    text = str(e)
    err = _errno.ETIMEDOUT if "timed out" in text.lower() or "timeout" in text.lower() else _errno.ECONNRESET
    return _errors.Error(err, f"rank {rank}: a move of the load failed (another rank died or the group's "
                         f"timeout passed): {text}", None, op="fanout")


def _global(dist, group, rank):
    if group is None:
        return rank
    get = getattr(dist, "get_global_rank", None) or dist.distributed_c10d._get_global_rank
    return get(group, rank)


def _needs(table, parts, world):
    """Per rank: None (every tensor whole) or {item: ranges}, and per rank {item: result shape}."""
    needs, shapes = [], []
    for r in range(world):
        want, shape_of = {}, {}
        for i, (name, _path, _file, _offset, nbytes, _dtype, shape, fortran, bits) in enumerate(table):
            index = parts(name, tuple(shape), r, world) if parts is not None else None
            if index is None:
                want[i], shape_of[i] = ([(0, nbytes)] if nbytes else []), tuple(shape)
            elif fortran:
                raise ValueError(f"{name}: parts of a column-major (Fortran order) array are not supported")
            else:
                want[i], shape_of[i] = _index_ranges(name, list(shape), bits, index)
        needs.append(None if parts is None else want)
        shapes.append(shape_of)
    return needs, shapes


def load(paths, device="cpu", group=None, *, parts=None, scope="node", exchange_budget=EXCHANGE_BUDGET):
    """Every rank of ``group`` (None: the default group) gets the dict of torch tensors a single
    process gets from ``sluice.torch.load(paths, device)``, or with ``parts`` only its parts:
    ``parts(name, shape, rank, world)`` returns None (the whole tensor) or an index (a slice of
    dimension 0, or ``(slice(None), slice(a, b))`` of a 2-d tensor). Each byte is read from storage
    once per node (``scope="node"``) or once per job (``scope="job"``). Every rank must pass the
    same arguments; the call is collective."""
    import torch
    import torch.distributed as dist

    from .torch import dtype_of

    rank, world = dist.get_rank(group), dist.get_world_size(group)
    single = isinstance(paths, (str, bytes)) or hasattr(paths, "__fspath__")
    paths = [str(p) for p in ([paths] if single else paths)]
    try:
        table, failure = _sluice._fanout_items(paths), None
    except _errors.Error as e:
        table, failure = None, _failure(rank, e, "read the header of")
    names = [None] * world
    dist.all_gather_object(names, (socket.gethostname(), failure), group=group)
    _raise_first([f for _h, f in names])
    hosts = sorted({h for h, _f in names})
    nodes = [hosts.index(h) for h, _f in names]
    needs, shapes = _needs(table, parts, world)
    items = [(t[0], t[2], t[3], t[4]) for t in table]
    plan = plan_fanout(items, [(r, nodes[r], needs[r]) for r in range(world)], nodes=max(nodes) + 1,
                       scope=scope, exchange_budget=exchange_budget,
                       only_node=nodes[rank] if scope == "node" else None)
    # This rank's buffers: per needed item, its ranges packed in order (a row or column shard is
    # then the shard's own C-ordered bytes).
    mine = needs[rank]
    if mine is None:
        mine = {i: [(0, t[4])] if t[4] else [] for i, t in enumerate(table)}
    buffers, where, failure = {}, {}, None
    for i, ranges in mine.items():
        nbytes = sum(s for _o, s in ranges)
        try:
            buffers[i] = torch.empty(nbytes, dtype=torch.uint8, device=device)
        except (RuntimeError, MemoryError) as e:  # out of memory: told to every rank, not raised here
            failure = failure or (rank, _errno.ENOMEM, f"rank {rank} could not allocate {nbytes} bytes on "
                                  f"{device} for {table[i][0]} of {table[i][1]}: {e}", table[i][1],
                                  table[i][3], table[i][4], "allocate")
            buffers[i] = torch.empty(0, dtype=torch.uint8)
        packed, at = [], 0
        for o, s in ranges:
            packed.append((o, s, at))
            at += s
        where[i] = packed
    global _last_report
    _last_report = _run(plan, table, buffers, where, rank, group, dist, torch, device, failure)
    _last_report["plan_amplification"] = plan["amplification"]
    out = {}
    for i, buf in buffers.items():
        name, dtype, fortran = table[i][0], table[i][5], table[i][7]
        flat = buf.view(dtype_of(dtype))
        shape = shapes[rank][i]
        # Column-major bytes: the C-order array of the reversed shape, transposed (as sluice.torch).
        if fortran:
            out[name] = flat.reshape(shape[::-1]).permute(*reversed(range(len(shape))))
        else:
            out[name] = flat.reshape(shape)
    return out


def _view(buffers, where, item, offset, size):
    for o, s, at in where.get(item, ()):
        if o <= offset and offset + size <= o + s:
            return buffers[item][at + offset - o: at + offset - o + size]
    return None


READ_AHEAD = 2
"""Reads of this rank started ahead of the move in progress: reading chunk k+1 overlaps moving
chunk k, and at most READ_AHEAD + 1 chunks (each at most exchange_budget) are staged at once."""


class _Reads:
    """This rank's reads, started in plan order up to READ_AHEAD ahead of the one asked for."""

    def __init__(self, plan, table, buffers, where, rank, torch, device, report):
        self._mine = [k for k, r in enumerate(plan["reads"]) if r[5] == rank]
        self._position = {k: i for i, k in enumerate(self._mine)}
        self._plan, self._table, self._buffers, self._where = plan, table, buffers, where
        self._torch, self._device, self._report = torch, device, report
        self._files, self._started, self._next = {}, {}, 0
        self._rank, self.failure = rank, None

    def check(self):
        """Open the files of this rank's reads and check each read lies within its file, before any
        move: None, or this rank's failure (see _failure)."""
        for k in self._mine:
            item, _file, _offset, file_offset, size = self._plan["reads"][k][:5]
            path = self._table[item][1]
            try:
                if path not in self._files:
                    self._files[path] = _sluice.File(path)
                end = os.stat(path).st_size
            except _errors.Error as e:
                return _failure(self._rank, e, "open")
            except OSError as e:
                return _failure(self._rank, _errors.class_for(e.errno)(e.errno, str(e), path), "open")
            if file_offset + size > end:
                e = _errors.Error(_errno.EIO, "", path, offset=file_offset, length=size, op="read")
                failure = _failure(self._rank, e, "read")
                return failure[:2] + (failure[2].replace("Input/output error (errno 5)",
                                                         f"the file ends at byte {end}"),) + failure[3:]
        return None

    def _start(self, k):
        item, _file, offset, file_offset, size = self._plan["reads"][k][:5]
        buf = _view(self._buffers, self._where, item, offset, size)
        if buf is None:  # read to send on, not needed here
            buf = self._torch.empty(size, dtype=self._torch.uint8, device=self._device)
        if self.failure is not None:  # no more reads: the buffer only keeps the moves in step
            self._started[k] = (buf, None)
            return
        path = self._table[item][1]
        if path not in self._files:
            self._files[path] = _sluice.File(path)
        self._started[k] = (buf, self._files[path].read_async(buf, file_offset, size))

    def take(self, k):
        """The buffer of read k, its bytes in (unless this rank failed: then self.failure says why
        and the buffer goes on unfilled); starts the next reads of this rank first."""
        pos = self._position[k]
        while self._next < len(self._mine) and self._next <= pos + READ_AHEAD:
            self._start(self._mine[self._next])
            self._next += 1
        buf, future = self._started.pop(k)
        if future is None:
            return buf
        try:
            self._report["read_bytes"] += future.result().bytes
            self._report["reads"] += 1
        except _errors.Error as e:
            if self.failure is None:
                self.failure = _failure(self._rank, e, "read")
        return buf

    def close(self):
        for _buf, future in self._started.values():  # after an error: let every read finish
            try:
                if future is not None:
                    future.result()
            except Exception:  # noqa: BLE001 (the first error is the one raised)
                pass
        for f in self._files.values():
            f.close()


def _exchange(dist, group, world, failure):
    """Every rank's failure (None: none), on every rank."""
    failures = [None] * world
    dist.all_gather_object(failures, failure, group=group)
    return failures


def _run(plan, table, buffers, where, rank, group, dist, torch, device, failure=None):
    """The reads and moves, in plan order (the same on every rank, so the moves cannot deadlock).
    Failures: each rank checks its reads before the moves (one exchange); a read that fails later
    stops this rank's reads but not its part in the moves (their buffers go unfilled), and the
    exchange after the moves makes every rank raise it. A collective that fails (a dead rank, the
    group's timeout) raises at once."""
    moves = {m[0]: m for m in plan["moves"]}
    report = {"read_bytes": 0, "sent_bytes": 0, "received_bytes": 0, "reads": 0}
    world = dist.get_world_size(group)
    reads = _Reads(plan, table, buffers, where, rank, torch, device, report)
    try:
        try:
            failures = _exchange(dist, group, world, failure or reads.check())
            if not any(failures):
                _moves(plan, moves, buffers, where, rank, world, group, dist, reads, report)
                failures = _exchange(dist, group, world, reads.failure)
        except RuntimeError as e:  # gloo and NCCL raise RuntimeError (a dead peer, the timeout)
            raise _collective_failed(rank, e) from e
        _raise_first(failures)
    finally:
        reads.close()
    return report


def _moves(plan, moves, buffers, where, rank, world, group, dist, reads, report):
    for k, (item, _file, offset, _file_offset, size, reader, _group) in enumerate(plan["reads"]):
        move = moves.get(k)
        if reader == rank:
            buf = reads.take(k)
        elif move is not None and rank in move[3]:
            buf = _view(buffers, where, item, offset, size)
        else:
            continue
        if move is None:
            continue
        _, kind, source, receivers = move
        if rank == source:
            report["sent_bytes"] += size * len(receivers)
        else:
            report["received_bytes"] += size
        if kind == "broadcast" and len(receivers) + 1 == world:
            dist.broadcast(buf, src=_global(dist, group, source), group=group)
        elif rank == source:
            for w in [dist.isend(buf, dst=_global(dist, group, r), group=group) for r in receivers]:
                w.wait()
        else:
            dist.irecv(buf, src=_global(dist, group, source), group=group).wait()
