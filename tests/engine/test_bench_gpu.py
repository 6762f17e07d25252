"""`python -m engine bench gpu`: the sweep's plan, its arithmetic and table, and one point of each
kind run end to end on the CPU in the interpreter (tiny shapes; the timings mean nothing there).
The GPU figures themselves come only from a run on a CUDA device."""

from __future__ import annotations

import pytest

from engine.tools.bench_gpu import (
    AttentionShape,
    DecodePoint,
    GpuBench,
    PrefillPoint,
    decode_plan,
    format_gpu_bench,
    peak_bandwidth,
    run_decode_point,
    run_prefill_point,
)

TINY = AttentionShape(n_heads=4, n_kv_heads=2, head_dim=32, block_size=16)


def test_peak_bandwidth_comes_from_the_device_name() -> None:
    assert peak_bandwidth("NVIDIA H100 80GB HBM3") == 3350.0
    assert peak_bandwidth("NVIDIA H200") == 4800.0
    assert peak_bandwidth("NVIDIA H100 PCIe") == 2000.0
    unknown = peak_bandwidth("Some Future GPU")
    assert unknown != unknown  # nan: the table prints "unknown"


def test_decode_plan_skips_points_over_the_token_budget_and_rejects_unknown_types() -> None:
    plan = decode_plan([1, 8, 64], [4096, 32768], ["f16", "q8_0"], max_tokens=8 * 32768)
    assert (64, 32768, "f16") not in plan and (8, 32768, "q8_0") in plan
    assert len(plan) == 2 * 5
    with pytest.raises(ValueError, match="valid types"):
        decode_plan([1], [1024], ["q9_9"])


def test_bandwidth_and_flops_arithmetic_in_the_table() -> None:
    decode = DecodePoint(8, 4096, "q8_0", paged_ms=0.5, sdpa_ms=1.0, paged_bytes=1_000_000_000, sdpa_bytes=2 * 10**9)
    assert decode.paged_gbps == pytest.approx(2000.0) and decode.sdpa_gbps == pytest.approx(2000.0)
    assert decode.speedup == pytest.approx(2.0)
    prefill = PrefillPoint(4096, "f16", "tf32x3", paged_ms=2.0, sdpa_ms=1.0, flops=4e12)
    assert prefill.paged_tflops == pytest.approx(2000.0) and prefill.sdpa_tflops == pytest.approx(4000.0)
    lines = format_gpu_bench(GpuBench("NVIDIA H100 80GB HBM3", 3350.0, [decode], [prefill]))
    assert "peak 3350 GB/s" in lines[0]
    row = next(line for line in lines if " q8_0 " in line)
    assert row.split()[:3] == ["8", "4096", "q8_0"] and "59.7" in row.split() and row.endswith("2.000x")
    assert next(line for line in lines if "tf32x3" in line).endswith("0.500x")


def test_one_decode_and_one_prefill_point_run_in_the_interpreter() -> None:
    decode = run_decode_point(2, 40, "q8_0", TINY, iters=1, device="cpu")
    assert decode.paged_bytes == 2 * 2 * 40 * 2 * 34 and decode.sdpa_bytes == 2 * 2 * 40 * 2 * 32 * 2
    assert decode.paged_ms > 0 and decode.sdpa_ms > 0
    prefill = run_prefill_point(33, "f16", "ieee", TINY, iters=1, device="cpu")
    assert prefill.flops == 4.0 * 4 * 32 * 33 * 34 / 2 and prefill.paged_ms > 0
