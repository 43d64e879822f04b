"""PyTorch tensors from and to sluice: ``sluice.torch.load_file`` and ``save_file``, drop-ins for
``safetensors.torch``'s, and ``save_checkpoint``, a sharded save in the Hugging Face layout.

    from sluice.torch import load_file      # was: from safetensors.torch import load_file
    state = load_file("model.safetensors", device="cuda:0")
    save_file(state, "model.safetensors")   # atomic and durable; from CUDA memory too
    save_checkpoint(model.state_dict(), "ckpt/", max_shard_size="5GB")

Each tensor comes from ``sluice.load`` through DLPack, without a copy. Types PyTorch cannot take
through DLPack in this version (BOOL; U16, U32, U64 and the F8 types where PyTorch has them) go as
their bytes, viewed as the type. A type this PyTorch lacks (the F8 types before 2.1, U16/U32/U64
before 2.3) raises TypeError.
"""

from __future__ import annotations

import torch as _torch  # PyTorch itself: imports are absolute
from torch.utils.dlpack import from_dlpack as _from_capsule

from . import _save, _sluice

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
    name = tensor.dtype
    if name in _THROUGH_DLPACK:
        # The capsule itself: torch.from_dlpack(tensor) would first ask __dlpack_device__ and
        # the current CUDA stream, which a loaded tensor does not need (its bytes are in place
        # when load() returns): 1.0 instead of 1.8 us a tensor, per tensor of every load_file.
        return _from_capsule(tensor.__dlpack__())
    try:
        dtype = dtype_of(name)
    except TypeError as e:
        raise TypeError(f"tensor {tensor.name!r}: {e}") from None
    shape = tuple(tensor.shape)
    flat = _torch.from_dlpack(tensor.view_bytes()).view(dtype)
    if not tensor.fortran_order:
        return flat.reshape(shape)
    # Column-major bytes: the C-order array of the reversed shape, transposed.
    return flat.reshape(shape[::-1]).permute(*reversed(range(len(shape))))


def _strided(flat: "_torch.Tensor", offset: int, shape, strides) -> "_torch.Tensor":
    """The elements of the 1-d ``flat`` at ``offset`` with ``shape`` and element ``strides``,
    contiguous: a view when they are all of ``flat`` in order, else a copy on its device."""
    view = flat.as_strided(shape, strides, flat.storage_offset() + offset)
    if view.is_contiguous() and view.numel() == flat.numel():
        return view
    return view.contiguous()


def load_file(filename, device="cpu", *, host_load="auto", group=None) -> "dict[str, _torch.Tensor]":
    """As ``safetensors.torch.load_file``: every tensor of ``filename`` on ``device`` ("cpu",
    "cuda", "cuda:N", an int N, a torch.device; also sluice's "sim" and "pinned"). On "cpu", where
    the page cache holds the file, the tensors view a private (copy-on-write) mapping of it as
    safetensors' do (``host_load``: "auto", "read" for a copy, "mapped"; docs/paths.md).

    ``group``: a torch.distributed process group, or "default" for the default group when it is
    initialised with more than one rank: every rank of it gets the same dict, each byte read from
    storage once per node (``sluice.distributed.load``; a collective call). None, or "default"
    without such a group, loads in this process alone."""
    if group is not None:
        group = _distributed_group(group)
    if group is not None:
        from . import distributed
        return distributed.load(filename, device, None if group == "default" else group)
    return {name: to_torch(t) for name, t in _sluice.load(filename, device, host_load=host_load).items()}


def _distributed_group(group):
    """``group`` as load_file takes it: "default" where the default group is initialised with more
    than one rank, None where it is not (a single process), the group itself otherwise."""
    if group != "default":
        return group
    import torch.distributed as dist
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        return "default"
    return None


def load(paths, device="cpu", *, tensors=None, rank=None, world=None,
         host_load="auto") -> "dict[str, _torch.Tensor]":
    """``sluice.load`` with torch.Tensor values: files, indexes and folders, a subset, a share."""
    loaded = _sluice.load(paths, device, tensors=tensors, rank=rank, world=world, host_load=host_load)
    return {name: to_torch(t) for name, t in loaded.items()}


_SAFETENSORS = {}  # torch.dtype -> safetensors name, for the types this PyTorch has
for _st, _name in _NAMES.items():  # C128: no safetensors type (loads from .npy only)
    if _st == "C128":
        continue
    if isinstance(getattr(_torch, _name, None), _torch.dtype):
        _SAFETENSORS[getattr(_torch, _name)] = _st


def _entries(tensors) -> list:
    """(name, safetensors dtype, shape, bytes) of each tensor: the bytes a uint8 view of it (a
    NumPy array for host memory, a CUDA tensor's own memory), no copy."""
    if not isinstance(tensors, dict):
        raise TypeError(f"tensors must be a dict of str to torch.Tensor, not {type(tensors).__name__}")
    out = []
    for name, t in tensors.items():
        if not isinstance(name, str):
            raise TypeError(f"tensor names must be str, not {type(name).__name__}: {name!r}")
        if not isinstance(t, _torch.Tensor):
            raise TypeError(f"tensor {name!r} is a {type(t).__name__}, not a torch.Tensor")
        if t.layout != _torch.strided:
            raise ValueError(f"tensor {name!r} is sparse ({t.layout}): save a dense tensor")
        if not t.is_contiguous():
            raise ValueError(f"You are trying to save a non contiguous tensor: {name!r}, which is not allowed. "
                             "Call .contiguous() before saving it.")
        st = _SAFETENSORS.get(t.dtype)
        if st is None:
            raise TypeError(f"tensor {name!r}: safetensors has no type for {t.dtype}")
        flat = t.detach().reshape(-1)
        if flat.dtype != _torch.uint8:
            flat = flat.view(_torch.uint8)
        buf = flat.numpy() if flat.device.type == "cpu" else flat
        out.append((name, st, list(t.shape), buf))
    return out


