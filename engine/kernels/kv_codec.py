"""Reading and writing one KV row inside a Triton kernel, in any cache format.

A cache row is one token's key (or value) for one KV head. Float formats store the
`head_dim` values in the cache tensor's own dtype (f32, f16 or bf16). The ggml formats
store `head_dim / 32` blocks as bytes in a uint8 tensor, laid out as `engine.kv.formats`
documents; `load_rows` decodes them with the same float32 steps as
`engine.kv.formats.dequantize`, and `store_row` encodes them with the same steps as
`engine.kv.formats.quantize` (division is round-to-nearest `div_rn`, as numpy divides).

Byte-identity with `engine.kv.formats` is tested in interpreter mode. On a GPU the compiler
may contract `x * id + 8.5` into one fused multiply-add, which can move a code by one on
exact ties; the C++ port should decide explicitly whether it fuses.
"""

from __future__ import annotations

import triton
import triton.language as tl

from engine.kv.formats import KVCacheFormat, get_format
from engine.kv.storage import row_width  # noqa: F401  (re-exported for the kernels)

FLOAT = tl.constexpr(0)
Q8_0 = tl.constexpr(1)
Q4_0 = tl.constexpr(2)
Q4_1 = tl.constexpr(3)
Q5_0 = tl.constexpr(4)
Q5_1 = tl.constexpr(5)
BF16 = tl.constexpr(6)  # loads as FLOAT; stores round explicitly (the interpreter's cast truncates)

_CODES = {"f32": 0, "f16": 0, "bf16": 6, "q8_0": 1, "q4_0": 2, "q4_1": 3, "q5_0": 4, "q5_1": 5}


def format_code(qtype: KVCacheFormat | str) -> int:
    """The kernels' FORMAT constant for a cache format (or its name)."""
    return _CODES[get_format(qtype).name]


@triton.jit
def _load_fp16(ptr, offsets, mask):
    lo = tl.load(ptr + offsets, mask=mask, other=0).to(tl.uint16)
    hi = tl.load(ptr + offsets + 1, mask=mask, other=0).to(tl.uint16)
    return (lo | (hi << 8)).to(tl.float16, bitcast=True).to(tl.float32)


