"""Write new tokens' keys and values into the paged cache through a slot mapping.

Token i's K and V rows go to slot `slot_mapping[i]` (= block_id * block_size + offset);
slot -1 is padding and writes nothing. When the cache is quantized the rows are encoded
in the same kernel, so the float rows never round-trip through memory.

Cache tensors are `[num_blocks, block_size, n_kv_heads, row]`: float formats keep their
dtype with row = head_dim, ggml formats are uint8 with row = the row's bytes (see
`engine.kernels.kv_codec.row_width`).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from engine.kernels.kv_codec import format_code, row_width, store_row
from engine.kv.formats import KVCacheFormat, get_format, quantize


@triton.jit
def _store_kv_kernel(
    key_ptr,
    value_ptr,
    k_cache_ptr,
    v_cache_ptr,
    slot_mapping_ptr,
    stride_key_token,
    stride_key_head,
    stride_value_token,
    stride_value_head,
    N_KV_HEADS: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    K_ROW: tl.constexpr,
    V_ROW: tl.constexpr,
    K_FORMAT: tl.constexpr,
    V_FORMAT: tl.constexpr,
):
    token = tl.program_id(0)
    head = tl.program_id(1)
    slot = tl.load(slot_mapping_ptr + token).to(tl.int64)
    keep = (slot >= 0).to(tl.int32)
    store_row(
        k_cache_ptr,
        (slot * N_KV_HEADS + head) * K_ROW,
        key_ptr + token * stride_key_token + head * stride_key_head,
        keep,
        HEAD_DIM,
        K_FORMAT,
    )
    store_row(
        v_cache_ptr,
        (slot * N_KV_HEADS + head) * V_ROW,
        value_ptr + token * stride_value_token + head * stride_value_head,
        keep,
        HEAD_DIM,
        V_FORMAT,
    )


def _check(
    key: torch.Tensor, value: torch.Tensor, cache: torch.Tensor, qtype: KVCacheFormat | str, slot_mapping: torch.Tensor
) -> None:
    tokens, heads, head_dim = key.shape
    if value.shape != key.shape or slot_mapping.shape != (tokens,):
        raise ValueError(
            f"key {tuple(key.shape)}, value {tuple(value.shape)} and slot_mapping {tuple(slot_mapping.shape)} disagree"
        )
    if cache.dim() != 4 or cache.shape[2] != heads or cache.shape[3] != row_width(qtype, head_dim):
        raise ValueError(
            f"{get_format(qtype).name} cache of shape {tuple(cache.shape)}"
            f" cannot hold rows of {heads} heads x {head_dim}"
        )
    if not cache.is_contiguous():
        raise ValueError("the cache must be contiguous")


def store_kv(
    key: torch.Tensor,
    value: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
    k_type: KVCacheFormat | str,
    v_type: KVCacheFormat | str,
) -> None:
    """Triton: store `key`/`value` `[tokens, n_kv_heads, head_dim]` at their slots, encoding as needed."""
    _check(key, value, k_cache, k_type, slot_mapping)
    _check(value, key, v_cache, v_type, slot_mapping)
    tokens, heads, head_dim = key.shape
    if tokens == 0:
        return
    if key.stride(2) != 1 or value.stride(2) != 1:
        key, value = key.contiguous(), value.contiguous()
    _store_kv_kernel[(tokens, heads)](
        key,
        value,
        k_cache,
        v_cache,
        slot_mapping,
        key.stride(0),
        key.stride(1),
        value.stride(0),
        value.stride(1),
        N_KV_HEADS=heads,
        HEAD_DIM=head_dim,
        K_ROW=k_cache.shape[3],
        V_ROW=v_cache.shape[3],
        K_FORMAT=format_code(k_type),
        V_FORMAT=format_code(v_type),
    )


def store_kv_reference(
    key: torch.Tensor,
    value: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
    k_type: KVCacheFormat | str,
    v_type: KVCacheFormat | str,
) -> None:
    """Plain torch: the same writes, encoding through `engine.kv.formats.quantize`."""
    _check(key, value, k_cache, k_type, slot_mapping)
    _check(value, key, v_cache, v_type, slot_mapping)
    keep = slot_mapping >= 0
    slots = slot_mapping[keep].to(torch.int64)
    for rows, cache, qtype in ((key[keep], k_cache, k_type), (value[keep], v_cache, v_type)):
        flat = cache.view(-1, cache.shape[2], cache.shape[3])
        if cache.dtype == torch.uint8:
            flat[slots] = quantize(rows, qtype).to(cache.device)
        elif get_format(qtype).name == "bf16":  # ggml's rounding, NaNs included
            flat[slots] = quantize(rows, qtype).view(torch.bfloat16).to(cache.device)
        else:
            flat[slots] = rows.to(cache.dtype)
