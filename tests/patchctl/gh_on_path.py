"""The rehearsal's `gh` stand-in (tests/journeys/gh_standin.py) put on PATH for a test: its state
and its log of calls live in a store directory, nothing reaches the network."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

STANDIN = Path(__file__).resolve().parents[1] / "journeys" / "gh_standin.py"


def gh_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, token: str) -> Path:
    """`gh` on PATH as the stand-in, authenticated with TOKEN; its store (github.json, gh.jsonl)."""
    bin_dir, store = tmp_path / "bin", tmp_path / "store"
    bin_dir.mkdir()
    store.mkdir()
    wrapper = bin_dir / "gh"
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} {STANDIN} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{Path(sys.executable).parent}:/usr/bin:/bin")
    monkeypatch.setenv("JOURNEY_STORE", str(store))
    monkeypatch.setenv("JOURNEY_GITHUB", str(tmp_path / "github"))
    monkeypatch.setenv("GH_TOKEN", token)
    return store
