"""Paged KV storage: per-layer K and V tensors cut into fixed-size blocks.

Layout (the contract kernels and the model rely on):

- `cache.k[layer]` and `cache.v[layer]` are tensors of shape
  `[num_blocks, block_size, n_kv_heads, head_dim]`; block 0 is the block manager's null
  block and holds no sequence's data.
- A token's *slot* is `block_id * block_size + offset`, where `offset` is its position
  modulo `block_size`. Viewed flat, `k[layer].view(-1, n_kv_heads, head_dim)[slot]` is that
  token's key.
- `write(layer, slot_mapping, k, v)` stores `k[i]`, `v[i]` (each `[n_kv_heads, head_dim]`)
  at slot `slot_mapping[i]`; a slot of -1 means "padding, do not store" (as in vLLM).
- `gather(layer, block_table, num_tokens)` reads a sequence's first `num_tokens` tokens
  back as contiguous `[num_tokens, n_kv_heads, head_dim]` tensors, following its block
  table (the block ids, in position order, from `KVCacheManager.get_block_ids`).
- `slot_mapping_for(block_ids, start_pos, num_tokens, block_size)` gives the slots of
  positions `start_pos .. start_pos + num_tokens - 1` of a sequence.
- `block_tables_tensor(tables)` pads a batch of block tables with the null block (0)
  into one int32 `[batch, max_blocks]` tensor, the shape paged-attention kernels take.

Example: with block_size 4 and block table [7, 2], position 5 lives in block 2 at offset 1,
slot 9.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

NULL_BLOCK_ID = 0
PAD_SLOT_ID = -1


def slot_mapping_for(block_ids: Sequence[int], start_pos: int, num_tokens: int, block_size: int) -> torch.Tensor:
    """int64 slots of positions `start_pos .. start_pos + num_tokens - 1` of one sequence."""
    if start_pos < 0 or num_tokens < 0:
        raise ValueError(f"start_pos and num_tokens must be >= 0, got {start_pos} and {num_tokens}")
    end = start_pos + num_tokens
    if end > len(block_ids) * block_size:
        raise ValueError(
            f"positions up to {end - 1} need {-(-end // block_size)} blocks, the table has {len(block_ids)}"
        )
    positions = torch.arange(start_pos, end, dtype=torch.int64)
    table = torch.as_tensor(list(block_ids), dtype=torch.int64)
    return table[positions // block_size] * block_size + positions % block_size


def block_tables_tensor(tables: Sequence[Sequence[int]], device: torch.device | str = "cpu") -> torch.Tensor:
    """A batch of block tables as one int32 tensor, short rows padded with the null block."""
    width = max((len(table) for table in tables), default=0)
    out = torch.full((len(tables), width), NULL_BLOCK_ID, dtype=torch.int32)
    for row, table in enumerate(tables):
        if table:
            out[row, : len(table)] = torch.as_tensor(list(table), dtype=torch.int32)
    return out.to(device)


class PagedKVCache:
    """K and V storage for `num_layers` layers, `num_blocks` blocks of `block_size` tokens."""

    def __init__(
        self,
        num_layers: int,
        num_blocks: int,
        block_size: int,
        n_kv_heads: int,
        head_dim: int,
        dtype: torch.dtype = torch.float32,
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
        self.num_layers = num_layers
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.n_kv_heads = n_kv_heads
        self.head_dim = head_dim
        self.dtype = dtype
        self.device = torch.device(device)
        shape = (num_blocks, block_size, n_kv_heads, head_dim)
        self.k: list[torch.Tensor] = [torch.zeros(shape, dtype=dtype, device=self.device) for _ in range(num_layers)]
        self.v: list[torch.Tensor] = [torch.zeros(shape, dtype=dtype, device=self.device) for _ in range(num_layers)]

    @property
    def num_slots(self) -> int:
        return self.num_blocks * self.block_size

    def bytes_per_block(self) -> int:
        """K and V bytes of one block across all layers."""
        element = torch.empty((), dtype=self.dtype).element_size()
        return 2 * self.num_layers * self.block_size * self.n_kv_heads * self.head_dim * element

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
        flat_k = self.k[layer].view(-1, self.n_kv_heads, self.head_dim)
        flat_v = self.v[layer].view(-1, self.n_kv_heads, self.head_dim)
        flat_k[slots] = k[keep.to(k.device)].to(dtype=self.dtype, device=self.device)
        flat_v[slots] = v[keep.to(v.device)].to(dtype=self.dtype, device=self.device)

    def gather(
        self, layer: int, block_table: Sequence[int] | torch.Tensor, num_tokens: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """A sequence's first `num_tokens` keys and values, contiguous, `[num_tokens, n_kv_heads, head_dim]`."""
        self._check_layer(layer)
        table = torch.as_tensor(block_table, dtype=torch.int64).flatten()
        if table.numel() and (int(table.min()) < 0 or int(table.max()) >= self.num_blocks):
            raise ValueError(f"block id out of range [0, {self.num_blocks}) in block table")
        slots = slot_mapping_for(table.tolist(), 0, num_tokens, self.block_size).to(self.device)
        flat_k = self.k[layer].view(-1, self.n_kv_heads, self.head_dim)
        flat_v = self.v[layer].view(-1, self.n_kv_heads, self.head_dim)
        return flat_k[slots], flat_v[slots]

    def _check_layer(self, layer: int) -> None:
        if not 0 <= layer < self.num_layers:
            raise ValueError(f"layer {layer} out of range [0, {self.num_layers})")
