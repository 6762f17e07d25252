"""The decode benchmark runs end to end on a tiny setting and reports its ratio (not timed)."""

from __future__ import annotations

import pytest

from engine.tools import bench
from engine.tools.bench_decode import format_cpu_decode, run_cpu_decode
from engine.tools.common import progress_display


def test_cpu_decode_bench_measures_both_sides() -> None:
    calls: list[int] = []
    result = run_cpu_decode(batch=2, context=5, steps=3, runs=2, kv_type="q8_0", on_run=lambda: calls.append(1))
    assert calls == [1, 1]
    assert result.paged_tok_s > 0 and result.contiguous_tok_s > 0
    assert result.ratio == pytest.approx(result.paged_tok_s / result.contiguous_tok_s)
    lines = format_cpu_decode(result, 2)
    assert "ratio paged / contiguous" in lines[-1] and "KV q8_0" in lines[0]


def test_bench_cli_runs_decode_and_skips_gpu_without_cuda(capsys: pytest.CaptureFixture[str]) -> None:
    import torch

    assert bench.main(["decode", "--batch", "1", "--context", "4", "--steps", "2", "--runs", "1"]) == 0
    out = capsys.readouterr().out
    assert "ratio paged / contiguous" in out
    if not torch.cuda.is_available():
        assert bench.main(["gpu"]) == 3
        captured = capsys.readouterr()
        assert captured.err == "engine bench: CUDA is not available: the GPU benchmark needs an NVIDIA GPU\n"
        assert captured.out == ""
    assert bench.main(["decode", "--kv-type", "q9"]) == 2
    assert "valid types" in capsys.readouterr().err


def test_progress_shows_only_for_long_runs() -> None:
    with progress_display("short", 10) as progress:
        assert progress is None
    with progress_display("long", 1000) as progress:
        assert progress is not None
        progress(500, 1000)
