"""The contiguous-KV reference: the model run with each sequence's keys and values in
one contiguous tensor and plain causal softmax attention. Gate 0 compares the paged
engine against it, and the benchmark measures its decode speed as the baseline."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from engine.model.llama import LlamaModel


@dataclass
class ContiguousKV:
    """K/V of a batch of equal-length sequences: per layer `[batch, capacity, n_kv_heads, head_dim]`."""

    k: list[torch.Tensor]
    v: list[torch.Tensor]
    length: int = 0

    @classmethod
    def empty(cls, model: LlamaModel, batch: int, capacity: int) -> ContiguousKV:
        c = model.config
        shape = (batch, capacity, c.num_kv_heads, c.head_dim)
        return cls(
            [torch.zeros(shape, device=model.device) for _ in range(c.num_layers)],
            [torch.zeros(shape, device=model.device) for _ in range(c.num_layers)],
        )


@dataclass
class ContiguousRun:
    token_ids: list[list[int]]
    logits: list[list[torch.Tensor]] = field(default_factory=list)  # per sequence, one per generated token


def forward_contiguous(model: LlamaModel, cache: ContiguousKV, tokens: torch.Tensor) -> torch.Tensor:
    """tokens `[batch, n]` appended after `cache.length`; returns the last position's logits `[batch, vocab]`."""
    c = model.config
    batch, n = tokens.shape
    start = cache.length
    positions = torch.arange(start, start + n, device=model.device).repeat(batch)
    group = c.num_heads // c.num_kv_heads

    def attend(layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        cache.k[layer][:, start : start + n] = k.view(batch, n, c.num_kv_heads, c.head_dim)
        cache.v[layer][:, start : start + n] = v.view(batch, n, c.num_kv_heads, c.head_dim)
        keys = cache.k[layer][:, : start + n].repeat_interleave(group, dim=2).transpose(1, 2)
        values = cache.v[layer][:, : start + n].repeat_interleave(group, dim=2).transpose(1, 2)
        queries = q.view(batch, n, c.num_heads, c.head_dim).transpose(1, 2)
        mask = torch.ones(n, start + n, dtype=torch.bool, device=q.device).tril(diagonal=start)
        out = torch.nn.functional.scaled_dot_product_attention(
            queries, keys, values, attn_mask=mask, scale=c.head_dim**-0.5
        )
        return out.transpose(1, 2).reshape(batch * n, c.num_heads, c.head_dim)

    hidden = model.forward(tokens.reshape(-1), positions, attend).view(batch, n, -1)
    cache.length += n
    return model.logits(hidden[:, -1])


@torch.inference_mode()
def contiguous_greedy(model: LlamaModel, prompts: Sequence[Sequence[int]], max_tokens: int) -> ContiguousRun:
    """Greedy generation of `max_tokens` tokens for prompts of equal length, batched."""
    lengths = {len(p) for p in prompts}
    if len(lengths) != 1:
        raise ValueError("contiguous_greedy batches prompts of one length; run other lengths separately")
    cache = ContiguousKV.empty(model, len(prompts), lengths.pop() + max_tokens)
    tokens = torch.tensor([list(p) for p in prompts], device=model.device)
    run = ContiguousRun([[] for _ in prompts], [[] for _ in prompts])
    for _ in range(max_tokens):
        logits = forward_contiguous(model, cache, tokens)
        tokens = logits.argmax(dim=-1, keepdim=True)
        for i, row in enumerate(logits):
            run.token_ids[i].append(int(tokens[i]))
            run.logits[i].append(row.clone())
    return run
