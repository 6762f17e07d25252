"""The paged KV store: per layer, K and V tensors cut into fixed-size blocks, each of K and V in
its own cache format (so K can be q8_0 while V stays f16, as in llama.cpp).

Layout (the contract kernels and the model rely on):

- `storage.k[layer]` and `storage.v[layer]` have shape `[num_blocks, block_size, n_kv_heads, row]`:
  float formats in their dtype (row = head_dim), ggml formats as uint8 (row = the row's bytes,
  `engine.kv.formats`). Block 0 is the block manager's null block and holds no sequence's data.
- A token's *slot* is `block_id * block_size + offset` (`engine.kv.slot_mapping`); viewed flat,
  `k[layer].view(-1, n_kv_heads, row)[slot]` is that token's key.
- `write(layer, slot_mapping, k, v)` stores `k[i]`, `v[i]` (each `[n_kv_heads, head_dim]`) at slot
  `slot_mapping[i]`, encoded in the cache format; a slot of -1 means "padding, do not store".
- `gather(layer, block_table, num_tokens)` reads a sequence's first `num_tokens` tokens back as
  contiguous `[num_tokens, n_kv_heads, head_dim]` tensors (ggml formats decoded to float32).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from engine.core.limits import MAX_BLOCK_SIZE, MAX_NUM_BLOCKS, check_range, require_memory
from engine.kv.formats import KVCacheFormat, get_format
from engine.kv.slot_mapping import PAD_SLOT_ID, slot_mapping_for


def row_width(cache_format: KVCacheFormat | str, head_dim: int) -> int:
    """Elements of one cache row: head_dim for float formats, bytes for ggml formats."""
    return get_format(cache_format).row_width(head_dim)


def kv_cache_bytes(
    num_layers: int,
    num_blocks: int,
    block_size: int,
    n_kv_heads: int,
    head_dim: int,
    k_format: KVCacheFormat | str = "f16",
    v_format: KVCacheFormat | str = "f16",
) -> int:
    """Bytes of K and V storage for these sizes: what `KVCacheStorage` allocates, known before it does."""
    row_bytes = 0
    for cache_format in (get_format(k_format), get_format(v_format)):
        element = torch.empty((), dtype=cache_format.storage_dtype).element_size()
        row_bytes += cache_format.row_width(head_dim) * element
    return num_layers * num_blocks * block_size * n_kv_heads * row_bytes


class KVCacheStorage:
    """K and V storage for `num_layers` layers, `num_blocks` blocks of `block_size` tokens."""

    def __init__(
        self,
        num_layers: int,
        num_blocks: int,
        block_size: int,
        n_kv_heads: int,
        head_dim: int,
        k_format: KVCacheFormat | str = "f16",
        v_format: KVCacheFormat | str = "f16",
        device: torch.device | str = "cpu",
    ) -> None:
        for name, value in (
            ("num_layers", num_layers),
            ("num_blocks", num_blocks),
            ("block_size", block_size),
            ("n_kv_heads", n_kv_heads),
            ("head_dim", head_dim),
        ):
            if value < 1:
                raise ValueError(f"{name} must be positive, got {value}")
        check_range("block_size", block_size, 1, MAX_BLOCK_SIZE)
        check_range("num_blocks", num_blocks, 1, MAX_NUM_BLOCKS)
        needed = kv_cache_bytes(num_layers, num_blocks, block_size, n_kv_heads, head_dim, k_format, v_format)
        require_memory(needed, str(torch.device(device)), f"{num_blocks} blocks of {block_size} tokens")
        self.num_layers, self.num_blocks, self.block_size = num_layers, num_blocks, block_size
        self.n_kv_heads, self.head_dim = n_kv_heads, head_dim
        self.k_format, self.v_format = get_format(k_format), get_format(v_format)
        self.device = torch.device(device)
        self.k = [self._zeros(self.k_format) for _ in range(num_layers)]
        self.v = [self._zeros(self.v_format) for _ in range(num_layers)]

    def _zeros(self, cache_format: KVCacheFormat) -> torch.Tensor:
        shape = (self.num_blocks, self.block_size, self.n_kv_heads, cache_format.row_width(self.head_dim))
        return torch.zeros(shape, dtype=cache_format.storage_dtype, device=self.device)

    @property
    def num_slots(self) -> int:
        return self.num_blocks * self.block_size

    def bytes_per_block(self) -> int:
        """K and V bytes of one block across all layers."""
        per_layer = self.k[0][0].numel() * self.k[0].element_size() + self.v[0][0].numel() * self.v[0].element_size()
        return per_layer * self.num_layers

    def write(self, layer: int, slot_mapping: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        """Store token i's `k[i]` and `v[i]` at `slot_mapping[i]`; slots of -1 are skipped."""
        self._check_layer(layer)
        expected = (slot_mapping.shape[0], self.n_kv_heads, self.head_dim)
        if slot_mapping.dim() != 1:
            raise ValueError(f"slot_mapping must be 1-D, got shape {tuple(slot_mapping.shape)}")
        if tuple(k.shape) != expected or tuple(v.shape) != expected:
            raise ValueError(f"k and v must have shape {expected}, got {tuple(k.shape)} and {tuple(v.shape)}")
        slots = slot_mapping.to(device=self.device, dtype=torch.int64)
        keep = slots != PAD_SLOT_ID
        slots = slots[keep]
        if slots.numel() and (int(slots.min()) < 0 or int(slots.max()) >= self.num_slots):
            raise ValueError(f"slot out of range [0, {self.num_slots}): {slots.min().item()}..{slots.max().item()}")
        for cache, cache_format, values in ((self.k[layer], self.k_format, k), (self.v[layer], self.v_format, v)):
            rows = values[keep.to(values.device)].to(self.device)
            # every format encodes through `quantize`, so bf16 rounds as ggml does, NaNs included
            encoded = cache_format.quantize(rows).view(cache_format.storage_dtype)
            cache.view(-1, self.n_kv_heads, cache.shape[-1])[slots] = encoded

    def gather(
        self, layer: int, block_table: Sequence[int] | torch.Tensor, num_tokens: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """A sequence's first `num_tokens` keys and values, contiguous, `[num_tokens, n_kv_heads, head_dim]`."""
        self._check_layer(layer)
        table = torch.as_tensor(block_table, dtype=torch.int64).flatten()
        if table.numel() and (int(table.min()) < 0 or int(table.max()) >= self.num_blocks):
            raise ValueError(f"block id out of range [0, {self.num_blocks}) in block table")
        slots = slot_mapping_for(table.tolist(), 0, num_tokens, self.block_size).to(self.device)
        gathered = []
        for cache, cache_format in ((self.k[layer], self.k_format), (self.v[layer], self.v_format)):
            rows = cache.view(-1, self.n_kv_heads, cache.shape[-1])[slots]
            if cache_format.quantized:
                rows = cache_format.dequantize(rows, (num_tokens, self.n_kv_heads, self.head_dim))
            gathered.append(rows)
        return gathered[0], gathered[1]

    def _check_layer(self, layer: int) -> None:
        if not 0 <= layer < self.num_layers:
            raise ValueError(f"layer {layer} out of range [0, {self.num_layers})")
