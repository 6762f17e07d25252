"""engine.kv.formats against gguf-py's gguf.quants: the bytes must be identical, the values too."""

from __future__ import annotations

import warnings

import gguf
import numpy as np
import pytest
import torch
from gguf.quants import dequantize as gguf_dequantize
from gguf.quants import quantize as gguf_quantize
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from engine.kv.formats import QTYPES, dequantize, get_format, quantize

GGML = {
    "f32": gguf.GGMLQuantizationType.F32,
    "f16": gguf.GGMLQuantizationType.F16,
    "bf16": gguf.GGMLQuantizationType.BF16,
    "q8_0": gguf.GGMLQuantizationType.Q8_0,
    "q4_0": gguf.GGMLQuantizationType.Q4_0,
    "q4_1": gguf.GGMLQuantizationType.Q4_1,
    "q5_0": gguf.GGMLQuantizationType.Q5_0,
    "q5_1": gguf.GGMLQuantizationType.Q5_1,
}
F32_MAX = np.finfo(np.float32).max
F32_TINY = np.finfo(np.float32).tiny  # smallest normal


def gguf_bytes(x: np.ndarray, qtype: str) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # gguf-py divides by zero-like scales on purpose
        out = gguf_quantize(x, GGML[qtype])
    return np.ascontiguousarray(out).view(np.uint8)


def without_the_sign_of_a_zero_minimum(raw: np.ndarray, qtype: str) -> np.ndarray:
    """The contract's one exception (engine/kv/formats.py): the sign of a q4_1/q5_1 minimum `m`
    that is exactly zero is unspecified. gguf-py takes numpy's min, whose choice between -0.0 and
    +0.0 depends on their positions and numpy's SIMD path; the value d * q + m is the same."""
    if qtype not in ("q4_1", "q5_1"):
        return raw
    blocks = raw.reshape(-1, get_format(qtype).type_size).copy()
    zero = (blocks[:, 2] == 0) & ((blocks[:, 3] & 0x7F) == 0)
    blocks[zero, 3] = 0
    return blocks.reshape(raw.shape)


