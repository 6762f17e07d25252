"""The capacity benchmark: both ratios from running the block manager, and the command's output."""

from __future__ import annotations

import pytest

from engine.tools import capacity
from engine.tools.capacity import ConcurrencyParams, SharingParams, measure_concurrency, measure_prefix_sharing


def test_default_workload_reproduces_the_published_concurrency_ratio() -> None:
    result = measure_concurrency(ConcurrencyParams())
    # 511 usable blocks: 46 sequences of 11 blocks, or 5 reservations of 96 blocks.
    assert (result.usable_blocks, result.paged_sequences, result.reserved_sequences) == (511, 46, 5)
    assert round(result.ratio, 1) == 9.2


def test_concurrency_follows_the_workload() -> None:
    long = measure_concurrency(ConcurrencyParams(max_context=2048, prompt_tokens=1000, output_tokens=1048))
    assert long.paged_sequences == long.reserved_sequences == 3
    short = measure_concurrency(
        ConcurrencyParams(num_blocks=65, block_size=8, max_context=64, prompt_tokens=3, output_tokens=2)
    )
    assert (short.paged_sequences, short.reserved_sequences) == (64, 8)
    with pytest.raises(ValueError, match="exceeds the max context"):
        measure_concurrency(ConcurrencyParams(max_context=100))


def test_default_tenants_reproduce_the_published_sharing_ratio() -> None:
    result = measure_prefix_sharing(SharingParams())
    assert (result.blocks_without_caching, result.blocks_with_caching) == (32 * 68, 64 + 32 * 4)
    assert round(result.ratio, 1) == 11.3
    assert result.bytes_with_caching == 192 * 2 * 1024 * 1024


def test_sharing_counts_partial_blocks_per_tenant() -> None:
    result = measure_prefix_sharing(SharingParams(tenants=3, shared_prefix_tokens=10, unique_tokens=3, block_size=4))
    # 13 tokens = 4 blocks each; only the 2 full shared blocks are shared.
    assert (result.blocks_without_caching, result.blocks_with_caching) == (12, 2 + 3 * 2)


def test_command_prints_both_ratios_with_their_parameters(capsys: pytest.CaptureFixture[str]) -> None:
    assert capacity.main([]) == 0
    out = capsys.readouterr().out
    assert "512 blocks of 16 tokens" in out and "max context 1536 tokens" in out
    assert "ratio: 9.2x more concurrent sequences" in out
    assert "tenants: 32, each 1024 shared + 64 own prompt tokens" in out
    assert "ratio: 11.3x less KV memory" in out


def test_command_rejects_bad_parameters_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert capacity.main(["--max-context", "64"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("engine capacity: ")
