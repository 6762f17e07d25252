"""The block-manager benchmark runs its whole trace and reports every operation (not timed)."""

from __future__ import annotations

import pytest

from engine.tools import bench
from engine.tools.bench_blocks import run_block_bench


def test_block_bench_reports_every_operation(capsys: pytest.CaptureFixture[str]) -> None:
    timings = run_block_bench(num_requests=8, runs=1)
    assert [t.name for t in timings] == ["hash", "allocate", "decode", "free", "hit"]
    assert all(t.seconds > 0 and t.operations > 0 and t.blocks > 0 for t in timings)
    assert bench.main(["blocks", "--requests", "4", "--runs", "1"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in ("hash", "allocate", "decode", "free", "hit"))
    assert bench.main(["blocks", "--runs", "0"]) == 2