def _storage_ptr(t: "_torch.Tensor") -> int:
    """Where the storage under ``t`` starts (untyped_storage() since PyTorch 2.0)."""
    untyped = getattr(t, "untyped_storage", None)
    return untyped().data_ptr() if untyped is not None else t.storage().data_ptr()


def _shared(tensors) -> "list[list[str]]":
    """Groups of names whose tensors overlap in memory (the same storage, overlapping bytes), as
    safetensors finds them; tensors of no bytes share nothing."""
    by_storage = {}
    for name, t in tensors.items():
        if t.numel() > 0 and t.device.type != "meta":
            start = t.data_ptr()
            by_storage.setdefault((t.device, _storage_ptr(t)), []).append(
                (start, start + t.numel() * t.element_size(), name))
    groups = []
    for spans in by_storage.values():
        spans.sort()
        group, end = [], -1
        for start, stop, name in spans:
            if group and start < end:
                group.append(name)
            else:
                if len(group) > 1:
                    groups.append(group)
                group = [name]
            end = max(end, stop)
        if len(group) > 1:
            groups.append(group)
    return sorted(sorted(g) for g in groups)


def _device_text(device):
    return None if device is None else str(device)


def save_file(tensors, filename, metadata=None, *, device=None, group=None) -> None:
    """As ``safetensors.torch.save_file``: ``tensors`` ({name: contiguous torch.Tensor}) as the
    safetensors file ``filename``, with ``metadata`` ({str: str}) as its ``__metadata__``. The file
    appears complete or not at all, and is on stable storage when this returns. CUDA tensors go
    through the bounce path or GPUDirect; ``device="sim"`` says CPU tensors live on sluice's
    simulated GPU (loaded with device="sim"). sluice.last_save_report() says how. Tensors that
    share memory (tied weights) raise RuntimeError, as safetensors' save_file does: saved twice,
    they would load back as two tensors.

    With ``group`` (a torch.distributed process group, or "default"; more than one rank), every
    rank passes the same dict (names, dtypes, shapes: checked) and rank 0 alone writes the file;
    the others wait for its outcome, and every rank raises the same Error if it fails (docs/save.md,
    "One file from many ranks"). For writes in parallel, save_checkpoint with a group."""
    if group is not None:
        return _save_file_once(tensors, _os_path(filename), metadata, device, group)
    entries = _entries(tensors)
    shared = _shared(tensors)
    if shared:
        raise RuntimeError(f"Some tensors share memory, this would save their bytes twice and load them back as "
                           f"separate tensors: {shared}. Save one name of each group (and tie them again after "
                           "loading), or .clone() the others.")
    _sluice._save_safetensors(_os_path(filename), entries, metadata, _device_text(device))


def _save_file_once(tensors, filename, metadata, device, group):
    import torch.distributed as dist

    from . import _save

    group = _distributed_group(group)
    if group is None or _save._distributed(None if group == "default" else group) is None:
        return save_file(tensors, filename, metadata, device=device)
    group = None if group == "default" else group
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    layout = sorted((n, str(t.dtype), tuple(t.shape)) for n, t in tensors.items())
    layouts = [None] * world
    dist.all_gather_object(layouts, layout, group=group)
    for r, other in enumerate(layouts):
        if other != layouts[0]:
            raise ValueError(f"save_file with a group: rank {r} passes other tensors (names, dtypes or shapes) "
                             f"than rank 0; every rank must pass the same dict")
    failure = None
    if rank == 0:
        try:
            save_file(tensors, filename, metadata, device=device)
        except (OSError, ValueError, TypeError, RuntimeError) as e:
            failure = _save._failure(rank, e, "write", filename)
    _save._status(dist, group, world, rank, failure)


def save_checkpoint(state_dict, directory, max_shard_size="5GB", *, metadata=None, device=None,
                    group=None) -> "list[str]":
    """``state_dict`` as a sharded checkpoint in ``directory``: model-0000K-of-0000N.safetensors
    of at most ``max_shard_size`` each (an int or "5GB", "500MiB") and model.safetensors.index.json
    (one shard: model.safetensors alone), as Hugging Face's save_torch_state_dict lays it out;
    ``metadata`` defaults to {"format": "pt"}. Under torch.distributed (``group``; None: the default
    group when initialised) each rank passes the tensors it holds; a tensor several ranks hold
    (replicated) is written once, by one owner rank; each rank writes its own shards; rank 0
    writes the index once all are durable, so a crash leaves the previous checkpoint or the new
    one (docs/save.md). Returns the files this rank wrote."""
    meta = {"format": "pt"} if metadata is None else metadata
    if group == "default":
        group = None
    return _save.save_checkpoint(_entries(state_dict), directory, max_shard_size, meta, _device_text(device),
                                 group)


def _os_path(filename) -> str:
    import os

    return os.fspath(filename)
