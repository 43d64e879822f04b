"""What the Python benchmarks of bench/ share: sizes, and the page-cache states they set.

Each script imports it from its own folder (python3 bench/X.py puts bench/ on sys.path), and
bench/gpu-kit.sh carries it beside them.
"""

import os

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
