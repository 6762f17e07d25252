"""Gate 0 on a small configuration: it passes on the real kernels and fails on a broken one."""

from __future__ import annotations

import pytest
import torch

from engine.__main__ import main as engine_main
from engine.kernels import paged_decode
from engine.tools.gate0 import Gate0Config, run_gate0

SMALL = Gate0Config(max_batch=8, max_tokens=6, block_size=4)


def test_gate0_passes_and_covers_batches_prefix_hits_preemption_and_q8_0() -> None:
    results = run_gate0(SMALL)
    failed = [f"{r.name}: {r.detail}" for r in results if not r.passed]
    assert not failed, failed
    names = " | ".join(r.name for r in results)
    for batch in range(1, 9):
        assert f"batch {batch}: permuted blocks == contiguous reference tokens" in names
        assert f"batch {batch}: permuted vs in-order blocks, logits bit-identical" in names
    assert "prefix hits" in names and "preemption" in names and "q8_0 KV logits" in names


def test_gate0_fails_when_the_decode_kernel_ignores_the_block_table(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = paged_decode.paged_decode_attention_reference

    def reads_blocks_in_order(q, k_cache, v_cache, block_tables, *args, **kwargs):  # type: ignore[no-untyped-def]
        in_order = (
            torch.arange(1, block_tables.shape[1] + 1, dtype=block_tables.dtype).expand_as(block_tables).contiguous()
        )
        return real(q, k_cache, v_cache, in_order, *args, **kwargs)

    monkeypatch.setattr(paged_decode, "paged_decode_attention_reference", reads_blocks_in_order)
    assert engine_main(["gate0", "--max-batch", "2", "--max-tokens", "4"]) == 1
    out = capsys.readouterr().out
    assert "FAIL  batch 1: permuted blocks == contiguous reference tokens" in out
    assert "checks passed" in out


def test_gate0_cli_passes_on_a_small_run(capsys: pytest.CaptureFixture[str]) -> None:
    assert engine_main(["gate0", "--max-batch", "1", "--max-tokens", "3", "--block-size", "8"]) == 0
    out = capsys.readouterr().out
    assert "FAIL" not in out and out.rstrip().endswith("checks passed")


def test_gate0_rejects_bad_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    assert engine_main(["gate0", "--max-batch", "0"]) == 2
    assert "must be >= 1" in capsys.readouterr().err
