"""`pin-sync --continue --drop` drops the patch that stopped the sync, whatever the stop: a
conflict (markers in the tree, staged or not), a patch that needs a hand (after a partial
`git apply --reject` too), a patch that needs a look. Like `git am --skip`, it undoes the
patch's merge itself; only commits made for the patch are left for the user to discard.
And the needs-a-hand advice promises a `.rej` only where git writes one (issue 45, items 5, 6)."""

from __future__ import annotations

import json
import re
import subprocess

from patchctl import git

from .conftest import Project, Repo, make_patch, one_line_error
from .fixtures_sync import load_json, main_c, write_config

SYNC_TREE = (".patchctl", "sync", "up", "main")


def sync(cli, project: Project, *args: str):
    report = project.path.parent / "report.json"
    report.unlink(missing_ok=True)
    result = cli("-C", project.path, "pin-sync", *args, "--json-file", report)
    assert "Traceback" not in result.output, result.output
    return result, (load_json(report) if report.exists() else None)


def two_patches(project: Project, upstream: Repo, *, plain: bool = False) -> None:
    """0001 changes line 20 of main.c; 0002 adds a file. PLAIN: 0001 without index lines (git
    cannot merge it 3-way: where it does not apply, it needs a hand)."""
    pin = upstream.head
    project.add_patch(
        "0001-patch-line-twenty.patch",
        make_patch(upstream, pin, {"src/main.c": main_c({5: "main five", 20: "MAIN 20 patched"})}, "Patch line twenty"),
    )
    if plain:
        path = project.series_dir / "0001-patch-line-twenty.patch"
        path.write_text(re.sub(r"^index [0-9a-f]+\.\.[0-9a-f]+.*\n", "", path.read_text(), flags=re.M))
    project.add_patch(
        "0002-add-notes.patch", make_patch(upstream, pin, {"src/notes.txt": "notes\n"}, "Add notes", "Notes help.")
    )
    write_config(project, pin)
    git.commit_all(project.path, "series")


def tree(project: Project):
    return project.path.joinpath(*SYNC_TREE)


def dropped(cli, project: Project) -> dict:
    result, payload = sync(cli, project, "up", "--continue", "--drop")
    assert result.exit_code == 0, result.output
    assert payload["state"] == "synced"
    first = payload["patches"][0]
    assert (first["patch"], first["classification"]) == ("0001-patch-line-twenty.patch", "dropped by hand (--drop)")
    assert "main/0001-patch-line-twenty.patch was DROPPED from the series" in result.stderr
    assert project.patch_names() == ["0002-add-notes.patch"]
    assert "src/main.c" not in (project.series_dir / "0002-add-notes.patch").read_text()
    return first


def test_drop_at_a_conflict_undoes_its_merge(project: Project, upstream: Repo, cli) -> None:
    two_patches(project, upstream)
    upstream.commit({"src/main.c": main_c({20: "main 20 rewritten upstream"})}, "Upstream rewrites line 20")
    result, payload = sync(cli, project, "up", "--latest")
    assert result.exit_code == 1 and payload["state"] == "conflict"
    assert "<<<<<<<" in (tree(project) / "src/main.c").read_text()
    drop = "`patchctl pin-sync up --continue --drop` (it undoes the patch's merge"
    assert any(drop in step for step in payload["next_steps"])
    assert not any("reset --hard" in s for s in payload["next_steps"])
    (tree(project) / "src/main.c").write_text(main_c({20: "half resolved"}))  # the user began, then gave up
    git.run(["add", "src/main.c"], tree(project))
    first = dropped(cli, project)
    assert first["detail"].startswith("was: conflict")


def test_drop_after_a_partial_apply_reject_of_a_patch_that_needs_a_hand(project: Project, upstream: Repo, cli) -> None:
    two_patches(project, upstream, plain=True)
    upstream.commit({"src/main.c": main_c({19: "main 19 rewritten upstream"})}, "Upstream rewrites line 19")
    result, payload = sync(cli, project, "up", "--latest")
    assert result.exit_code == 1 and payload["state"] == "needs-hand"
    patch = project.series_dir / "0001-patch-line-twenty.patch"
    subprocess.run(["git", "apply", "--reject"], cwd=tree(project), stdin=patch.open("rb"), capture_output=True)
    assert (tree(project) / "src/main.c.rej").exists()
    assert "main five" in (tree(project) / "src/main.c").read_text()  # the hunk that applied
    first = dropped(cli, project)
    assert first["detail"].startswith("was: needs a hand")
    assert ".rej" not in (project.series_dir / "0002-add-notes.patch").read_text()


def test_drop_leaves_commits_made_for_the_patch_to_the_user(project: Project, upstream: Repo, cli) -> None:
    two_patches(project, upstream)
    upstream.commit({"src/main.c": main_c({20: "main 20 rewritten upstream"})}, "Upstream rewrites line 20")
    sync(cli, project, "up", "--latest")
    before = git.rev_parse(tree(project), "HEAD")
    (tree(project) / "src/main.c").write_text(main_c({20: "resolved"}))
    git.run(["commit", "-qam", "Patch line twenty"], tree(project))
    error = one_line_error(cli("-C", project.path, "pin-sync", "up", "--continue", "--drop"), 2)
    assert "has commits made for 0001-patch-line-twenty.patch, which --drop does not discard" in error
    assert f"reset --hard {before[:12]}" in error and error.count("`") == 6