@triton.jit
def _load_nibble(ptr, offsets, within, mask):
    """Value `within` (0..31) of a block whose nibble bytes start at `offsets`."""
    byte = tl.load(ptr + offsets + within % 16, mask=mask, other=0)
    return (byte >> ((within // 16) * 4).to(tl.uint8)) & 0x0F


@triton.jit
def _load_high_bit(ptr, offsets, within, mask):
    """Bit `within` of the little-endian uint32 at `offsets`, as 0 or 16."""
    byte = tl.load(ptr + offsets + within // 8, mask=mask, other=0)
    return ((byte >> (within % 8).to(tl.uint8)) & 1) << 4


@triton.jit
def load_rows(cache_ptr, row_start, row_mask, HEAD_DIM: tl.constexpr, FORMAT: tl.constexpr):
    """Rows starting at `row_start` ([N] offsets into the cache) as float32 [N, HEAD_DIM].

    One branch per format and a single return: the compiler type-checks every statement after
    an early `return` inside a constexpr branch (the interpreter does not), so a float cache
    must never reach the byte-decoding code (issue 14)."""
    dim = tl.arange(0, HEAD_DIM)[None, :]
    start = row_start[:, None]
    mask = row_mask[:, None]
    within = dim % 32
    if (FORMAT == FLOAT) or (FORMAT == BF16):
        rows = tl.load(cache_ptr + start + dim, mask=mask, other=0.0).to(tl.float32)
    elif FORMAT == Q8_0:
        block = start + (dim // 32) * 34
        q = tl.load(cache_ptr + block + 2 + within, mask=mask, other=0).to(tl.int8, bitcast=True)
        rows = q.to(tl.float32) * _load_fp16(cache_ptr, block, mask)
    elif FORMAT == Q4_0:
        block = start + (dim // 32) * 18
        q = _load_nibble(cache_ptr, block + 2, within, mask)
        rows = _load_fp16(cache_ptr, block, mask) * (q.to(tl.float32) - 8.0)
    elif FORMAT == Q4_1:
        block = start + (dim // 32) * 20
        q = _load_nibble(cache_ptr, block + 4, within, mask)
        rows = _load_fp16(cache_ptr, block, mask) * q.to(tl.float32) + _load_fp16(cache_ptr, block + 2, mask)
    elif FORMAT == Q5_0:
        block = start + (dim // 32) * 22
        q = _load_nibble(cache_ptr, block + 6, within, mask) | _load_high_bit(cache_ptr, block + 2, within, mask)
        rows = _load_fp16(cache_ptr, block, mask) * (q.to(tl.float32) - 16.0)
    else:  # Q5_1
        block = start + (dim // 32) * 24
        q = _load_nibble(cache_ptr, block + 8, within, mask) | _load_high_bit(cache_ptr, block + 4, within, mask)
        rows = _load_fp16(cache_ptr, block, mask) * q.to(tl.float32) + _load_fp16(cache_ptr, block + 2, mask)
    return rows


@triton.jit
def _spread(keep, like):
    """The scalar flag `keep` as a boolean mask shaped like `like` (masks must be tensors)."""
    return (like * 0 + keep) != 0


@triton.jit
def _store_fp16(ptr, offsets, value, mask):
    bits = value.to(tl.float16).to(tl.uint16, bitcast=True)
    tl.store(ptr + offsets, (bits & 0xFF).to(tl.uint8), mask=mask)
    tl.store(ptr + offsets + 1, (bits >> 8).to(tl.uint8), mask=mask)


@triton.jit
def _to_byte(v):
    """numpy's float32 -> uint8 cast on x86-64: truncate, wrap modulo 256, non-finite -> 0."""
    finite = (v == v) & (tl.abs(v) < float("inf"))
    return (tl.where(finite, v, 0.0).to(tl.int32) & 0xFF).to(tl.uint8)


@triton.jit
def _reciprocal(d):
    safe = tl.where(d == 0, 1.0, d)
    return tl.where(d == 0, 0.0, tl.math.div_rn(tl.full(d.shape, 1.0, tl.float32), safe))


@triton.jit
def _to_bf16(x):
    """ggml_compute_fp32_to_bf16: NaNs forced quiet, otherwise round to nearest even."""
    bits = x.to(tl.uint32, bitcast=True)
    is_nan = (bits & 0x7FFFFFFF) > 0x7F800000
    quiet = (bits & 0xFFFF0000) | (64 << 16)
    rounded = (bits.to(tl.uint64) + (0x7FFF + ((bits >> 16) & 1))) >> 16
    out = tl.where(is_nan, quiet >> 16, rounded.to(tl.uint32))
    return out.to(tl.uint16).to(tl.bfloat16, bitcast=True)


@triton.jit
def _store_packed_codes(ptr, block, q, half, within, keep, NIBBLES: tl.constexpr, HIGH_BITS: tl.constexpr):
    """Codes q [NB, 2, 16] (half 0 holds values 0..15, half 1 values 16..31) packed ggml-style
    into the blocks starting at `block` [NB]: nibbles at +NIBBLES, the fifth bits (if any) at +HIGH_BITS."""
    low = tl.sum(tl.where(half == 0, q & 0x0F, 0), axis=1)  # [NB, 16]
    high = tl.sum(tl.where(half == 1, q & 0x0F, 0), axis=1)
    index = tl.arange(0, 16)[None, :]
    tl.store(
        ptr + block[:, None] + NIBBLES + index,
        (low | (high << 4)).to(tl.uint8),
        mask=_spread(keep, block[:, None] + index),
    )
    if HIGH_BITS > 0:
        position = (half * 16 + within).to(tl.uint32)
        word = tl.sum(tl.sum(((q >> 4) & 1).to(tl.uint32) << position, axis=2), axis=1)  # [NB]
        byte_index = tl.arange(0, 4)[None, :]
        word_bytes = ((word[:, None] >> (byte_index * 8).to(tl.uint32)) & 0xFF).to(tl.uint8)
        tl.store(
            ptr + block[:, None] + HIGH_BITS + byte_index, word_bytes, mask=_spread(keep, block[:, None] + byte_index)
        )


@triton.jit
def store_row(cache_ptr, row_start, src_ptr, keep, HEAD_DIM: tl.constexpr, FORMAT: tl.constexpr):
    """Encode the float row at `src_ptr` (HEAD_DIM contiguous values) into the cache at `row_start`.

    `keep` is an int32 scalar: 0 skips the row (a padding slot). HEAD_DIM is a power of two."""
    if FORMAT == FLOAT:
        dim = tl.arange(0, HEAD_DIM)
        mask = _spread(keep, dim)
        x = tl.load(src_ptr + dim, mask=mask, other=0.0)
        tl.store(cache_ptr + row_start + dim, x.to(cache_ptr.dtype.element_ty), mask=mask)
    elif FORMAT == BF16:
        dim = tl.arange(0, HEAD_DIM)
        mask = _spread(keep, dim)
        x = tl.load(src_ptr + dim, mask=mask, other=0.0).to(tl.float32)
        tl.store(cache_ptr + row_start + dim, _to_bf16(x), mask=mask)
    else:
        NB: tl.constexpr = HEAD_DIM // 32
        blk = tl.arange(0, NB)
        half = tl.arange(0, 2)[None, :, None]
        within = tl.arange(0, 16)[None, None, :]
        flat_index = half * 16 + within  # position inside a block of 32
        block_mask = _spread(keep, blk)
        value_mask = _spread(keep, blk[:, None, None] * 32 + flat_index)
        x = tl.load(src_ptr + blk[:, None, None] * 32 + flat_index, mask=value_mask, other=0.0).to(tl.float32)
        if FORMAT == Q8_0:
            block = row_start + blk * 34
            d = tl.math.div_rn(tl.max(tl.max(tl.abs(x), axis=2), axis=1), tl.full([NB], 127.0, tl.float32))
            scaled = x * _reciprocal(d)[:, None, None]
            # round half away from zero, spelled as gguf-py spells it
            a = tl.abs(scaled)
            floored = tl.floor(a)
            rounded = floored + tl.floor(2.0 * (a - floored))
            q = tl.where(scaled > 0, rounded, tl.where(scaled < 0, -rounded, 0.0 * rounded))
            _store_fp16(cache_ptr, block, d, block_mask)
            tl.store(cache_ptr + block[:, None, None] + 2 + flat_index, _to_byte(q), mask=value_mask)
        elif (FORMAT == Q4_0) or (FORMAT == Q5_0):
            LEVELS: tl.constexpr = 8 if FORMAT == Q4_0 else 16
            magnitude = tl.abs(x)
            amax = tl.max(tl.max(magnitude, axis=2), axis=1)
            # the value of largest magnitude, keeping its sign; the first one on ties
            first = tl.min(tl.min(tl.where(magnitude == amax[:, None, None], flat_index, 32), axis=2), axis=1)
            signed_max = tl.sum(tl.sum(tl.where(flat_index == first[:, None, None], x, 0.0), axis=2), axis=1)
            d = tl.math.div_rn(signed_max, tl.full([NB], -LEVELS, tl.float32))
            q = tl.minimum(_to_byte((x * _reciprocal(d)[:, None, None]) + (LEVELS + 0.5)), 2 * LEVELS - 1)
            if FORMAT == Q4_0:
                block = row_start + blk * 18
                _store_fp16(cache_ptr, block, d, block_mask)
                _store_packed_codes(cache_ptr, block, q, half, within, keep, 2, 0)
            else:
                block = row_start + blk * 22
                _store_fp16(cache_ptr, block, d, block_mask)
                _store_packed_codes(cache_ptr, block, q, half, within, keep, 6, 2)
        else:  # Q4_1, Q5_1
            TOP: tl.constexpr = 15 if FORMAT == Q4_1 else 31
            lo = tl.min(tl.min(x, axis=2), axis=1)
            hi = tl.max(tl.max(x, axis=2), axis=1)
            d = tl.math.div_rn(hi - lo, tl.full([NB], TOP, tl.float32))
            q = tl.minimum(_to_byte((x - lo[:, None, None]) * _reciprocal(d)[:, None, None] + 0.5), TOP)
            if FORMAT == Q4_1:
                block = row_start + blk * 20
                _store_fp16(cache_ptr, block, d, block_mask)
                _store_fp16(cache_ptr, block + 2, lo, block_mask)
                _store_packed_codes(cache_ptr, block, q, half, within, keep, 4, 0)
            else:
                block = row_start + blk * 24
                _store_fp16(cache_ptr, block, d, block_mask)
                _store_fp16(cache_ptr, block + 2, lo, block_mask)
                _store_packed_codes(cache_ptr, block, q, half, within, keep, 8, 4)
