"""This repository's own series, at the pin of the upstream source the session follows: the check
`.ci/run` makes on every branch, a pin-sync pull request's included (issue 43, item 3).

Every series of the repository's matrix.yaml lints clean (the strict apply of PC009 included),
applies to its upstream's pin, and `export --check` finds the files as patchctl writes them. The
source is the session's (`PATCHCTL_UPSTREAM_SOURCE`, conftest.SESSION_UPSTREAM_SOURCE): CI's test
job follows `ci` as its other jobs do, because a pin-sync branch moves every pin to a commit the
embedded default may not have (llama-cpp-python's sdists vendor a few llama.cpp commits). Under a
source that cannot serve the pin these tests fail with patchctl's one line saying so (exit 3).

Nothing is written into the checkout: the files the commands read are copied first.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from patchctl.project import config as config_mod

from .conftest import SESSION_UPSTREAM_SOURCE

pytestmark = pytest.mark.realupstream

ROOT = Path(__file__).resolve().parents[2]


def own_copy(dest: Path) -> tuple[Path, config_mod.Config]:
    """matrix.yaml, every series directory and every pin file of this repository, in DEST."""
    loaded = config_mod.load(ROOT / "matrix.yaml").with_upstream_source(SESSION_UPSTREAM_SOURCE)
    shutil.copy(ROOT / "matrix.yaml", dest / "matrix.yaml")
    for series in loaded.series.values():
        relative = (ROOT / series.dir).relative_to(ROOT)
        if (ROOT / relative).is_dir():
            shutil.copytree(ROOT / relative, dest / relative)
    for upstream in loaded.upstreams.values():
        for pin_file in upstream.pin_files:
            (dest / pin_file.path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(ROOT / pin_file.path, dest / pin_file.path)
    return dest, loaded


def test_own_series_lint_clean_at_the_followed_pin(tmp_path: Path, cli) -> None:
    project, loaded = own_copy(tmp_path)
    assert loaded.series, "matrix.yaml declares no series: nothing to check"
    result = cli("-C", project, "--upstream-source", SESSION_UPSTREAM_SOURCE, "lint")
    assert result.exit_code == 0, result.output


def test_own_series_apply_at_the_followed_pin_and_export_back_unchanged(tmp_path: Path, cli) -> None:
    project, loaded = own_copy(tmp_path)
    source = ("-C", project, "--upstream-source", SESSION_UPSTREAM_SOURCE)
    for name, series in loaded.series.items():
        applied = cli(*source, "apply", name, "--json")
        assert applied.exit_code == 0, applied.output
        [result] = json.loads(applied.stdout)["results"]
        assert result["rev"] == loaded.upstreams[series.upstream].pin, result
        exported = cli(*source, "export", name, "--check")
        assert exported.exit_code == 0, exported.output
