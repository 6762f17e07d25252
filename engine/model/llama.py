"""A llama-architecture decoder in plain torch: RMSNorm, RoPE, GQA attention, SwiGLU.

Weights use GGUF's names and layouts (`token_embd.weight`, `blk.N.attn_q.weight`, ...);
each projection is `[out_features, in_features]`. RoPE rotates adjacent pairs
(2i, 2i + 1), ggml's "normal" mode for llama, which matches GGUF-converted q/k weights.

The model does not own a KV cache: `forward` calls `attend(layer, q, k, v)` with the
rotated q `[tokens, n_heads, head_dim]` and the new k, v `[tokens, n_kv_heads, head_dim]`,
and the caller stores and attends (paged in the engine, contiguous in the reference).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from dataclasses import dataclass

import torch

from engine.core.limits import MAX_CONTEXT
from engine.model.tokenizer import CHAR_VOCAB

AttendFn = Callable[[int, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


# Upper bounds that every released llama-family model sits well inside (today's largest: 256k-token
# vocabularies, 16k-wide embeddings, 53k-wide feed-forward layers, 126 layers, 128 heads of up to
# 256 dimensions, 10M-token contexts). A value past one is a damaged or hostile file; refusing it
# keeps every size computed from the config (weights, KV cache, RoPE tables) far from overflow.
INT_LIMITS: dict[str, int] = {
    "vocab_size": 2**22,
    "hidden_size": 2**16,
    "intermediate_size": 2**18,
    "num_layers": 2**10,
    "num_heads": 2**10,
    "num_kv_heads": 2**10,
    "head_dim": 2**10,
    "max_position": MAX_CONTEXT,
}
# RoPE bases in use run from 10^4 to 10^8; at or below 1 the rotation frequencies grow with the
# dimension instead of falling. RMS epsilons run from 1e-6 to 1e-5; 0 divides by zero on a zero row,
# and one near the mean square of a normalised row (about 1) washes the normalisation out.
ROPE_THETA_MAX = 1e12
RMS_EPS_MAX = 0.125  # exact in float32


class HyperparameterError(ValueError):
    """A config value out of range; `field` names the LlamaConfig field, so a loader can name its key."""

    def __init__(self, field: str, value: object, requirement: str) -> None:
        super().__init__(f"{field} is {value}; it must be {requirement}")
        self.field, self.value, self.requirement = field, value, requirement


@dataclass(frozen=True)
class LlamaConfig:
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rope_theta: float = 10000.0
    rms_eps: float = 1e-5
    max_position: int = 2048

    def __post_init__(self) -> None:
        for name, maximum in INT_LIMITS.items():
            value = getattr(self, name)
            if not 1 <= value <= maximum:
                raise HyperparameterError(name, value, f"in [1, {maximum}]")
        if self.num_heads % self.num_kv_heads:
            raise HyperparameterError(
                "num_kv_heads", self.num_kv_heads, f"a divisor of the head count {self.num_heads}"
            )
        if self.head_dim % 2:
            raise HyperparameterError("head_dim", self.head_dim, "even (RoPE rotates pairs)")
        # GGUF stores these as float32: keep (and judge) the float32 value, so configs survive a round
        # trip and an epsilon too small for float32 is seen as the 0 it becomes
        object.__setattr__(self, "rms_eps", _as_float32(self.rms_eps))
        object.__setattr__(self, "rope_theta", _as_float32(self.rope_theta))
        # NaN fails every comparison, so each range is written as what must hold
        if not (math.isfinite(self.rope_theta) and 1 < self.rope_theta <= ROPE_THETA_MAX):
            raise HyperparameterError("rope_theta", self.rope_theta, f"a finite number in (1, {ROPE_THETA_MAX:g}]")
        if not (math.isfinite(self.rms_eps) and 0 < self.rms_eps <= RMS_EPS_MAX):
            raise HyperparameterError("rms_eps", self.rms_eps, f"a finite number in (0, {RMS_EPS_MAX:g}]")

    def tensor_shapes(self) -> dict[str, tuple[int, ...]]:
        """Every weight's name and torch shape."""
        h, q, kv, ffn = (
            self.hidden_size,
            self.num_heads * self.head_dim,
            self.num_kv_heads * self.head_dim,
            self.intermediate_size,
        )
        shapes: dict[str, tuple[int, ...]] = {"token_embd.weight": (self.vocab_size, h)}
        for i in range(self.num_layers):
            shapes |= {
                f"blk.{i}.attn_norm.weight": (h,),
                f"blk.{i}.attn_q.weight": (q, h),
                f"blk.{i}.attn_k.weight": (kv, h),
                f"blk.{i}.attn_v.weight": (kv, h),
                f"blk.{i}.attn_output.weight": (h, q),
                f"blk.{i}.ffn_norm.weight": (h,),
                f"blk.{i}.ffn_gate.weight": (ffn, h),
                f"blk.{i}.ffn_up.weight": (ffn, h),
                f"blk.{i}.ffn_down.weight": (h, ffn),
            }
        shapes |= {"output_norm.weight": (h,), "output.weight": (self.vocab_size, h)}
        return shapes


