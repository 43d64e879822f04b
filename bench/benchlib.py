"""What the Python benchmarks of bench/ share: sizes, and the page-cache states they set.

Each script imports it from its own folder (python3 bench/X.py puts bench/ on sys.path), and
bench/gpu-kit.sh carries it beside them.
"""

import os
import re
import sys

MiB = 1 << 20


def parse_size(text):
    """'2G' -> 2 GiB; K, M, G are powers of 1024; a bare number is bytes."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1].upper()] if text[-1].upper() in units else int(text)


def drop_cache(path):
    """Cold: the file's dirty pages written, then its pages dropped from the page cache."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fdatasync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def warm_cache(path):
    """Warm: the whole file read once through the page cache."""
    with open(path, "rb") as f:
        while f.read(64 * MiB):
            pass


def check_device(device):
    """sim, or cuda:N on a torch that has CUDA and that device: else exit with why."""
    if device == "sim":
        return
    me = os.path.basename(sys.argv[0])
    if device != "cuda" and not re.fullmatch(r"cuda:\d+", device):
        sys.exit(f"{me}: --device {device!r}: expected sim, cuda or cuda:N")
    import torch  # only the benchmarks that feed a device need it

    if not torch.cuda.is_available():
        sys.exit(f"{me}: --device {device}: torch {torch.__version__} has no CUDA "
                 f"(torch.cuda.is_available() is False; built for CUDA {torch.version.cuda})")
    index = torch.device(device).index or 0
    if index >= torch.cuda.device_count():
        sys.exit(f"{me}: --device {device}: torch sees {torch.cuda.device_count()} CUDA device(s)")
