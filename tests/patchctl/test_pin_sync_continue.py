"""`pin-sync --continue` goes on from the stop: the patches carried before it are not carried
again, the blobs 3-way needs are made once per sync (again only when they are gone), the
range-diff is computed once, at the end, and a --continue cut off half-way goes back to the
progress its state saved."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from patchctl import git
from patchctl.loop import carry, sync, sync_explain
from patchctl.series.applier import apply_in_worktree
from patchctl.state import worktree

from .conftest import Project, Repo, make_patch, numbered
from .faultinject import ci_points, project_files, run_patchctl, runner_env, stray_files
from .fixtures_bump import cut_patch
from .fixtures_sync import load_json, main_c, write_config

UTIL = numbered(30, "util")


def util_c(changes: dict[int, str]) -> str:
    lines = UTIL.splitlines()
    for number, text in changes.items():
        lines[number - 1] = text
    return "\n".join(lines) + "\n"


def stopped_bump(project: Project, upstream: Repo) -> None:
    """A series of three: 0001 conflicts at the new pin (upstream rewrote its line); 0003 is
    cut on top of 0002 (its index line names a blob only 0002 at the old pin makes) and upstream
    edited its context, so carrying it is a 3-way merge that needs that blob."""
    pin = upstream.head
    project.add_patch(
        "0001-patch-line-twenty.patch",
        make_patch(upstream, pin, {"src/main.c": main_c({20: "MAIN 20 patched"})}, "Patch line twenty"),
    )
    project.add_patch(
        "0002-util-five.patch",
        make_patch(upstream, pin, {"src/util.c": util_c({5: "UTIL 5 patched"})}, "Util five", "Why five."),
    )
    stacked = cut_patch(
        upstream,
        pin,
        [{"src/util.c": util_c({5: "UTIL 5 patched"})}, {"src/util.c": util_c({5: "UTIL 5 patched", 20: "UTIL 20"})}],
        "Util twenty",
    )
    project.add_patch("0003-util-twenty.patch", stacked)
    write_config(project, pin)
    upstream.commit({"src/main.c": main_c({20: "main 20 rewritten upstream"})}, "Upstream rewrites line 20")
    upstream.commit({"src/util.c": util_c({17: "util 17 upstream"})}, "Upstream edits util 17")


def run(cli, project: Project, *args: str):
    report = project.path.parent / "report.json"
    report.unlink(missing_ok=True)
    result = cli("-C", project.path, "pin-sync", *args, "--json-file", report)
    return result, (load_json(report) if report.exists() else None)


def resolve_line_twenty(project: Project) -> Path:
    tree = project.path / ".patchctl" / "sync" / "up" / "main"
    (tree / "src" / "main.c").write_text(main_c({20: "MAIN 20 patched, on top of upstream's rewrite"}))
    git.run(["add", "src/main.c"], tree)
    return tree


class Spy:
    """Records the calls to a real function and calls it."""

    def __init__(self, function):
        self.function = function
        self.calls: list[tuple] = []

    def __call__(self, *args, **kwargs):
        self.calls.append(args)
        return self.function(*args, **kwargs)


@pytest.fixture
def spies(monkeypatch: pytest.MonkeyPatch) -> dict[str, Spy]:
    found = {
        "carry": Spy(carry.carry_patch),
        "seed": Spy(sync.seed_three_way_objects),
        "range-diff": Spy(sync_explain.range_diff),
        "old side": Spy(sync_explain.old_series_head),
    }
    monkeypatch.setattr(carry, "carry_patch", found["carry"])
    monkeypatch.setattr(sync, "seed_three_way_objects", found["seed"])
    monkeypatch.setattr(sync_explain, "range_diff", found["range-diff"])
    monkeypatch.setattr(sync_explain, "old_series_head", found["old side"])
    return found


def reset(spies: dict[str, Spy]) -> None:
    for spy in spies.values():
        spy.calls.clear()


def carried(spies: dict[str, Spy]) -> list[str]:
    return [call[2].name for call in spies["carry"].calls]


def test_continue_carries_only_what_is_left_and_diffs_once_at_the_end(
    project: Project, upstream: Repo, cli, spies: dict[str, Spy]
) -> None:
    stopped_bump(project, upstream)
    result, payload = run(cli, project, "up", "--latest")
    assert result.exit_code == 1 and payload["state"] == "conflict"
    assert carried(spies) == ["0001-patch-line-twenty.patch"]
    assert len(spies["seed"].calls) == 1 and not spies["range-diff"].calls  # no range-diff at a stop
    assert payload["range_diff_note"] == sync.RANGE_DIFF_AT_THE_END and "range_diffs" not in payload

    reset(spies)
    resolve_line_twenty(project)
    resumed, payload = run(cli, project, "--continue")
    assert resumed.exit_code == 0, resumed.output
    # Only the patches after the stop are carried; the blobs seeded at the start serve them.
    assert carried(spies) == ["0002-util-five.patch", "0003-util-twenty.patch"]
    assert not spies["seed"].calls
    assert [(p["patch"], p["classification"]) for p in payload["patches"]] == [
        ("0001-patch-line-twenty.patch", "resolved by hand"),
        ("0002-util-five.patch", "clean"),
        ("0003-util-twenty.patch", "merged 3-way"),
    ]
    assert payload["patches"][0]["detail"].startswith("was: conflict") and payload["patches"][2]["detail"] == ""
    # One range-diff, at the end, whose old side is the commits made when the blobs were seeded.
    assert len(spies["range-diff"].calls) == 1 and not spies["old side"].calls
    diff = payload["range_diffs"]["main"]
    assert [line.split()[2] for line in diff.splitlines() if line[:1].isdigit()] == ["!", "=", "!"]
    assert "range_diff_note" not in payload
    assert cli("-C", project.path, "apply").exit_code == 0


def test_blobs_pruned_between_rounds_are_made_again(
    project: Project, upstream: Repo, cli, spies: dict[str, Spy], replayed_exports: list[dict]
) -> None:
    stopped_bump(project, upstream)
    assert run(cli, project, "up", "--latest")[0].exit_code == 1
    # A `git gc` in the cache drops what no ref reaches: the seeded blobs and the old side's commits.
    [mirror] = Path(os.environ["PATCHCTL_CACHE"]).glob("mirrors/*.git")
    git.run(["gc", "--quiet", "--prune=now"], mirror)
    reset(spies)
    resolve_line_twenty(project)
    resumed, payload = run(cli, project, "--continue")
    assert resumed.exit_code == 0, resumed.output
    assert len(spies["seed"].calls) == 1  # made again, as at the start: the verdicts are the same
    assert payload["patches"][2] == {
        "series": "main",
        "patch": "0003-util-twenty.patch",
        "classification": "merged 3-way",
        "detail": "",  # not "rebuilt from the old pin": the preimage was seeded, as in an uninterrupted sync
        "conflicts": [],
    }
    diff = payload["range_diffs"]["main"]  # its old side made again too, the commits being gone
    assert [line.split()[2] for line in diff.splitlines() if line[:1].isdigit()] == ["!", "=", "!"]
    # Export knew each commit from the replay (resolved, applied strictly, merged) and did not ask again.
    [replayed] = replayed_exports
    assert sorted(applies for _, applies in replayed.values()) == [False, False, True]


def test_a_continue_cut_off_mid_replay_goes_back_to_its_saved_progress(
    project: Project, upstream: Repo, cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    stopped_bump(project, upstream)
    assert run(cli, project, "up", "--latest")[0].exit_code == 1
    tree = resolve_line_twenty(project)
    real = carry.carry_patch

    def cut_off(where, move, patch):
        if patch.name != "0003-util-twenty.patch":
            return real(where, move, patch)
        apply_in_worktree(where, patch, three_way=True, commit=False)  # half way: merged, staged, not committed
        raise KeyboardInterrupt

    monkeypatch.setattr(carry, "carry_patch", cut_off)
    interrupted, _ = run(cli, project, "--continue")
    assert interrupted.exit_code == 130 and "patchctl: interrupted" in interrupted.stderr
    # The tree went on past the saved progress: 0002 committed, 0003 staged.
    assert git.run(["log", "-1", "--format=%s"], tree).stdout.strip() == "Util five"
    assert git.run(["diff", "--cached", "--name-only"], tree).stdout.split() == ["src/util.c"]

    monkeypatch.setattr(carry, "carry_patch", real)
    resumed, payload = run(cli, project, "--continue")
    assert resumed.exit_code == 0, resumed.output
    assert [(p["patch"], p["classification"]) for p in payload["patches"]] == [
        ("0001-patch-line-twenty.patch", "resolved by hand"),
        ("0002-util-five.patch", "clean"),
        ("0003-util-twenty.patch", "merged 3-way"),
    ]
    assert payload["warnings"] == [] and not tree.exists()
    assert project.patch_names() == ["0001-patch-line-twenty.patch", "0002-util-five.patch", "0003-util-twenty.patch"]
    applied = cli("-C", project.path, "apply")
    assert applied.exit_code == 0, applied.output
    util = (project.path / ".patchctl" / "trees" / "main" / "src" / "util.c").read_text()
    assert util == util_c({5: "UTIL 5 patched", 17: "util 17 upstream", 20: "UTIL 20"})


def test_a_state_an_earlier_version_saved_goes_on(project: Project, upstream: Repo, cli, spies: dict[str, Spy]) -> None:
    """A sync stopped by the patchctl before this one (state version 1, which records neither the
    commits the trees stood at nor the seeded series) goes on: what it lacks is made again."""
    stopped_bump(project, upstream)
    assert run(cli, project, "up", "--latest")[0].exit_code == 1
    path = worktree.sync_state_file(project.path, "up")
    state = json.loads(path.read_text())
    assert state["version"] == 2
    for entry in state["series"]:
        for key in ("head", "old_head", "unseeded"):
            del entry[key]
    path.write_text(json.dumps({**state, "version": 1}))
    reset(spies)
    resolve_line_twenty(project)
    resumed, payload = run(cli, project, "--continue")
    assert resumed.exit_code == 0, resumed.output
    assert len(spies["seed"].calls) == 1 and len(spies["old side"].calls) == 0
    assert [p["classification"] for p in payload["patches"]] == ["resolved by hand", "clean", "merged 3-way"]


def test_a_continue_killed_at_any_point_is_recoverable(project: Project, upstream: Repo, tmp_path: Path) -> None:
    """`pin-sync --continue` killed (SIGKILL: no finally) before one of its file operations or
    git runs, at points spread over the run: the next `--continue` ends the sync as an
    uninterrupted one does (or, killed once the pin is written, says to drop the sync, and
    `--abort` leaves the new state), never reading a patch carried half-way as upstream's."""
    stopped_bump(project, upstream)
    git.commit_all(project.path, "downstream")
    env = runner_env(tmp_path / "cache")

    def stopped(dest: Path) -> Path:
        shutil.copytree(project.path, dest, symlinks=True)
        first = run_patchctl(["-C", dest, "pin-sync", "up", "--latest"], env)
        assert first.exit_code == 1 and "stops at a conflict" in first.output, first.output
        tree = dest / ".patchctl" / "sync" / "up" / "main"
        (tree / "src" / "main.c").write_text(main_c({20: "MAIN 20 patched, on top of upstream's rewrite"}))
        git.run(["add", "src/main.c"], tree)
        return dest

    clean = stopped(tmp_path / "clean")
    old = project_files(clean)
    counted = run_patchctl(["-C", clean, "pin-sync", "--continue"], env, report=tmp_path / "count.json")
    assert counted.exit_code == 0 and counted.operations, counted.output
    new = project_files(clean)
    assert new != old
    # Spread over the run, and one mid-replay for certain: the second patch's `git apply`.
    applies = [i for i, op in enumerate(counted.trace, 1) if op.startswith("exec git apply")]
    assert len(applies) >= 2, counted.trace
    points = sorted(set(ci_points(counted.trace, renames=3, spread=5)) | {applies[1]})
    for point in points:
        dest = stopped(tmp_path / f"k{point:04d}")
        killed = run_patchctl(["-C", dest, "pin-sync", "--continue"], env, kill_at=point)
        assert killed.exit_code == 137, (point, killed.output)
        out = tmp_path / f"k{point:04d}.json"
        again = run_patchctl(["-C", dest, "pin-sync", "--continue", "--json-file", out], env)
        assert not again.traceback, again.output
        if again.exit_code == 0:
            report = json.loads(out.read_text())
            assert report["warnings"] == [], (point, counted.trace[point - 1], report["warnings"])
            assert [p["classification"] for p in report["patches"]] == ["resolved by hand", "clean", "merged 3-way"]
        else:  # killed once patches/ and the pin were written: the state is left, and names the way out
            assert again.exit_code == 2 and "--abort" in again.output, (point, again.output)
            assert run_patchctl(["-C", dest, "pin-sync", "--abort"], env).exit_code == 0
        assert project_files(dest) == new, (point, counted.trace[point - 1])
        assert not stray_files(dest, sync_trees=True), (point, stray_files(dest, sync_trees=True))
        shutil.rmtree(dest)
