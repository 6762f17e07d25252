""" "Taken upstream" only when upstream holds the patch's change byte for byte (issue 44, item 5).

`git patch-id --stable` ignores whitespace: an upstream commit that made `"hellobrave world"`
of the patch's `"hello brave world"` has the patch's patch-id. pin-sync dropped such a patch
as "taken upstream (dropped)" with exit 0 (with automerge, a pull request that merges itself),
and neither the series nor upstream then held the change. Now a patch is dropped only where
applying it changes nothing; a patch-id twin that is not exact is a stop that needs a look,
naming the upstream commit, and the canary says the same."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pytest

from patchctl import git

from .conftest import Project, Repo, make_patch, run_cli
from .fixtures_sync import EXACT_TWIN, WHITESPACE_TWINS, WhitespaceTwin, add_twin_patch, write_config

NOT_EXACT = "needs a look: an upstream commit has the patch's patch-id, not its exact change"


def patch_id(text: str, cwd: Path) -> str:
    return git.run(["patch-id", "--stable"], cwd, input=text).stdout.split()[0]


def sync(project: Project, *args: str) -> tuple[object, dict]:
    out = project.path.parent / "sync.json"
    out.unlink(missing_ok=True)
    result = run_cli("-C", project.path, "pin-sync", *args, "--json-file", out)
    assert "Traceback" not in result.output, result.output
    return result, json.loads(out.read_text())


def run_printed(project: Project, step: str) -> object:
    """The command in backquotes in STEP, run from the project's root exactly as printed:
    `patchctl ...` by patchctl's entry point, anything else by the shell."""
    command = step.split("`")[1]
    if command.startswith("patchctl "):
        return run_cli("-C", project.path, *shlex.split(command)[1:])
    return subprocess.run(command, shell=True, cwd=project.path, capture_output=True, text=True, check=True)


@pytest.mark.parametrize("twin", WHITESPACE_TWINS, ids=lambda t: t.name)
def test_a_patch_id_twin_that_differs_in_whitespace_is_a_stop_never_a_drop(
    project: Project, upstream: Repo, twin: WhitespaceTwin
) -> None:
    pin, upstream_commit = add_twin_patch(project, upstream, twin)
    patch = project.series_dir / f"0001-{twin.name}.patch"
    upstream_diff = upstream.git("show", "--format=", upstream_commit)
    assert patch_id(patch.read_text(), upstream.path) == patch_id(upstream_diff, upstream.path)  # the premise
    before = project.snapshot()

    result, payload = sync(project, "up", "--latest")
    assert result.exit_code == 1, result.output
    assert payload["state"] == "needs-look"
    [record] = payload["patches"]
    assert record["classification"] == NOT_EXACT, record
    assert f'upstream commit {upstream_commit[:12]} "Upstream tunes {twin.name}"' in record["detail"]
    assert "taken_upstream" not in record and not payload["warnings"]
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"patchctl: error: pin-sync of up stops at a patch that needs a look: main/{patch.name}")
    assert project.snapshot() == before  # nothing written, nothing dropped
    tree = project.path / ".patchctl/sync/up/main"
    assert (tree / twin.path).read_text() == twin.upstream  # nothing of the patch applied

    # The steps, as printed: compare, then drop it on purpose (upstream's version stands for it).
    compare = run_printed(project, payload["next_steps"][0])
    assert upstream_commit in compare.stdout and twin.upstream.splitlines()[-2] in compare.stdout
    dropped = run_printed(project, payload["next_steps"][1])
    assert dropped.exit_code == 0, dropped.output
    assert not patch.exists() and upstream.head in (project.path / "matrix.yaml").read_text()


