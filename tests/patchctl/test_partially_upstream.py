"""Upstream took part (or all) of a patch, with other context around it: pin-sync, canary and
export classify it (already upstream, partially upstream, conflict) with a clear message,
never a traceback and never a regenerated patch without a diff."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from patchctl import git

from .conftest import Project, Repo, make_patch, numbered


def edited(prefix: str, count: int, lines: dict[int, str]) -> str:
    """The upstream fixture's file of COUNT numbered lines, with LINES replaced."""
    text = numbered(count, prefix).splitlines(keepends=True)
    for number, line in lines.items():
        text[number - 1] = line + "\n"
    return "".join(text)


def tune(*, main_lines: dict[int, str], util_lines: dict[int, str] | None = None) -> dict[str, str]:
    """src/main.c (and src/util.c) with the given lines replaced."""
    files = {"src/main.c": edited("main", 40, main_lines)}
    if util_lines is not None:
        files["src/util.c"] = edited("util", 30, util_lines)
    return files


def start(project: Project, upstream: Repo, files: dict[str, str]) -> str:
    pin = upstream.head
    project.add_patch("0001-tune.patch", make_patch(upstream, pin, files, "Tune main and util"))
    return pin


def sync_json(cli, project: Project, *args: str) -> tuple[object, dict]:
    out = project.path.parent / "sync.json"
    out.unlink(missing_ok=True)
    result = cli("-C", project.path, "pin-sync", "up", "--latest", *args, "--json-file", out)
    assert "Traceback" not in result.output, result.output
    return result, json.loads(out.read_text())


def test_whole_change_taken_upstream_in_other_context_is_already_upstream(
    project: Project, upstream: Repo, cli
) -> None:
    start(project, upstream, tune(main_lines={5: "main five"}))
    # Upstream takes the change and edits a context line: neither the patch nor its reverse applies.
    upstream.commit(tune(main_lines={5: "main five", 7: "main seven"}), "Take the change")
    canary = cli("-C", project.path, "canary", "--json-file", project.path.parent / "canary.json")
    assert "Traceback" not in canary.output
    [patch] = json.loads((project.path.parent / "canary.json").read_text())["series"][0]["patches"]
    assert patch["verdict"] == "mechanical" and patch["trial"].startswith("already upstream"), patch

    result, payload = sync_json(cli, project, "--dry-run")
    assert result.exit_code == 0, result.output
    [record] = payload["patches"]
    assert record["classification"] == "already upstream (dropped)"
    assert "DROPPED" in result.stderr and "malformed" not in result.output

    result, payload = sync_json(cli, project)
    assert result.exit_code == 0, result.output
    assert not (project.series_dir / "0001-tune.patch").exists()
    assert payload["warnings"][-1].startswith("series main has no patch left: every command now refuses it")
    # Fail closed: a series with no patch is refused until matrix.yaml says an empty one is intended.
    refused = cli("-C", project.path, "apply")
    assert refused.exit_code == 2 and "patches/main holds no *.patch file" in refused.stderr
    config = project.path / "matrix.yaml"
    config.write_text(config.read_text().replace("dir: patches/main\n", "dir: patches/main\n    allow_empty: true\n"))
    assert cli("-C", project.path, "apply").exit_code == 0


def test_part_taken_upstream_is_partially_upstream_and_the_rest_is_kept(project: Project, upstream: Repo, cli) -> None:
    start(project, upstream, tune(main_lines={5: "main five", 30: "main thirty"}, util_lines={10: "ten"}))
    # Upstream takes the util.c change verbatim and main.c's first hunk with an edited context line.
    upstream.commit(tune(main_lines={5: "main five", 7: "main seven"}, util_lines={10: "ten"}), "Take half")
    result, payload = sync_json(cli, project, "--dry-run")
    assert result.exit_code == 0, result.output
    [record] = payload["patches"]
    assert record["classification"] == "partially upstream (merged 3-way)", record
    assert record["detail"] == "already in the upstream tree: src/main.c hunk #1, src/util.c; the rest merged 3-way"

    result, payload = sync_json(cli, project)
    assert result.exit_code == 0, result.output
    kept = (project.series_dir / "0001-tune.patch").read_text()
    assert "+main thirty" in kept and "+main five" not in kept and "src/util.c" not in kept
    assert cli("-C", project.path, "apply").exit_code == 0
    assert "main thirty" in (project.path / ".patchctl/trees/main/src/main.c").read_text()
    assert cli("-C", project.path, "export", "main", "--check").exit_code == 0