def _as_float32(value: float) -> float:
    try:
        return struct.unpack("<f", struct.pack("<f", value))[0]
    except OverflowError:  # past float32's range: the infinity float32 would hold
        return math.copysign(math.inf, value)


TINY_CONFIG = LlamaConfig(
    vocab_size=len(CHAR_VOCAB),
    hidden_size=128,
    intermediate_size=256,
    num_layers=2,
    num_heads=4,
    num_kv_heads=2,
    head_dim=32,
    max_position=1024,
)
TINY_SEED = 1234


def random_weights(config: LlamaConfig, seed: int = TINY_SEED) -> dict[str, torch.Tensor]:
    """Seeded random weights: the same seed gives the same bits on every machine (CPU generator)."""
    gen = torch.Generator().manual_seed(seed)
    weights: dict[str, torch.Tensor] = {}
    for name, shape in config.tensor_shapes().items():
        if name.endswith("norm.weight"):
            weights[name] = 1.0 + 0.1 * torch.randn(shape, generator=gen)
        elif name == "token_embd.weight":
            weights[name] = torch.randn(shape, generator=gen)
        else:
            weights[name] = torch.randn(shape, generator=gen) * shape[1] ** -0.5
    return weights


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def apply_rope(x: torch.Tensor, positions: torch.Tensor, theta: float) -> torch.Tensor:
    """Rotate adjacent pairs of x `[tokens, heads, head_dim]` by position * theta^(-2i/head_dim)."""
    head_dim = x.shape[-1]
    inv_freq = theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float64, device=x.device) / head_dim)
    angles = (positions.to(torch.float64)[:, None] * inv_freq[None, :]).to(torch.float32)
    cos, sin = torch.cos(angles)[:, None, :], torch.sin(angles)[:, None, :]
    pairs = x.float().reshape(*x.shape[:-1], head_dim // 2, 2)
    even, odd = pairs[..., 0], pairs[..., 1]
    rotated = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)
    return rotated.reshape(x.shape).to(x.dtype)


class LlamaModel:
    def __init__(
        self, config: LlamaConfig, weights: dict[str, torch.Tensor], tokens: tuple[str, ...] | None = None
    ) -> None:
        expected = config.tensor_shapes()
        missing = sorted(set(expected) - set(weights))
        if missing:
            raise ValueError(f"missing weights: {', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}")
        for name, shape in expected.items():
            if tuple(weights[name].shape) != shape:
                raise ValueError(f"weight {name} has shape {tuple(weights[name].shape)}, expected {shape}")
        self.config = config
        self.weights = {name: weights[name].to(torch.float32).contiguous() for name in expected}
        self.tokens = tokens

    @classmethod
    def tiny(cls, seed: int = TINY_SEED) -> LlamaModel:
        """The embedded default: TINY_CONFIG with seeded random weights."""
        return cls(TINY_CONFIG, random_weights(TINY_CONFIG, seed), CHAR_VOCAB)

    def to(self, device: torch.device | str) -> LlamaModel:
        self.weights = {name: w.to(device) for name, w in self.weights.items()}
        return self

    @property
    def device(self) -> torch.device:
        return self.weights["token_embd.weight"].device

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor, attend: AttendFn) -> torch.Tensor:
        """Hidden states `[tokens, hidden]` after the final norm."""
        c, w = self.config, self.weights
        x = w["token_embd.weight"][input_ids]
        for i in range(c.num_layers):
            h = rms_norm(x, w[f"blk.{i}.attn_norm.weight"], c.rms_eps)
            q = (h @ w[f"blk.{i}.attn_q.weight"].T).view(-1, c.num_heads, c.head_dim)
            k = (h @ w[f"blk.{i}.attn_k.weight"].T).view(-1, c.num_kv_heads, c.head_dim)
            v = (h @ w[f"blk.{i}.attn_v.weight"].T).view(-1, c.num_kv_heads, c.head_dim)
            q, k = apply_rope(q, positions, c.rope_theta), apply_rope(k, positions, c.rope_theta)
            attn = attend(i, q, k, v).reshape(-1, c.num_heads * c.head_dim)
            x = x + attn @ w[f"blk.{i}.attn_output.weight"].T
            h = rms_norm(x, w[f"blk.{i}.ffn_norm.weight"], c.rms_eps)
            gate = torch.nn.functional.silu(h @ w[f"blk.{i}.ffn_gate.weight"].T)
            x = x + (gate * (h @ w[f"blk.{i}.ffn_up.weight"].T)) @ w[f"blk.{i}.ffn_down.weight"].T
        return rms_norm(x, w["output_norm.weight"], c.rms_eps)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return hidden @ self.weights["output.weight"].T