def test_the_patch_made_again_by_hand_is_kept(project: Project, upstream: Repo) -> None:
    """The other way out the steps print: the patch's exact change is still needed on top of upstream's."""
    twin = WHITESPACE_TWINS[0]
    add_twin_patch(project, upstream, twin)
    result, payload = sync(project, "up", "--latest")
    assert result.exit_code == 1 and payload["state"] == "needs-look", result.output
    tree = project.path / ".patchctl/sync/up/main"
    (tree / twin.path).write_text(twin.patched)
    add = next(step for step in payload["next_steps"] if "stage everything but the .rej files" in step)
    run_printed(project, add)
    resumed, payload = sync(project, "--continue")
    assert resumed.exit_code == 0, resumed.output
    assert [p["classification"] for p in payload["patches"]] == ["resolved by hand"]
    kept = (project.series_dir / f"0001-{twin.name}.patch").read_text()
    assert '-static const char *greeting = "hellobrave world";' in kept
    assert '+static const char *greeting = "hello brave world";' in kept


@pytest.mark.parametrize("twin", [*WHITESPACE_TWINS, EXACT_TWIN], ids=lambda t: t.name)
def test_the_canary_says_needs_a_look_for_a_twin_and_drops_only_an_exact_one(
    project: Project, upstream: Repo, twin: WhitespaceTwin, tmp_path: Path
) -> None:
    _pin, upstream_commit = add_twin_patch(project, upstream, twin)
    out = tmp_path / "canary.json"
    result = run_cli("-C", project.path, "canary", "--no-bisect", "--json-file", out, "--work-dir", tmp_path / "w")
    assert "Traceback" not in result.output
    [entry] = json.loads(out.read_text())["series"][0]["patches"]
    if twin.exact:
        assert entry["verdict"] == "mechanical" and entry["upstream_holds"], entry
        assert entry["taken_upstream"]["commit"] == upstream_commit
    else:
        # As pin-sync stops there: a look (docs/reference/index.md#stops), not a hand.
        assert entry["verdict"] == "needs a look" and not entry.get("upstream_holds"), entry
        assert entry["trial"].startswith(f"{NOT_EXACT}: upstream commit {upstream_commit[:12]}")
        assert "taken_upstream" not in entry


def test_an_exact_twin_is_dropped_as_taken_upstream(project: Project, upstream: Repo) -> None:
    """Upstream made exactly the patch's change (its reverse applies cleanly): dropped, the commit named."""
    _pin, upstream_commit = add_twin_patch(project, upstream, EXACT_TWIN)
    result, payload = sync(project, "up", "--latest")
    assert result.exit_code == 0, result.output
    [record] = payload["patches"]
    assert record["classification"] == "already upstream (dropped)"
    assert record["taken_upstream"]["commit"] == upstream_commit
    assert not (project.series_dir / "0001-exact.patch").exists()


def test_a_patch_upstream_took_and_changed_since_is_a_stop_naming_the_commit(project: Project, upstream: Repo) -> None:
    """Same patch-id upstream, then upstream edited those lines again: upstream no longer holds the
    patch's change as the patch makes it; a look, naming the commit that took it (this was a drop)."""
    pin = upstream.head
    main_c = upstream.read("src/main.c")
    taken = main_c.replace("main 5\n", "main five\n")
    project.add_patch("0001-tune-main.patch", make_patch(upstream, pin, {"src/main.c": taken}, "Tune main"))
    project.add_patch("0002-add-paged.patch", make_patch(upstream, pin, {"src/paged.c": "int paged;\n"}, "Add paged"))
    write_config(project, pin)
    took = upstream.commit({"src/main.c": taken}, "Tune main upstream")
    upstream.commit({"src/main.c": taken.replace("main five\n", "main FIVE (reworked)\n")}, "Rework main five")
    result, payload = sync(project, "up", "--latest")
    assert result.exit_code == 1, result.output
    record = payload["patches"][0]
    assert record["patch"] == "0001-tune-main.patch"
    assert record["classification"] == NOT_EXACT and f"upstream commit {took[:12]}" in record["detail"]
    assert "3-way alone: conflict" in record["detail"] and record["conflicts"] == []
    assert project.patch_names() == ["0001-tune-main.patch", "0002-add-paged.patch"]