def test_part_taken_and_the_rest_clashing_is_a_conflict(project: Project, upstream: Repo, cli) -> None:
    start(project, upstream, tune(main_lines={5: "main five", 30: "main thirty"}))
    upstream.commit(tune(main_lines={5: "main five", 7: "main seven", 30: "main 30 upstream"}), "Clash")
    result, payload = sync_json(cli, project, "--dry-run")
    assert result.exit_code == 1, result.output
    [record] = payload["patches"]
    assert record["classification"] == "conflict" and record["conflicts"], record
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("patchctl: error: pin-sync of up (dry run) stops at a conflict")


def test_export_drops_a_commit_that_changes_nothing(project: Project, upstream: Repo, cli) -> None:
    start(project, upstream, tune(main_lines={5: "main five"}))
    assert cli("-C", project.path, "apply").exit_code == 0
    tree = project.path / ".patchctl/trees/main"
    git.run(["commit", "-q", "--allow-empty", "-m", "Nothing left\n\nIts change went upstream."], tree)
    before = (project.series_dir / "0001-tune.patch").read_bytes()
    result = cli("-C", project.path, "export", "main", "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["empty_commits"] == ["Nothing left"] and payload["written"] == []
    assert (project.series_dir / "0001-tune.patch").read_bytes() == before
    assert sorted(p.name for p in project.series_dir.iterdir()) == ["0001-tune.patch"]
    text = cli("-C", project.path, "export", "main")
    assert "dropped commit 'Nothing left': it changes nothing" in text.stdout


def test_partially_upstream_is_reported_for_a_merged_hunk_in_part(tmp_path: Path, upstream: Repo, cli) -> None:
    project = Project(tmp_path / "project", upstream, upstream.head)
    start(project, upstream, tune(main_lines={5: "main five", 8: "main eight"}))  # one hunk
    upstream.commit(tune(main_lines={5: "main five"}), "Take one line of it")
    result, payload = sync_json(cli, project, "--dry-run")
    assert result.exit_code == 0, result.output
    [record] = payload["patches"]
    assert record["detail"].startswith("already in the upstream tree: src/main.c hunk #1 (in part)"), record


def _best_alignment_by_every_start(new_lines: list[str], post: list[str], anchors: list[int], near: int) -> int | None:
    """The plain reference: every start of NEW_LINES scored, the best kept (the nearest to NEAR on a tie)."""
    best, chosen = None, None
    for start in range(-len(post) + 1, len(new_lines)):
        if any(not (0 <= start + a < len(new_lines)) or new_lines[start + a] != post[a] for a in anchors):
            continue
        score = sum(
            1 for i, text in enumerate(post) if 0 <= start + i < len(new_lines) and new_lines[start + i] == text
        )
        if score and (best is None or (score, -abs(start - near)) > best):
            best, chosen = (score, -abs(start - near)), start
    return chosen


@settings(max_examples=300, deadline=None)
@given(
    new_lines=st.lists(st.sampled_from("abcd"), max_size=30),
    post=st.lists(st.sampled_from("abcdxy"), min_size=1, max_size=8),
    anchor_picks=st.lists(st.integers(0, 7), max_size=2, unique=True),
    near=st.integers(-5, 35),
)
def test_a_hunk_is_aligned_where_scoring_every_start_would_put_it(
    new_lines: list[str], post: list[str], anchor_picks: list[int], near: int
) -> None:
    """`_best_alignment` scores only the starts where a line is equal (on a long file, a few
    instead of thousands): it must choose what scoring every start chooses."""
    from patchctl.loop.carry import _best_alignment

    anchors = sorted({a for a in anchor_picks if a < len(post)})
    assert _best_alignment(new_lines, post, anchors, near) == _best_alignment_by_every_start(
        new_lines, post, anchors, near
    )
