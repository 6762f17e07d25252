"""The KV cache's memory: per layer, K and V blocks in the chosen cache formats.

Layout as in `engine.kv.slot_mapping` — `[num_blocks, block_size, n_kv_heads, row]`, slot =
block_id * block_size + offset, block 0 the null block — with each of K and V in its own
format (`engine.kv.formats`): float formats in their dtype (row = head_dim), ggml formats as
uint8 (row = the row's bytes), so that K can be q8_0 while V stays f16, as in llama.cpp.
"""

from __future__ import annotations

import torch

from engine.kv.formats import get_format

FLOAT_DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


def row_width(qtype: str, head_dim: int) -> int:
    """Elements of one cache row: head_dim for float formats, bytes for ggml formats."""
    fmt = get_format(qtype)
    return fmt.row_bytes(head_dim) if fmt.quantized else head_dim


def storage_dtype(qtype: str) -> torch.dtype:
    return torch.uint8 if get_format(qtype).quantized else FLOAT_DTYPES[qtype]


class KVCacheStorage:
    def __init__(
        self,
        num_layers: int,
        num_blocks: int,
        block_size: int,
        n_kv_heads: int,
        head_dim: int,
        k_type: str = "f16",
        v_type: str = "f16",
        device: torch.device | str = "cpu",
    ) -> None:
        self.num_layers, self.num_blocks, self.block_size = num_layers, num_blocks, block_size
        self.n_kv_heads, self.head_dim = n_kv_heads, head_dim
        self.k_type, self.v_type = k_type, v_type
        k_shape = (num_blocks, block_size, n_kv_heads, row_width(k_type, head_dim))
        v_shape = (num_blocks, block_size, n_kv_heads, row_width(v_type, head_dim))
        self.k = [torch.zeros(k_shape, dtype=storage_dtype(k_type), device=device) for _ in range(num_layers)]
        self.v = [torch.zeros(v_shape, dtype=storage_dtype(v_type), device=device) for _ in range(num_layers)]

    def bytes_per_block(self) -> int:
        per_layer = self.k[0][0].numel() * self.k[0].element_size() + self.v[0][0].numel() * self.v[0].element_size()
        return per_layer * self.num_layers