def test_needs_a_hand_promises_no_rej_for_a_file_gone_upstream(project: Project, upstream: Repo, cli) -> None:
    pin = upstream.head
    util = upstream.read("src/util.c")
    project.add_patch(
        "0001-two-files.patch",
        make_patch(
            upstream,
            pin,
            {"src/main.c": main_c({20: "MAIN 20 patched"}), "src/util.c": util.replace("util 5\n", "UTIL 5\n")},
            "Two files",
            "Both need it.",
        ),
    )
    path = project.series_dir / "0001-two-files.patch"
    path.write_text(re.sub(r"^index [0-9a-f]+\.\.[0-9a-f]+.*\n", "", path.read_text(), flags=re.M))
    write_config(project, pin)
    git.commit_all(project.path, "series")
    upstream.commit({"src/main.c": main_c({19: "main 19 rewritten upstream"}), "src/util.c": None}, "Drop util.c")
    result, payload = sync(cli, project, "up", "--latest")
    assert result.exit_code == 1 and payload["state"] == "needs-hand", result.output
    [step] = [s for s in payload["next_steps"] if "apply --reject" in s]
    assert "src/util.c is gone from the target, so git writes no .rej for it" in step
    subprocess.run(["git", "apply", "--reject"], cwd=tree(project), stdin=path.open("rb"), capture_output=True)
    assert (tree(project) / "src/main.c.rej").exists() and not (tree(project) / "src/util.c.rej").exists()


def test_drop_at_a_patch_that_needs_a_look(project: Project, upstream: Repo, cli) -> None:
    """Upstream made the series' counter edit for another reason (fixtures_bump): dropped on purpose."""
    from .fixtures_bump import build_bump

    build_bump(upstream, project)
    for name in ("0001-clip-unicode.patch", "0002-vocab-patch-step-28.patch"):
        (project.series_dir / name).unlink()
    git.commit_all(project.path, "the counter patch alone")
    [name] = project.patch_names()
    result, payload = sync(cli, project, "up", "--latest")
    assert result.exit_code == 1 and payload["state"] == "needs-look"
    result, payload = sync(cli, project, "up", "--continue", "--drop")
    assert result.exit_code == 0, result.output
    assert [(p["patch"], p["classification"]) for p in payload["patches"]] == [(name, "dropped by hand (--drop)")]
    assert payload["patches"][0]["detail"].startswith("was: needs a look")


def commit_as_printed(project: Project, payload: dict) -> None:
    [step] = [s for s in payload["next_steps"] if s.startswith("review and commit: `")]
    command = step.removeprefix("review and commit: `").removesuffix("`")
    env = {"GIT_AUTHOR_NAME": "D", "GIT_AUTHOR_EMAIL": "d@x", "GIT_COMMITTER_NAME": "D", "GIT_COMMITTER_EMAIL": "d@x"}
    done = subprocess.run(["bash", "-c", command], cwd=project.path, env={**env, "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, command


def test_the_commit_names_each_stop_by_its_word_and_status_reads_it_back(project: Project, upstream: Repo, cli) -> None:
    """A conflict resolved by hand is a `Patchctl-Conflict:`, a patch that needed a hand and was
    dropped a `Patchctl-Needed-A-Hand:` (and `Patchctl-Dropped:`): the word of its stop, never
    "needed a hand" for a plain conflict (issue 45, item 6)."""
    two_patches(project, upstream)
    upstream.commit({"src/main.c": main_c({20: "main 20 rewritten upstream"})}, "Upstream rewrites line 20")
    sync(cli, project, "up", "--latest")
    (tree(project) / "src/main.c").write_text(main_c({5: "main five", 20: "MAIN 20 patched, resolved"}))
    git.run(["add", "src/main.c"], tree(project))
    result, payload = sync(cli, project, "up", "--continue")
    assert result.exit_code == 0, result.output
    [step] = [s for s in payload["next_steps"] if "git commit" in s]
    assert "Patchctl-Conflict: main/0001-patch-line-twenty.patch" in step and "Needed-A-Hand" not in step
    commit_as_printed(project, payload)
    status = cli("-C", project.path, "status", "--no-trial", "--json")
    assert status.exit_code == 0, status.output
    [series] = json.loads(status.stdout)["series"]
    fates = {p["patch"]: [s["fate"] for s in p["syncs"]] for p in series["patches"]}
    assert fates["0001-patch-line-twenty.patch"] == ["conflict"]


def test_a_dropped_patch_that_needed_a_hand_is_said_so(project: Project, upstream: Repo, cli) -> None:
    two_patches(project, upstream, plain=True)
    upstream.commit({"src/main.c": main_c({19: "main 19 rewritten upstream"})}, "Upstream rewrites line 19")
    sync(cli, project, "up", "--latest")
    result, payload = sync(cli, project, "up", "--continue", "--drop")
    [step] = [s for s in payload["next_steps"] if "git commit" in s]
    assert "Patchctl-Needed-A-Hand: main/0001-patch-line-twenty.patch" in step
    assert "Patchctl-Dropped: main/0001-patch-line-twenty.patch" in step and "Patchctl-Conflict" not in step
