"""A stopped sync keeps git's logs of its range (the upstream's commits, the health rows'
drift): each --continue reads them from its state, not from git, and reports the same."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from patchctl import git
from patchctl.loop import health, sync_history
from patchctl.state import worktree

from .conftest import Project, make_upstream
from .fixtures_sync import add_hello_patch, add_line20_patch, main_c, write_config


def stopped_at_first_conflict(root: Path, cli) -> Project:
    """A real sync stopped at its first conflict (line 20), a second patch still to replay that
    stops too (upstream added hello.c as well); line 20 resolved and staged, as a user would."""
    upstream = make_upstream(root / "upstream")
    project = Project(root / "project", upstream, upstream.head)
    pin = upstream.head
    add_line20_patch(project, upstream, pin)
    add_hello_patch(project, upstream, pin)
    write_config(project, pin)
    git.commit_all(project.path, "downstream")
    upstream.commit({"src/main.c": main_c({20: "main 20 rewritten upstream"})}, "Upstream rewrites line 20")
    upstream.commit({"src/hello.c": "int hello;\n"}, "Upstream adds hello.c")
    result = cli("-C", project.path, "pin-sync", "up", "--latest")
    assert result.exit_code == 1 and "conflict" in result.stderr, result.output
    tree = project.path / ".patchctl" / "sync" / "up" / project.series_name
    (tree / "src" / "main.c").write_text(main_c({20: "MAIN 20 patched, on upstream's rewrite"}))
    git.run(["add", "src/main.c"], tree)
    return project


def continued(project: Project, cli) -> dict:
    git._FIXED.clear()  # as in a new process: nothing asked of git yet
    report = project.path.parent / "report.json"
    result = cli("-C", project.path, "pin-sync", "--continue", "--json-file", report)
    assert result.exit_code == 1 and "src/hello.c" in result.stderr, result.output  # the next stop
    return json.loads(report.read_text())


def test_a_continue_reads_the_range_from_its_state_not_from_git(
    tmp_path: Path, cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = stopped_at_first_conflict(tmp_path / "kept", cli)
    state = json.loads(worktree.sync_state_file(project.path, "up").read_text())
    old, new = state["old_pin"], state["target"]
    assert set(state["upstream_facts"]["range_logs"]) == {"commits", "drift"}
    asked: list[list[str]] = []
    real_run = git.run
    monkeypatch.setattr(git, "run", lambda args, *a, **k: asked.append(list(args)) or real_run(args, *a, **k))
    kept = continued(project, cli)
    assert [args for args in asked if args in (sync_history.listing_log(old, new), health.drift_log(old, new))] == []
    assert [c["subject"] for c in kept["commits"]] == ["Upstream rewrites line 20", "Upstream adds hello.c"]

    # The same sync with nothing kept (as an earlier version left it): git asked, the same report.
    other = stopped_at_first_conflict(tmp_path / "asked", cli)
    path = worktree.sync_state_file(other.path, "up")
    planted = json.loads(path.read_text())
    del planted["upstream_facts"]["range_logs"]
    path.write_text(json.dumps(planted))
    asked.clear()
    fresh = continued(other, cli)
    assert sync_history.listing_log(old, new) in asked and health.drift_log(old, new) in asked
    assert (fresh["commits"], fresh["commits_note"], fresh["health"]) == (
        kept["commits"],
        kept["commits_note"],
        kept["health"],
    )
    again = json.loads(path.read_text())["upstream_facts"]["range_logs"]
    assert again == state["upstream_facts"]["range_logs"]  # kept at this stop, for the next round
