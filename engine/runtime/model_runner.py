"""One forward pass of a model over its paged KV: token runs in, the logits asked for out.

A `TokenRun` is some consecutive tokens of one sequence written at positions `start ..`
through its block table; it asks for the logits of its last `num_logits` tokens (one to
sample the next token, 1 + k to verify k draft tokens). The engine's step turns its
scheduled chunks into runs (`execute`); a draft model's proposer builds runs of its own
over its own KV store and block pool (`run`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from engine.attention.paged_attention import AttentionBatch, PagedAttention
from engine.core.kv_cache_manager import KVCacheManager
from engine.kv.slot_mapping import block_tables_tensor, slot_mapping_for
from engine.model.llama import LlamaModel
from engine.runtime.scheduler import ScheduledChunk


class NonFiniteLogits(ValueError):
    """The forward pass produced NaN or inf logits: no token can be chosen from them."""


@dataclass(frozen=True)
class TokenRun:
    block_ids: list[int]
    start: int  # position of token_ids[0]
    token_ids: list[int]
    num_logits: int  # logits of the last num_logits tokens (0: none)


class ModelRunner:
    def __init__(self, model: LlamaModel, attention: PagedAttention, kv_manager: KVCacheManager) -> None:
        self.model, self.attention, self.kv_manager = model, attention, kv_manager

    @staticmethod
    def order(chunks: Sequence[ScheduledChunk]) -> list[ScheduledChunk]:
        """Decode chunks (one token) first, then prefill chunks, each group in schedule order."""
        return [c for c in chunks if c.num_tokens == 1] + [c for c in chunks if c.num_tokens > 1]

    def execute(self, chunks: Sequence[ScheduledChunk]) -> dict[str, torch.Tensor]:
        """Run the chunks (already ordered by `order`); logits `[1 + num_spec_tokens, vocab]` per request
        whose chunk completes it: row i predicts the token after the chunk's (num_tokens - 1 - num_spec + i)th."""
        runs = []
        for chunk in chunks:
            request = chunk.request
            tokens = request.all_token_ids + request.spec_token_ids
            runs.append(
                TokenRun(
                    self.kv_manager.get_block_ids(request.request_id)[0],
                    chunk.start,
                    tokens[chunk.start : chunk.start + chunk.num_tokens],
                    1 + chunk.num_spec_tokens if chunk.completes_sequence else 0,
                )
            )
        logits = self.run(runs)
        return {chunk.request.request_id: rows for chunk, rows in zip(chunks, logits) if rows is not None}

    @torch.inference_mode()
    def run(self, runs: Sequence[TokenRun]) -> list[torch.Tensor | None]:
        """One forward pass over the runs (one-token runs first); per run its logits `[num_logits, vocab]`."""
        device = self.model.device
        block_size = self.attention.storage.block_size
        num_decode = 0
        while num_decode < len(runs) and len(runs[num_decode].token_ids) == 1:
            num_decode += 1
        if any(len(run.token_ids) == 1 for run in runs[num_decode:]) or any(not run.token_ids for run in runs):
            raise ValueError("token runs must be non-empty, one-token runs first")
        input_ids: list[int] = []
        positions: list[int] = []
        slots: list[torch.Tensor] = []
        for run in runs:
            input_ids += run.token_ids
            positions += range(run.start, run.start + len(run.token_ids))
            slots.append(slot_mapping_for(run.block_ids, run.start, len(run.token_ids), block_size))
        tables = [run.block_ids for run in runs]
        prefill = runs[num_decode:]
        seq_lens = [run.start + len(run.token_ids) for run in runs]
        query_start = [0]
        for run in prefill:
            query_start.append(query_start[-1] + len(run.token_ids))
        batch = AttentionBatch(
            num_decode=num_decode,
            decode_block_tables=block_tables_tensor(tables[:num_decode], device),
            decode_seq_lens=torch.tensor(seq_lens[:num_decode], dtype=torch.int32, device=device),
            prefill_block_tables=block_tables_tensor(tables[num_decode:], device),
            prefill_query_start=torch.tensor(query_start, dtype=torch.int32, device=device),
            prefill_seq_lens=torch.tensor(seq_lens[num_decode:], dtype=torch.int32, device=device),
            max_prefill_len=max((len(run.token_ids) for run in prefill), default=0),
            slot_mapping=torch.cat(slots).to(device),
        )
        hidden = self.model.forward(
            torch.tensor(input_ids, device=device),
            torch.tensor(positions, device=device),
            lambda layer, q, k, v: self.attention(layer, q, k, v, batch),
        )
        rows: list[int] = []
        offset = 0
        for run in runs:
            offset += len(run.token_ids)
            rows += range(offset - run.num_logits, offset)
        if not rows:
            return [None] * len(runs)
        logits = self.model.logits(hidden[torch.tensor(rows, device=device)])
        if not bool(torch.isfinite(logits).all()):
            # weights or hyperparameters that overflow: sampling would crash or argmax pick garbage
            raise NonFiniteLogits("the model computed non-finite logits (NaN or inf); its weights are unusable")
        out: list[torch.Tensor | None] = []
        taken = 0
        for run in runs:
            out.append(logits[taken : taken + run.num_logits] if run.num_logits else None)
            taken += run.num_logits
        return out
