"""The sizes the engine accepts, and the memory a machine has left to hold them.

Every size that turns into memory (blocks, block size, the KV bytes they imply) is checked
here before anything is allocated, so a hostile or mistyped size is one `ValueError` line,
never an allocator's traceback or the kernel's OOM killer.

Pure Python and torch-free for the host (the block manager and `python -m engine capacity`
use it); torch is imported only to ask a CUDA device for its free memory.
"""

from __future__ import annotations

import os
from pathlib import Path

MAX_CONTEXT = 2**24  # tokens in one sequence: past every released model's context (10M at most)
MAX_BLOCK_SIZE = 1024  # tokens per block: paging pays at 16..256; past this a block is a whole context
MAX_NUM_BLOCKS = 2**31 - 1  # block ids travel to the kernels in int32 block tables
# Host bytes the block manager keeps per block (a KVCacheBlock and its list slot): 120 measured
# with tracemalloc on CPython 3.11, rounded up.
BLOCK_BOOKKEEPING_BYTES = 128
# Host bytes per token id a request holds (its list slot, the int, its share of the block hashes):
# 61 to 69 measured the same way with prefix caching off and on, rounded up.
TOKEN_BOOKKEEPING_BYTES = 80
REQUEST_BOOKKEEPING_BYTES = 256  # a Request and its block list: 170 measured for a one-token request

_MEMINFO = Path("/proc/meminfo")
_CGROUP = Path("/proc/self/cgroup")
_CGROUP_ROOT = Path("/sys/fs/cgroup")


class InsufficientMemory(ValueError):
    """An allocation the device cannot hold; the message names what asked and how much is there."""


def check_range(name: str, value: int, minimum: int, maximum: int) -> None:
    """ValueError (one line naming NAME) unless minimum <= value <= maximum."""
    if not minimum <= value <= maximum:
        raise ValueError(f"{name} must be in [{minimum}, {maximum}], got {value}")


def format_bytes(num_bytes: int) -> str:
    if num_bytes < 1024:
        return f"{num_bytes} bytes"
    value = num_bytes / 1024
    for unit in ("KiB", "MiB", "GiB"):
        if value < 1024:
            return f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"


def available_memory(device: str = "cpu") -> int | None:
    """Bytes DEVICE can still hand out, or None where nothing tells: a CUDA device's free memory,
    else the host's (MemAvailable, lowered to what this process's cgroup v2 limit leaves)."""
    if device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            return None  # the allocation itself reports the missing device
        return int(torch.cuda.mem_get_info(torch.device(device))[0])
    host = _meminfo_available()
    cgroup = _cgroup_available()
    known = [n for n in (host, cgroup) if n is not None]
    return min(known) if known else None


def require_memory(num_bytes: int, device: str, what: str) -> None:
    """InsufficientMemory unless DEVICE has NUM_BYTES available for WHAT (named first in the message)."""
    available = available_memory(device)
    if available is not None and num_bytes > available:
        raise InsufficientMemory(
            f"{what}: {format_bytes(num_bytes)} needed, {device} has {format_bytes(available)} available"
        )


def _meminfo_available() -> int | None:
    try:
        for line in _MEMINFO.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:  # no /proc (macOS): physical memory, an upper bound
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


def _cgroup_available() -> int | None:
    """What the cgroup v2 memory limit of this process leaves (a container's limit), or None.

    The group's usage counts its page cache; inactive file pages are reclaimed before the OOM
    killer acts, so they count as free (the "working set" container runtimes report)."""
    try:
        entries = [line.split(":", 2) for line in _CGROUP.read_text().splitlines()]
        path = next(p for hierarchy, _, p in entries if hierarchy == "0")
        group = _CGROUP_ROOT / path.lstrip("/")
        limit = (group / "memory.max").read_text().strip()
        if limit == "max":
            return None
        stat = dict(line.split() for line in (group / "memory.stat").read_text().splitlines())
        working_set = int((group / "memory.current").read_text()) - int(stat.get("inactive_file", 0))
        return max(0, int(limit) - working_set)
    except (OSError, ValueError, StopIteration):
        return None
