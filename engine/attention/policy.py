"""Whether attention runs the flash (fused, online-softmax) path, as llama.cpp decides it.

Rules:

- The mode is `auto`, `enabled` or `disabled`: from the API when given, else from the
  FLASH_ATTN environment variable, else `auto`. Any other string is an error that lists
  the valid ones; nothing defaults silently. KV cache type strings are checked the same way.
- A quantized V cache requires flash attention: the non-flash path multiplies by V as a
  plain float matrix.
- `enabled` on a setup without flash support is an error naming the cause.
- `disabled` with a quantized V cache is an error naming the cause.
- `auto` uses flash attention where it is supported. Where it is not, it turns it off;
  if the V cache was quantized, the KV cache falls back to f16 with one warning, and the
  engine keeps serving.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from engine.kv.formats import KVCacheFormat, get_format

FlashAttnMode = Literal["auto", "enabled", "disabled"]
FLASH_ATTN_MODES: tuple[str, ...] = ("auto", "enabled", "disabled")
FLASH_ATTN_ENV = "FLASH_ATTN"
AttentionBackend = Literal["triton", "torch"]
ATTENTION_BACKENDS: tuple[str, ...] = ("triton", "torch")
FALLBACK_KV_TYPE = "f16"


class AttentionConfigError(ValueError):
    """An attention setting that cannot be honoured; the message names the cause."""


@dataclass(frozen=True)
class FlashAttnSupport:
    supported: bool
    reason: str = ""  # why not, when unsupported


@dataclass(frozen=True)
class AttentionPlan:
    flash_attn: bool
    k_format: KVCacheFormat
    v_format: KVCacheFormat
    warning: str | None = None  # at most one, for the caller to log once


def parse_flash_attn_mode(value: str) -> FlashAttnMode:
    if value not in FLASH_ATTN_MODES:
        raise AttentionConfigError(
            f"unknown flash attention mode {value!r}; valid modes: {', '.join(FLASH_ATTN_MODES)}"
        )
    return value  # type: ignore[return-value]


def requested_flash_attn_mode(explicit: str | None = None, environ: Mapping[str, str] | None = None) -> FlashAttnMode:
    """The API value when given, else $FLASH_ATTN, else auto."""
    if explicit is not None:
        return parse_flash_attn_mode(explicit)
    env = os.environ if environ is None else environ
    if FLASH_ATTN_ENV in env:
        try:
            return parse_flash_attn_mode(env[FLASH_ATTN_ENV])
        except AttentionConfigError as exc:
            raise AttentionConfigError(f"{FLASH_ATTN_ENV}: {exc}") from None
    return "auto"


def flash_attention_support(
    head_dim: int, backend: str, device: str = "cpu", environ: Mapping[str, str] | None = None
) -> FlashAttnSupport:
    """Whether the paged kernels can run for this head size on this backend and device."""
    if backend not in ATTENTION_BACKENDS:
        raise AttentionConfigError(
            f"unknown attention backend {backend!r}; valid backends: {', '.join(ATTENTION_BACKENDS)}"
        )
    if head_dim < 16 or head_dim > 256 or head_dim & (head_dim - 1):
        return FlashAttnSupport(
            False, f"head_dim {head_dim} is not a power of two between 16 and 256, the paged kernels' tile"
        )
    if backend == "triton":
        env = os.environ if environ is None else environ
        interpreted = env.get("TRITON_INTERPRET", "0") not in ("", "0")
        if not device.startswith("cuda") and not interpreted:
            return FlashAttnSupport(
                False, f"the Triton backend needs a CUDA device or TRITON_INTERPRET=1, got device {device!r}"
            )
        try:
            import triton  # noqa: F401
        except ImportError:
            return FlashAttnSupport(False, "the Triton backend needs the triton package")
    return FlashAttnSupport(True)


def resolve_attention(mode: str, k_type: str, v_type: str, support: FlashAttnSupport) -> AttentionPlan:
    """Apply the rules above: the path to run and the KV types to store."""
    flash_mode = parse_flash_attn_mode(mode)
    # the cache types are resolved here, once; unknown names fail listing the valid ones
    k_format, v_format = get_format(k_type), get_format(v_type)
    if flash_mode == "enabled":
        if not support.supported:
            raise AttentionConfigError(f"flash attention is enabled but not supported here: {support.reason}")
        return AttentionPlan(True, k_format, v_format)
    if flash_mode == "disabled":
        if v_format.needs_flash_attn:
            raise AttentionConfigError(
                f"a quantized V cache ({v_format.name}) requires flash attention, but flash attention is disabled; "
                "use flash attention auto or enabled, or an f32/f16/bf16 V cache"
            )
        return AttentionPlan(False, k_format, v_format)
    if support.supported:
        return AttentionPlan(True, k_format, v_format)
    if v_format.needs_flash_attn:
        return AttentionPlan(
            False,
            get_format(FALLBACK_KV_TYPE),
            get_format(FALLBACK_KV_TYPE),
            warning=(
                f"flash attention is not supported here ({support.reason}); a quantized V cache ({v_format.name}) "
                f"needs it, so the KV cache falls back to {FALLBACK_KV_TYPE} (was K {k_format.name}, V {v_format.name})"
            ),
        )
    return AttentionPlan(False, k_format, v_format)
