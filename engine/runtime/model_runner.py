"""One engine step on the model: the scheduled chunks in, the completed sequences' logits out."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from engine.attention.paged_attention import AttentionBatch, PagedAttention
from engine.core.kv_cache_manager import KVCacheManager
from engine.kv.slot_mapping import block_tables_tensor, slot_mapping_for
from engine.model.llama import LlamaModel
from engine.runtime.scheduler import ScheduledChunk


class ModelRunner:
    def __init__(self, model: LlamaModel, attention: PagedAttention, kv_manager: KVCacheManager) -> None:
        self.model, self.attention, self.kv_manager = model, attention, kv_manager

    @staticmethod
    def order(chunks: Sequence[ScheduledChunk]) -> list[ScheduledChunk]:
        """Decode chunks (one token) first, then prefill chunks, each group in schedule order."""
        return [c for c in chunks if c.num_tokens == 1] + [c for c in chunks if c.num_tokens > 1]

    @torch.inference_mode()
    def execute(self, chunks: Sequence[ScheduledChunk]) -> dict[str, torch.Tensor]:
        """Run the chunks (already ordered by `order`); logits `[vocab]` per request whose chunk completes it."""
        device = self.model.device
        block_size = self.attention.storage.block_size
        input_ids: list[int] = []
        positions: list[int] = []
        slots: list[torch.Tensor] = []
        tables: list[list[int]] = []
        for chunk in chunks:
            request = chunk.request
            block_ids = self.kv_manager.get_block_ids(request.request_id)[0]
            input_ids += request.all_token_ids[chunk.start : chunk.start + chunk.num_tokens]
            positions += range(chunk.start, chunk.start + chunk.num_tokens)
            slots.append(slot_mapping_for(block_ids, chunk.start, chunk.num_tokens, block_size))
            tables.append(block_ids)
        num_decode = sum(1 for c in chunks if c.num_tokens == 1)
        prefill = chunks[num_decode:]
        seq_lens = [c.start + c.num_tokens for c in chunks]
        query_start = [0]
        for chunk in prefill:
            query_start.append(query_start[-1] + chunk.num_tokens)
        batch = AttentionBatch(
            num_decode=num_decode,
            decode_block_tables=block_tables_tensor(tables[:num_decode], device),
            decode_seq_lens=torch.tensor(seq_lens[:num_decode], dtype=torch.int32, device=device),
            prefill_block_tables=block_tables_tensor(tables[num_decode:], device),
            prefill_query_start=torch.tensor(query_start, dtype=torch.int32, device=device),
            prefill_seq_lens=torch.tensor(seq_lens[num_decode:], dtype=torch.int32, device=device),
            max_prefill_len=max((c.num_tokens for c in prefill), default=0),
            slot_mapping=torch.cat(slots).to(device),
        )
        hidden = self.model.forward(
            torch.tensor(input_ids, device=device),
            torch.tensor(positions, device=device),
            lambda layer, q, k, v: self.attention(layer, q, k, v, batch),
        )
        last_rows, names = [], []
        offset = 0
        for chunk in chunks:
            offset += chunk.num_tokens
            if chunk.completes_sequence:
                last_rows.append(offset - 1)
                names.append(chunk.request.request_id)
        if not names:
            return {}
        logits = self.model.logits(hidden[torch.tensor(last_rows, device=device)])
        return dict(zip(names, logits))
