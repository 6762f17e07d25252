"""Draft and target KV caches must never share memory.

A draft writing its KV rows through its own block table into the target's tensors (or the
other way round) silently corrupts both: the block ids of two pools overlap. Each proposer
allocates its own `KVCacheStorage`; the engine checks, before the first step, that no draft
tensor overlaps a target tensor, so a future refactor that shares them fails at once.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

from engine.kv.storage import KVCacheStorage


def _byte_ranges(storage: KVCacheStorage) -> Iterator[tuple[torch.device, int, int]]:
    for tensor in (*storage.k, *storage.v):
        base = tensor.untyped_storage()
        yield tensor.device, base.data_ptr(), base.data_ptr() + base.nbytes()


def ensure_separate_kv(target: KVCacheStorage, draft: KVCacheStorage) -> None:
    """Raise ValueError if any draft KV tensor shares memory with a target KV tensor."""
    if draft is target:
        raise ValueError("the draft model and the target share one KV store; each needs its own")
    mine = list(_byte_ranges(target))
    for device, lo, hi in _byte_ranges(draft):
        for other_device, other_lo, other_hi in mine:
            if device == other_device and lo < other_hi and other_lo < hi:
                raise ValueError("a draft KV tensor shares memory with the target's KV store; each needs its own")