def assert_same_as_gguf(x: np.ndarray, qtype: str) -> None:
    ours_raw = quantize(torch.from_numpy(x.copy()), qtype).numpy()
    theirs_raw = gguf_bytes(x, qtype)
    ours = without_the_sign_of_a_zero_minimum(ours_raw, qtype)
    theirs = without_the_sign_of_a_zero_minimum(theirs_raw, qtype)
    assert ours.shape == theirs.shape
    mismatch = np.argwhere(ours != theirs)
    assert mismatch.size == 0, (
        f"{qtype}: first differing byte at {mismatch[0].tolist()}:"
        f" {ours[tuple(mismatch[0])]} != {theirs[tuple(mismatch[0])]}"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = gguf_dequantize(
            theirs_raw
            if GGML[qtype] not in (GGML["f32"], GGML["f16"])
            else theirs_raw.view(np.float32 if qtype == "f32" else np.float16),
            GGML[qtype],
        )
    back = dequantize(torch.from_numpy(ours_raw.copy()), qtype, x.shape).numpy()
    np.testing.assert_array_equal(back.view(np.uint32), np.asarray(expected, dtype=np.float32).view(np.uint32))


def edge_rows() -> dict[str, np.ndarray]:
    """Blocks of 32 values that hit the formats' corner cases."""
    ramp = np.arange(32, dtype=np.float32)
    ties = np.concatenate([np.arange(-16, 16, dtype=np.float32) + 0.5])  # k + .5 under unit scales
    q8_ties = ties.copy()
    q8_ties[0] = 127.0  # d == 1: every other value lands exactly on a .5 tie
    q4_ties = ties.copy()
    q4_ties[0] = -8.0  # q4_0 scale d = max / -8 == 1
    q5_ties = ties.copy()
    q5_ties[0] = -16.0
    both_signs = ramp - 15.0
    both_signs[3], both_signs[7] = 20.0, -20.0  # equal magnitudes: the first one sets the sign
    denormal_mix = (ramp - 16) * np.float32(1e-39)
    denormal_mix[0] = 1.0
    return {
        "zeros": np.zeros(32, dtype=np.float32),
        "negative_zeros": -np.zeros(32, dtype=np.float32),
        "constant": np.full(32, 0.75, dtype=np.float32),
        "q8_ties": q8_ties,
        "q4_ties": q4_ties,
        "q5_ties": q5_ties,
        "affine_ties": ramp / 2,
        "both_signs": both_signs,
        "plus_max": np.where(ramp % 3 == 0, F32_MAX, ramp).astype(np.float32),
        "minus_max": np.where(ramp % 5 == 0, -F32_MAX, -ramp).astype(np.float32),
        "both_max": np.where(ramp % 2 == 0, F32_MAX, -F32_MAX).astype(np.float32),
        "all_denormals": ((ramp - 16) * np.float32(1e-40)).astype(np.float32),
        "denormal_mix": denormal_mix.astype(np.float32),
        "tiny_normals": (ramp * F32_TINY).astype(np.float32),
        "large": (ramp - 16) * np.float32(1e30),
        "fp16_overflow": (ramp - 16) * np.float32(1e7),
        "fp16_subnormal_scale": (ramp - 16) * np.float32(1e-7),
    }


@pytest.mark.parametrize("qtype", QTYPES)
@pytest.mark.parametrize("case", sorted(edge_rows()))
def test_edge_cases_are_byte_identical(qtype: str, case: str) -> None:
    row = edge_rows()[case]
    assert_same_as_gguf(np.stack([row, row[::-1].copy()]), qtype)


@pytest.mark.parametrize("qtype", QTYPES)
@pytest.mark.parametrize("scale", [1e-3, 1.0, 37.5, 1e4])
def test_random_tensors_are_byte_identical(qtype: str, scale: float) -> None:
    rng = np.random.default_rng(int(scale * 1000) % 2**32)
    x = (rng.standard_normal((3, 5, 64)) * scale).astype(np.float32)
    x[0, 0, :32] = rng.integers(-8, 8, 32).astype(np.float32) + 0.5  # exact .5 ties in a random tensor
    assert_same_as_gguf(x, qtype)


@settings(max_examples=60, deadline=None, derandomize=True)  # the same 60 examples on every run
@given(
    qtype=st.sampled_from(QTYPES),
    x=arrays(np.float32, (2, 32), elements=st.floats(-1e6, 1e6, width=32, allow_nan=False, allow_subnormal=True)),
)
def test_any_finite_block_is_byte_identical(qtype: str, x: np.ndarray) -> None:
    assert_same_as_gguf(x, qtype)


@pytest.mark.parametrize("qtype", ["q4_1", "q5_1"])
def test_a_zero_minimum_differs_from_gguf_at_most_in_its_sign(qtype: str) -> None:
    x = np.zeros((4, 32), dtype=np.float32)
    x[0, 0] = -0.0  # -0.0 first: numpy's min may return either zero
    x[1, 31] = -0.0
    x[2, :] = -0.0
    x[3, 5] = 1.0
    x[3, 7] = -0.0
    ours = quantize(torch.from_numpy(x.copy()), qtype).numpy().reshape(4, -1)
    theirs = gguf_bytes(x, qtype).reshape(4, -1)
    differing = np.argwhere(ours != theirs)
    assert all(column == 3 and ours[row, 3] ^ theirs[row, 3] == 0x80 for row, column in differing), differing
    assert_same_as_gguf(x, qtype)  # bytes equal once the zero's sign is cleared, values equal bit for bit


@pytest.mark.parametrize("qtype", ["q8_0", "q4_0", "q4_1", "q5_0", "q5_1"])
def test_round_trip_error_is_bounded_by_the_block_scale(qtype: str) -> None:
    x = torch.randn(16, 64, generator=torch.Generator().manual_seed(1))
    back = dequantize(quantize(x, qtype), qtype, x.shape)
    levels = {"q8_0": 127, "q4_0": 8, "q4_1": 15, "q5_0": 16, "q5_1": 31}[qtype]
    span = x.reshape(-1, 32).abs().amax(dim=1, keepdim=True) * 2
    err = (back - x).reshape(-1, 32).abs()
    assert torch.all(err <= span / levels), f"{qtype}: error {float(err.max())} exceeds one quantization step"


def test_block_sizes_match_ggml() -> None:
    for name, qtype in GGML.items():
        block_size, type_size = gguf.GGML_QUANT_SIZES[qtype]
        fmt = get_format(name)
        assert (fmt.block_size, fmt.type_size) == (block_size, type_size)


def test_unknown_type_lists_the_valid_ones() -> None:
    with pytest.raises(
        ValueError, match=r"unknown KV cache type 'q3_0'; valid types: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1"
    ):
        quantize(torch.zeros(32), "q3_0")


def test_rows_must_fill_whole_blocks() -> None:
    with pytest.raises(ValueError, match="multiple of 32"):
        quantize(torch.zeros(2, 48), "q8_0")
    with pytest.raises(ValueError, match="must be 34 uint8 bytes"):
        dequantize(torch.zeros(33, dtype=torch.uint8), "q8_0", (32,))


def test_a_cache_type_resolves_once_into_a_format_that_says_how_it_is_stored() -> None:
    q8_0, f16 = get_format("q8_0"), get_format("f16")
    assert get_format(q8_0) is q8_0  # a resolved format passes through untouched
    assert (q8_0.row_width(64), q8_0.storage_dtype, q8_0.needs_flash_attn) == (68, torch.uint8, True)
    assert (f16.row_width(64), f16.storage_dtype, f16.needs_flash_attn) == (64, torch.float16, False)
    x = torch.linspace(-1, 1, 64).reshape(2, 32)
    assert torch.equal(q8_0.quantize(x), quantize(x, "q8_0"))
    assert torch.equal(q8_0.dequantize(q8_0.quantize(x), x.shape), dequantize(quantize(x, "q8_0"), "q8_0", x.shape))
    with pytest.raises(ValueError, match="unknown KV cache type 'q3_k'; valid types: f32, f16"):
        get_format("q3_k")
