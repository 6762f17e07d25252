"""Attention over the paged KV cache for one engine step, on the path the policy chose.

A step's tokens come decode-first: `num_decode` sequences with one new token each, then
the prefill chunks back to back. Every layer first stores the new K/V rows through the
slot mapping, then attends, so a chunk reads its own new rows and any prefix another
request of the same step has just written.

- Flash path: the paged kernels (`engine.kernels`), run by Triton ("triton") or by their
  plain-torch references with the same tiles and order ("torch").
- Non-flash path: each sequence's K/V gathered into contiguous float tensors and a
  materialized causal softmax (llama.cpp's path without flash attention); V must be a
  float format there.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.kernels import paged_decode, paged_prefill, store_kv
from engine.kv.storage import KVCacheStorage


@dataclass
class AttentionBatch:
    num_decode: int
    decode_block_tables: torch.Tensor  # int32 [num_decode, max_blocks]
    decode_seq_lens: torch.Tensor  # int32 [num_decode], new token included
    prefill_block_tables: torch.Tensor  # int32 [num_prefill, max_blocks]
    prefill_query_start: torch.Tensor  # int32 [num_prefill + 1], offsets into the prefill tokens
    prefill_seq_lens: torch.Tensor  # int32 [num_prefill], new tokens included
    max_prefill_len: int
    slot_mapping: torch.Tensor  # int64 [tokens]


class PagedAttention:
    def __init__(self, storage: KVCacheStorage, scale: float, flash_attn: bool, backend: str) -> None:
        if not flash_attn and storage.v_format.needs_flash_attn:
            raise ValueError(f"the non-flash path cannot read a quantized V cache ({storage.v_format.name})")
        self.storage, self.scale, self.flash_attn, self.backend = storage, scale, flash_attn, backend
        triton = backend == "triton"
        self._store = store_kv.store_kv if triton else store_kv.store_kv_reference
        self._decode = paged_decode.paged_decode_attention if triton else paged_decode.paged_decode_attention_reference
        self._prefill = (
            paged_prefill.paged_prefill_attention if triton else paged_prefill.paged_prefill_attention_reference
        )

    def __call__(
        self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, batch: AttentionBatch
    ) -> torch.Tensor:
        s = self.storage
        k_cache, v_cache = s.k[layer], s.v[layer]
        self._store(k, v, k_cache, v_cache, batch.slot_mapping, s.k_format, s.v_format)
        if not self.flash_attn:
            return self._gathered(q, k_cache, v_cache, batch)
        out = torch.empty_like(q)
        d = batch.num_decode
        if d:
            out[:d] = self._decode(
                q[:d],
                k_cache,
                v_cache,
                batch.decode_block_tables,
                batch.decode_seq_lens,
                self.scale,
                s.k_format,
                s.v_format,
            )
        if q.shape[0] > d:
            out[d:] = self._prefill(
                q[d:],
                k_cache,
                v_cache,
                batch.prefill_block_tables,
                batch.prefill_query_start,
                batch.prefill_seq_lens,
                self.scale,
                s.k_format,
                s.v_format,
                batch.max_prefill_len,
            )
        return out

    def _gathered(
        self, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, batch: AttentionBatch
    ) -> torch.Tensor:
        s = self.storage
        group = q.shape[1] // s.n_kv_heads
        sequences = [
            (batch.decode_block_tables[i], int(batch.decode_seq_lens[i]), i, i + 1) for i in range(batch.num_decode)
        ]
        starts = batch.prefill_query_start.tolist()
        for i, seq_len in enumerate(batch.prefill_seq_lens.tolist()):
            sequences.append(
                (batch.prefill_block_tables[i], seq_len, batch.num_decode + starts[i], batch.num_decode + starts[i + 1])
            )
        out = torch.empty_like(q)
        for table, seq_len, lo, hi in sequences:
            pos = torch.arange(seq_len, device=q.device)
            slots = table.to(torch.int64)[pos // s.block_size] * s.block_size + pos % s.block_size
            keys = paged_decode.gather_rows(k_cache, s.k_format, slots, s.head_dim).repeat_interleave(group, dim=1)
            values = paged_decode.gather_rows(v_cache, s.v_format, slots, s.head_dim).repeat_interleave(group, dim=1)
            scores = torch.einsum("qhd,khd->hqk", q[lo:hi].float(), keys) * self.scale
            q_pos = torch.arange(seq_len - (hi - lo), seq_len, device=q.device)
            scores = scores.masked_fill(pos[None, None, :] > q_pos[None, :, None], float("-inf"))
            out[lo:hi] = torch.einsum("hqk,khd->qhd", torch.softmax(scores, dim=-1), values).to(q.dtype)
        return out
