"""Where tokens live in the paged KV store (`engine.kv.storage`): slots and block tables.

- A token's *slot* is `block_id * block_size + offset`, where `offset` is its position
  modulo `block_size`; a slot of -1 means "padding, do not store" (as in vLLM).
- A sequence's block table is its block ids, in position order, from `KVCacheManager.get_block_ids`.
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
