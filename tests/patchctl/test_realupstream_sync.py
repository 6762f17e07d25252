"""Canary and pin-sync of this repository's own llama.cpp series on the real llama.cpp trees
(0.3.30 -> 0.3.33, vendored by llama-cpp-python's sdists; the cache is shared by runs).

The series changes over time, so these tests run against whatever patches/llama.cpp holds
and assert whichever outcome is true, with the report saying precisely what happened to
every patch."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from .conftest import REAL_PIN, REAL_TIP
from .conftest import tree_files as _tree_files

pytestmark = pytest.mark.realupstream

REPO = Path(__file__).resolve().parents[2]
SERIES = "llama.cpp"
STRICT_OK = {"applied", "applied-with-offset"}
REPLAY_CLASSES = {"clean", "applied with offset", "merged 3-way", "already upstream (dropped)", "conflict"}


def tree_files(project: Path) -> dict[str, bytes]:
    """The project's files, without patchctl's own state and logs (.patchctl is gitignored)."""
    return {k: v for k, v in _tree_files(project).items() if not k.startswith(".patchctl/")}


def own_series() -> list[str]:
    return sorted(p.name for p in (REPO / "patches" / SERIES).glob("*.patch"))


def copy_project(tmp_path: Path, *, keep_build: bool) -> Path:
    """The repository's matrix.yaml and series in a scratch project. Without KEEP_BUILD the
    full library build and the model gate (minutes each; the slow tier runs them) are left
    out; the other gates stay."""
    project = tmp_path / "project"
    shutil.copytree(REPO / "patches" / SERIES, project / "patches" / SERIES)
    if keep_build:
        shutil.copy(REPO / "matrix.yaml", project / "matrix.yaml")
    else:
        data = yaml.safe_load((REPO / "matrix.yaml").read_text())
        data["series"][SERIES].pop("build", None)
        data["series"][SERIES]["gates"] = [g for g in data["series"][SERIES]["gates"] if g["name"] != "model-gate"]
        (project / "matrix.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    assert yaml.safe_load((project / "matrix.yaml").read_text())["upstreams"][SERIES]["pin"] == REAL_PIN
    return project


def test_canary_on_the_real_tip(tmp_path: Path, cli) -> None:
    project = copy_project(tmp_path, keep_build=False)
    before = tree_files(project)
    out = tmp_path / "canary.json"
    result = cli("-C", project, "canary", SERIES, "--json-file", out, "--work-dir", tmp_path / "work")
    payload = json.loads(out.read_text())
    assert payload["pin"] == REAL_PIN and payload["tip"] == REAL_TIP and payload["commits_since_pin"] == 1
    [series] = payload["series"]
    assert [p["patch"] for p in series["patches"]] == own_series()
    for patch in series["patches"]:
        if patch["strict"] in STRICT_OK:
            assert patch["verdict"] == "ok" and patch["breaking_commit"] is None
        else:
            # One upstream commit separates the two versions: bisect can only name it.
            assert patch["verdict"] in ("mechanical", "conflict", "needs a hand", "needs a look") and patch["trial"]
            assert patch["breaking_commit"]["sha"] == REAL_TIP or patch["bisect_note"]
    assert result.exit_code == (1 if payload["red"] else 0)
    assert payload["red"] == any(p["verdict"] != "ok" for p in series["patches"])
    assert ("✅ green" if not payload["red"] else "❌ red") in result.stdout
    assert tree_files(project) == before


def test_pin_sync_of_the_own_series_with_its_gates(tmp_path: Path, cli) -> None:
    project = copy_project(tmp_path, keep_build=False)
    before = tree_files(project)
    out = tmp_path / "sync.json"
    result = cli(
        "-C", project, "pin-sync", SERIES, "--to", REAL_TIP, "--json-file", out, "--report", tmp_path / "sync.md"
    )
    payload = json.loads(out.read_text())
    assert payload["old_pin"] == REAL_PIN and payload["new_pin"] == REAL_TIP
    assert [c["sha"] for c in payload["commits"]] == [REAL_TIP]
    names = own_series()
    replayed = [p["patch"] for p in payload["patches"]]
    assert replayed == names[: len(replayed)] and all(p["classification"] in REPLAY_CLASSES for p in payload["patches"])
    markdown = (tmp_path / "sync.md").read_text()
    for record in payload["patches"]:
        assert f"| {record['patch']} | {record['classification']} |" in markdown

    if payload["state"] == "synced":
        assert result.exit_code == 0, result.output
        assert replayed == names
        gate_names = [g["name"] for g in payload["gates"]]
        declared = [
            g["name"] for g in yaml.safe_load((project / "matrix.yaml").read_text())["series"][SERIES].get("gates", [])
        ]
        assert gate_names == ["strict-apply", *declared] and all(g["ok"] for g in payload["gates"])
        after = tree_files(project)
        # The pypi-sdist commits are the sdist repository's own: the ci: pin (github.com's) stays, said so.
        assert after["matrix.yaml"] == before["matrix.yaml"].replace(REAL_PIN.encode(), REAL_TIP.encode())
        assert any("its ci: pin stays at" in w and "--upstream-source ci pin-sync" in w for w in payload["warnings"])
        assert "matrix.yaml" in payload["files_changed"]
        # The series as written applies strictly at the new pin.
        applied = cli("-C", project, "apply", SERIES, "--into", tmp_path / "applied")
        assert applied.exit_code == 0, applied.output
    else:
        assert result.exit_code == 1 and payload["state"] in ("conflict", "gate-failed")
        assert tree_files(project) == before  # nothing written when it stops
        if payload["state"] == "conflict":
            assert payload["patches"][-1]["classification"] != "clean" and payload["next_steps"]
        else:
            failed = [g for g in payload["gates"] if not g["ok"]]
            assert len(failed) == 1 and failed[0]["detail"]
        assert cli("-C", project, "pin-sync", "--abort").exit_code == 0


@pytest.mark.slow
def test_pin_sync_dry_run_with_the_full_library_build(tmp_path: Path, cli) -> None:
    project = copy_project(tmp_path, keep_build=True)
    before = tree_files(project)
    out = tmp_path / "sync.json"
    result = cli("-C", project, "pin-sync", SERIES, "--to", REAL_TIP, "--dry-run", "--json-file", out)
    payload = json.loads(out.read_text())
    builds = [g for g in payload["gates"] if g["kind"] == "build"]
    if payload["state"] == "dry-run":
        assert result.exit_code == 0 and builds and all(g["ok"] for g in builds)
    else:
        assert result.exit_code == 1 and payload["state"] in ("conflict", "gate-failed")
    assert tree_files(project) == before
