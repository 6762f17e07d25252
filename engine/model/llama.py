"""A llama-architecture decoder in plain torch: RMSNorm, RoPE, GQA attention, SwiGLU.

Weights use GGUF's names and layouts (`token_embd.weight`, `blk.N.attn_q.weight`, ...);
each projection is `[out_features, in_features]`. RoPE rotates adjacent pairs
(2i, 2i + 1), ggml's "normal" mode for llama, which matches GGUF-converted q/k weights.

The model does not own a KV cache: `forward` calls `attend(layer, q, k, v)` with the
rotated q `[tokens, n_heads, head_dim]` and the new k, v `[tokens, n_kv_heads, head_dim]`,
and the caller stores and attends (paged in the engine, contiguous in the reference).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

import torch

from engine.model.tokenizer import CHAR_VOCAB

AttendFn = Callable[[int, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


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
        for name in (
            "vocab_size",
            "hidden_size",
            "intermediate_size",
            "num_layers",
            "num_heads",
            "num_kv_heads",
            "head_dim",
            "max_position",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"num_heads {self.num_heads} must be a multiple of num_kv_heads {self.num_kv_heads}")
        if self.head_dim % 2:
            raise ValueError(f"head_dim must be even for RoPE, got {self.head_dim}")
        # GGUF stores these as float32: keep the float32 value so configs survive a round trip
        object.__setattr__(self, "rms_eps", _as_float32(self.rms_eps))
        object.__setattr__(self, "rope_theta", _as_float32(self.rope_theta))

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
    return struct.unpack("<f", struct.pack("<f", value))[0]


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
