"""KV cache formats: `KVCacheFormat` (one per cache type) and ggml block quantization of KV-cache
rows, byte-identical to gguf-py's `gguf.quants`.

Every quantized format cuts a row into blocks of 32 values and stores each block as a
little-endian fp16 scale `d` (and, for the `_1` formats, an fp16 minimum `m`) followed by
packed integers:

    format  bytes  layout                           value
    q8_0    34     d, int8 q[32]                    d * q
    q4_0    18     d, nibbles[16]                   d * (q - 8)
    q4_1    20     d, m, nibbles[16]                d * q + m
    q5_0    22     d, qh (uint32), nibbles[16]      d * (q - 16)
    q5_1    24     d, m, qh (uint32), nibbles[16]   d * q + m

Nibble byte `i` holds value `i` in its low half and value `i + 16` in its high half; bit
`j` of `qh` is the fifth bit of value `j`. `f32`, `f16` and `bf16` store each value on its
own, as raw little-endian bytes here so that every format has one uint8 representation.

Arithmetic follows the installed gguf-py (0.19) step by step, in float32. Its q4_0 and
q5_0 code rounds `x * id` and `+ 8.5` (or `+ 16.5`) separately, each in float32, and so
does this module; ggml's C code may fuse them into one multiply-add, which a float64
emulation would mimic, and which would differ from this only in the last bit of rare
ties. The tests pin byte-identity to the installed gguf-py, with one exception: the sign of
a q4_1/q5_1 minimum `m` that is exactly zero is unspecified (gguf-py takes numpy's min,
which returns -0.0 or +0.0 depending on positions and its SIMD path; both give the same
values d * q + m). Casts to integers that are
undefined in C (NaN and infinities, reached only when a block's scale is zero-like or
infinite) give 0, as numpy does on x86-64.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

QK = 32  # values per ggml block of the legacy formats
_BYTE_SHIFTS = torch.tensor([0, 8, 16, 24], dtype=torch.int64)


FLOAT_DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


@dataclass(frozen=True)
class KVCacheFormat:
    """A KV cache type (llama.cpp's `--cache-type-k/-v`), resolved once from its name and passed around."""

    name: str
    block_size: int  # values per block
    type_size: int  # bytes per block
    quantized: bool

    @property
    def needs_flash_attn(self) -> bool:
        """As the V cache: llama.cpp reads a quantized V cache only on its flash-attention path."""
        return self.quantized

    @property
    def storage_dtype(self) -> torch.dtype:
        """Float formats are stored in their dtype, ggml formats as their bytes."""
        return torch.uint8 if self.quantized else FLOAT_DTYPES[self.name]

    def row_bytes(self, row_len: int) -> int:
        if row_len % self.block_size:
            raise ValueError(f"{self.name} needs rows that are a multiple of {self.block_size} values, got {row_len}")
        return row_len // self.block_size * self.type_size

    def row_width(self, head_dim: int) -> int:
        """Elements of one cache row in `storage_dtype`: head_dim for float formats, bytes for ggml formats."""
        return self.row_bytes(head_dim) if self.quantized else head_dim

    def quantize(self, x: torch.Tensor) -> torch.Tensor:
        return quantize(x, self)

    def dequantize(self, blocks: torch.Tensor, shape: Sequence[int]) -> torch.Tensor:
        return dequantize(blocks, self, shape)


FORMATS: dict[str, KVCacheFormat] = {
    f.name: f
    for f in (
        KVCacheFormat("f32", 1, 4, False),
        KVCacheFormat("f16", 1, 2, False),
        KVCacheFormat("bf16", 1, 2, False),
        KVCacheFormat("q8_0", QK, 34, True),
        KVCacheFormat("q4_0", QK, 18, True),
        KVCacheFormat("q4_1", QK, 20, True),
        KVCacheFormat("q5_0", QK, 22, True),
        KVCacheFormat("q5_1", QK, 24, True),
    )
}
QTYPES: tuple[str, ...] = tuple(FORMATS)


def get_format(qtype: KVCacheFormat | str) -> KVCacheFormat:
    """The format named `qtype` (a format passes through); an unknown name is an error listing the valid ones."""
    if isinstance(qtype, KVCacheFormat):
        return qtype
    fmt = FORMATS.get(qtype) if isinstance(qtype, str) else None
    if fmt is None:
        raise ValueError(f"unknown KV cache type {qtype!r}; valid types: {', '.join(QTYPES)}")
    return fmt


def quantize(x: torch.Tensor, qtype: KVCacheFormat | str) -> torch.Tensor:
    """Rows of `x` (last dimension) as ggml blocks: uint8 `[*x.shape[:-1], row_bytes]`, on x's device."""
    fmt = get_format(qtype)
    if x.dim() == 0:
        raise ValueError("quantize needs at least one dimension")
    row_bytes = fmt.row_bytes(x.shape[-1])
    x = x.detach().to(dtype=torch.float32).contiguous()
    if fmt.name == "f32":
        packed = x.view(torch.uint8)
    elif fmt.name == "f16":
        packed = x.to(torch.float16).view(torch.uint8)
    elif fmt.name == "bf16":
        packed = _to_bf16_bits(x).view(torch.uint8)
    else:
        blocks = x.reshape(-1, QK)
        packed = _QUANTIZERS[fmt.name](blocks)
    return packed.reshape(*x.shape[:-1], row_bytes)


def dequantize(blocks: torch.Tensor, qtype: KVCacheFormat | str, shape: Sequence[int]) -> torch.Tensor:
    """The float32 tensor of `shape` that `blocks` (from `quantize`) encode, on their device."""
    fmt = get_format(qtype)
    shape = tuple(int(s) for s in shape)
    if not shape:
        raise ValueError("dequantize needs at least one dimension")
    expected = (*shape[:-1], fmt.row_bytes(shape[-1]))
    if blocks.dtype != torch.uint8 or blocks.numel() != _prod(expected):
        raise ValueError(
            f"{fmt.name} blocks for shape {shape} must be {_prod(expected)} uint8 bytes,"
            f" got {blocks.numel()} {blocks.dtype}"
        )
    raw = blocks.detach().contiguous().reshape(-1)
    if fmt.name == "f32":
        values = raw.view(torch.float32)
    elif fmt.name == "f16":
        values = raw.view(torch.float16).to(torch.float32)
    elif fmt.name == "bf16":
        values = (raw.view(torch.int16).to(torch.int32) << 16).view(torch.float32)
    else:
        values = _DEQUANTIZERS[fmt.name](raw.reshape(-1, fmt.type_size))
    return values.reshape(shape)


# --- float formats -------------------------------------------------------------------


def _to_bf16_bits(x: torch.Tensor) -> torch.Tensor:
    """ggml_compute_fp32_to_bf16: NaNs forced quiet, otherwise round to nearest even."""
    bits = x.view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    is_nan = (bits & 0x7FFFFFFF) > 0x7F800000
    bits = torch.where(is_nan, (bits & 0xFFFF0000) | (64 << 16), bits)
    rounded = (bits + (0x7FFF + ((bits >> 16) & 1))) >> 16
    return (rounded & 0xFFFF).to(torch.int32).to(torch.int16)


# --- integer helpers that mirror numpy's casts ---------------------------------------


def _wrap_to_byte(v: torch.Tensor) -> torch.Tensor:
    """numpy's float32 -> (u)int8 cast on x86-64: truncate, wrap modulo 256, non-finite -> 0."""
    finite = torch.isfinite(v)
    as_int = torch.where(finite, torch.trunc(v), torch.zeros_like(v)).to(torch.int64)
    return as_int & 0xFF


def _safe_reciprocal(d: torch.Tensor) -> torch.Tensor:
    return torch.where(d == 0, torch.zeros_like(d), 1.0 / d)


def _fp16_bytes(values: torch.Tensor) -> torch.Tensor:
    return values.to(torch.float16).view(torch.uint8).reshape(values.shape[0], 2)


def _pack_nibbles(q: torch.Tensor) -> torch.Tensor:
    """uint8 `[n, 32]` -> `[n, 16]`: byte i = q[i] | q[i + 16] << 4 (low nibbles only)."""
    return (q[:, :16] & 0x0F) | ((q[:, 16:] & 0x0F) << 4)


def _pack_high_bits(q: torch.Tensor) -> torch.Tensor:
    """Bit 4 of each of the 32 values as one little-endian uint32, as 4 bytes."""
    bits = ((q >> 4) & 1).to(torch.int64) << torch.arange(QK, dtype=torch.int64, device=q.device)
    word = bits.sum(dim=1, keepdim=True)
    return ((word >> _BYTE_SHIFTS.to(q.device)) & 0xFF).to(torch.uint8)


def _signed_absmax(blocks: torch.Tensor) -> torch.Tensor:
    """The value of largest magnitude in each block (the first one on ties), keeping its sign."""
    index = blocks.abs().argmax(dim=1, keepdim=True)
    return torch.gather(blocks, 1, index)


# --- quantizers ----------------------------------------------------------------------


def _quantize_q8_0(blocks: torch.Tensor) -> torch.Tensor:
    d = blocks.abs().amax(dim=1, keepdim=True) / 127
    scaled = blocks * _safe_reciprocal(d)
    # numpy's round-half-away-from-zero, spelled exactly as gguf-py spells it
    a = scaled.abs()
    floored = torch.floor(a)
    q = torch.sign(scaled) * (floored + torch.floor(2 * (a - floored)))
    return torch.cat([_fp16_bytes(d), _wrap_to_byte(q).to(torch.uint8)], dim=1)


def _quantize_symmetric(blocks: torch.Tensor, levels: int) -> tuple[torch.Tensor, torch.Tensor]:
    """q4_0 / q5_0: the signed extreme maps to code 0; returns (d, codes)."""
    d = _signed_absmax(blocks) / -levels
    shifted = (blocks * _safe_reciprocal(d)) + (levels + 0.5)
    codes = _wrap_to_byte(shifted).clamp(0, 2 * levels - 1).to(torch.uint8)
    return d, codes


def _quantize_affine(blocks: torch.Tensor, top: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """q4_1 / q5_1: min..max over `top + 1` codes; returns (d, min, codes)."""
    lo = blocks.amin(dim=1, keepdim=True)
    hi = blocks.amax(dim=1, keepdim=True)
    d = (hi - lo) / top
    shifted = (blocks - lo) * _safe_reciprocal(d) + 0.5
    codes = _wrap_to_byte(shifted).clamp(0, top).to(torch.uint8)
    return d, lo, codes


def _quantize_q4_0(blocks: torch.Tensor) -> torch.Tensor:
    d, codes = _quantize_symmetric(blocks, 8)
    return torch.cat([_fp16_bytes(d), _pack_nibbles(codes)], dim=1)


def _quantize_q5_0(blocks: torch.Tensor) -> torch.Tensor:
    d, codes = _quantize_symmetric(blocks, 16)
    return torch.cat([_fp16_bytes(d), _pack_high_bits(codes), _pack_nibbles(codes)], dim=1)


def _quantize_q4_1(blocks: torch.Tensor) -> torch.Tensor:
    d, lo, codes = _quantize_affine(blocks, 15)
    return torch.cat([_fp16_bytes(d), _fp16_bytes(lo), _pack_nibbles(codes)], dim=1)


def _quantize_q5_1(blocks: torch.Tensor) -> torch.Tensor:
    d, lo, codes = _quantize_affine(blocks, 31)
    return torch.cat([_fp16_bytes(d), _fp16_bytes(lo), _pack_high_bits(codes), _pack_nibbles(codes)], dim=1)


# --- dequantizers --------------------------------------------------------------------


def _fp16_at(raw: torch.Tensor, offset: int) -> torch.Tensor:
    return raw[:, offset : offset + 2].contiguous().view(torch.float16).to(torch.float32)


def _unpack_nibbles(packed: torch.Tensor) -> torch.Tensor:
    return torch.cat([packed & 0x0F, packed >> 4], dim=1)


def _unpack_high_bits(raw4: torch.Tensor) -> torch.Tensor:
    word = (raw4.to(torch.int64) << _BYTE_SHIFTS.to(raw4.device)).sum(dim=1, keepdim=True)
    return ((word >> torch.arange(QK, device=raw4.device)) & 1).to(torch.uint8)


def _dequantize_q8_0(raw: torch.Tensor) -> torch.Tensor:
    return raw[:, 2:].contiguous().view(torch.int8).to(torch.float32) * _fp16_at(raw, 0)


def _dequantize_q4_0(raw: torch.Tensor) -> torch.Tensor:
    codes = _unpack_nibbles(raw[:, 2:]).to(torch.float32) - 8
    return _fp16_at(raw, 0) * codes


def _dequantize_q4_1(raw: torch.Tensor) -> torch.Tensor:
    codes = _unpack_nibbles(raw[:, 4:]).to(torch.float32)
    return _fp16_at(raw, 0) * codes + _fp16_at(raw, 2)


def _dequantize_q5_0(raw: torch.Tensor) -> torch.Tensor:
    codes = _unpack_nibbles(raw[:, 6:]) | (_unpack_high_bits(raw[:, 2:6]) << 4)
    return _fp16_at(raw, 0) * (codes.to(torch.float32) - 16)


def _dequantize_q5_1(raw: torch.Tensor) -> torch.Tensor:
    codes = _unpack_nibbles(raw[:, 8:]) | (_unpack_high_bits(raw[:, 4:8]) << 4)
    return _fp16_at(raw, 0) * codes.to(torch.float32) + _fp16_at(raw, 2)


_QUANTIZERS = {
    "q8_0": _quantize_q8_0,
    "q4_0": _quantize_q4_0,
    "q4_1": _quantize_q4_1,
    "q5_0": _quantize_q5_0,
    "q5_1": _quantize_q5_1,
}
_DEQUANTIZERS = {
    "q8_0": _dequantize_q8_0,
    "q4_0": _dequantize_q4_0,
    "q4_1": _dequantize_q4_1,
    "q5_0": _dequantize_q5_0,
    "q5_1": _dequantize_q5_1,
}


def _prod(shape: Sequence[int]) -> int:
    out = 1
    for s in shape:
        out *= s
    return out
