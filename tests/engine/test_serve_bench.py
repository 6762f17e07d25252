"""The serving benchmark runs end to end on a tiny workload (not timed): both sides produce
every requested token, the same greedy tokens, and the static batches' times to first token
show the batching they model."""

from __future__ import annotations

import pytest

from engine.tools import bench
from engine.tools.bench_serve import ServeWorkload, format_serve_bench, run_serve_bench


def test_serve_bench_measures_both_sides_on_the_same_requests() -> None:
    workload = ServeWorkload(requests=5, prompt_tokens=6, max_output_tokens=8, max_num_seqs=2, seed=3)
    lengths = workload.output_lengths()
    assert len(lengths) == 5 and all(1 <= n <= 8 for n in lengths) and len(set(lengths)) > 1
    result = run_serve_bench(workload)
    for side in (result.paged, result.baseline):
        assert side.tokens == sum(lengths) and side.seconds > 0 and len(side.ttft) == 5
    # Static batches of 2: requests 0 and 1 get their first token together, before request 2's batch starts.
    ttft = result.baseline.ttft
    assert ttft[0] == ttft[1] < ttft[2] == ttft[3] < ttft[4]
    assert result.same_tokens == 5  # greedy, f32: the paged engine agrees with the contiguous reference
    lines = format_serve_bench(result)
    assert "5 requests at once" in lines[0] and "throughput ratio paged / baseline" in lines[-2]


def test_serve_bench_cli_rejects_bad_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["serve", "--serve-requests", "0"]) == 2
    assert capsys.readouterr().err == "engine bench: error: argument --serve-requests: must be >= 1, got 0\n"
    assert bench.main(["serve", "--serve-kv-type", "q9", "--serve-requests", "1", "--serve-output", "1"]) == 2
    assert "valid types" in capsys.readouterr().err
