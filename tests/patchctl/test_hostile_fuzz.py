"""The fast CI subset of the hostile-input fuzz run (bench/hostile_fuzz.py runs thousands):
seeded hostile patches and configs through the real CLI, with no traceback, no escape, no
unexpected exit code, no package code run, and no applied tree changed by a failed apply."""

from __future__ import annotations

from pathlib import Path

import pytest

from .hostile_gen import Sandbox, Tally, make_sandbox, run_config_cases, run_patch_cases

CASES = 50


@pytest.fixture
def box(tmp_path: Path) -> Sandbox:
    return make_sandbox(tmp_path / "sandbox")


def test_hostile_patches(box: Sandbox) -> None:
    tally = run_patch_cases(box, CASES, seed=7, tally=Tally())
    assert tally.cases == CASES
    assert tally.ok, tally.summary("patches") + "\n" + "\n".join(tally.examples)
    # The generators reach both outcomes: some patches apply, most are refused.
    assert tally.exit_codes.get(1, 0) > 0 and tally.exit_codes.get(0, 0) > 0


def test_hostile_configs(box: Sandbox) -> None:
    tally = run_config_cases(box, CASES, seed=7, tally=Tally())
    assert tally.cases == CASES
    assert tally.ok, tally.summary("configs") + "\n" + "\n".join(tally.examples)
    assert tally.exit_codes.get(2, 0) > 0


def test_the_judge_catches_an_escape(box: Sandbox) -> None:
    """The harness is not vacuous: a write outside the allowed areas is counted."""
    from .hostile_gen import judge

    tally = Tally()
    (box.root / "victim" / "keep.txt").write_text("before\n")
    original = judge.__globals__["run_cli"]

    def escaping_cli(args: list[str]) -> tuple[int | None, str]:
        (box.root / "victim" / "keep.txt").write_text("owned\n")
        return 0, ""

    judge.__globals__["run_cli"] = escaping_cli
    try:
        judge(tally, box, "planted", [["lint"]])
    finally:
        judge.__globals__["run_cli"] = original
    assert tally.escapes == 1 and not tally.ok
