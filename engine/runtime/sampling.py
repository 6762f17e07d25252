"""Sampling parameters and the sampler: greedy, or seeded temperature/top-k/top-p sampling."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

MAX_SEED = 2**64 - 1  # torch.Generator.manual_seed takes 64 bits


@dataclass(frozen=True)
class SamplingParams:
    max_tokens: int = 32
    temperature: float = 0.0  # 0: greedy
    top_k: int = 0  # 0: all tokens
    top_p: float = 1.0
    seed: int | None = None  # per-request seed; same seed, same prompt -> same tokens
    ignore_eos: bool = False

    def __post_init__(self) -> None:
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")
        # NaN passes every comparison with a bound, so finiteness is asked first
        if not math.isfinite(self.temperature) or self.temperature < 0:
            raise ValueError(f"temperature must be a finite number >= 0, got {self.temperature}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0, got {self.top_k}")
        if not (math.isfinite(self.top_p) and 0 < self.top_p <= 1):
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.seed is not None and not 0 <= self.seed <= MAX_SEED:
            raise ValueError(f"seed must be in [0, 2**64 - 1], got {self.seed}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


def sampling_probs(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    """The distribution `sample` draws from for a `[vocab]` row (temperature, top-k, top-p), on the CPU.

    Speculative decoding's rejection sampler needs it explicitly: the target distribution it
    preserves is exactly this one. Not for greedy params (greedy has no distribution to sample).
    """
    logits = logits.float().cpu()
    # Shifted so the largest logit is 0, and the temperature kept a normal float32: a tiny temperature
    # then sends the others to -inf (greedy in the limit) instead of every logit to inf and softmax to NaN.
    scaled = (logits - logits.max()) / max(params.temperature, torch.finfo(torch.float32).tiny)
    if params.top_k:
        kth = torch.topk(scaled, min(params.top_k, scaled.numel())).values[-1]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    probs = torch.softmax(scaled, dim=-1)
    if params.top_p < 1:
        sorted_probs, order = torch.sort(probs, descending=True)
        drop = sorted_probs.cumsum(0) - sorted_probs > params.top_p  # keep the smallest set reaching top_p
        probs = probs.scatter(0, order[drop], 0.0)
        probs = probs / probs.sum()
    return probs


def sample(logits: torch.Tensor, params: SamplingParams, generator: torch.Generator | None) -> int:
    """One token from a `[vocab]` row of logits."""
    if params.greedy:
        return int(torch.argmax(logits))
    return int(torch.multinomial(sampling_probs(logits, params), 1, generator=generator))
