"""applier: strict application in a private index and in a work tree, with every failure
classified (real git repositories, real patches made by git)."""

from __future__ import annotations

import re
from pathlib import Path

from patchctl import git
from patchctl.series.applier import (
    IndexBuilder,
    Status,
    _seed_in_one_import,
    apply_in_worktree,
    apply_series_to_index,
    is_clean,
    seed_three_way_objects,
    unsafe_path_reason,
)
from patchctl.series.commits import fast_importable
from patchctl.series.exporter import _surely_does_not_apply
from patchctl.series.patchset import PatchFile

from .conftest import Repo, make_patch, numbered

MAIN = numbered(40, "main")


def patch_file(tmp_path: Path, name: str, text: str) -> PatchFile:
    path = tmp_path / name
    path.write_text(text)
    return PatchFile(path, path.read_bytes())


def edit_main(upstream: Repo, base: str, old: str, new: str, subject: str) -> str:
    text = git.run(["show", f"{base}:src/main.c"], upstream.path).stdout
    return make_patch(upstream, base, {"src/main.c": text.replace(old, new)}, subject)


def test_a_series_commits_one_deterministic_commit_per_patch_and_leaves_the_work_tree(
    tmp_path: Path, upstream: Repo
) -> None:
    base = upstream.head
    first = patch_file(tmp_path, "0001-a.patch", edit_main(upstream, base, "main 5\n", "main 5 a\n", "Change A"))
    second = patch_file(
        tmp_path, "0002-b.patch", make_patch(upstream, base, {"src/util.c": "util\n"}, "Change B", "Why B.")
    )
    before = tree_state(upstream)
    outcomes, head = apply_series_to_index(upstream.path, base, [first, second])
    assert [o.status for o in outcomes] == [Status.APPLIED, Status.APPLIED] and head == outcomes[-1].commit
    assert tree_state(upstream) == before  # only objects were added; HEAD, index and files are untouched
    log = git.run(["log", "--format=%s", f"{base}..{head}"], upstream.path).stdout.splitlines()
    assert log == ["Change B", "Change A"]
    assert git.run(["show", "-s", "--format=%b", head], upstream.path).stdout.strip() == "Why B."
    assert git.run(["show", f"{head}:src/util.c"], upstream.path).stdout == "util\n"
    again, head_again = apply_series_to_index(upstream.path, base, [first, second])
    assert head_again == head  # fixed dates and identities: the same series gives the same commits
    listed = git.run(["ls-tree", "-r", "--name-only", head], upstream.path).stdout.split()
    assert set(listed) >= {"src/main.c", "src/util.c", "README.md"}


def tree_state(repo: Repo) -> tuple[str, str, str]:
    return repo.head, repo.git("status", "--porcelain"), repo.read("src/main.c")


def test_offsets_are_reported_per_hunk(tmp_path: Path, upstream: Repo) -> None:
    base = upstream.head
    patch = patch_file(tmp_path, "0001-a.patch", edit_main(upstream, base, "main 20\n", "main 20 a\n", "A"))
    shifted = upstream.commit({"src/main.c": "one\ntwo\n" + MAIN}, "Two lines on top")
    with IndexBuilder(upstream.path, shifted) as builder:
        outcome = builder.apply(patch, commit=False)
        assert builder.head == shifted  # nothing committed
    assert outcome.status is Status.OFFSET and [(o.file, o.hunk, o.offset) for o in outcome.offsets] == [
        ("src/main.c", 1, 2)
    ]
    assert outcome.describe() == "0001-a.patch: applied with offsets: src/main.c hunk #1 +2"


def test_failures_are_classified(tmp_path: Path, upstream: Repo) -> None:
    base = upstream.head
    drift = patch_file(tmp_path, "0001-drift.patch", edit_main(upstream, base, "main 5\n", "main 5 a\n", "A"))
    missing = patch_file(
        tmp_path, "0002-missing.patch", make_patch(upstream, base, {"src/util.c": "gone\n"}, "Touch util")
    )
    later = upstream.commit({"src/main.c": MAIN.replace("main 5\n", "main five\n"), "src/util.c": None}, "Upstream")
    outcomes = {p.name: apply_series_to_index(upstream.path, later, [p])[0][0] for p in (drift, missing)}
    assert outcomes["0001-drift.patch"].status is Status.CONTEXT_DRIFT
    assert outcomes["0001-drift.patch"].file == "src/main.c" and outcomes["0001-drift.patch"].hunk == 1
    assert outcomes["0002-missing.patch"].status is Status.FILE_MISSING
    already = patch_file(tmp_path, "0003-same.patch", edit_main(upstream, base, "main 7\n", "main 7 a\n", "Same"))
    fixed = upstream.commit({"src/main.c": MAIN.replace("main 7\n", "main 7 a\n")}, "Upstream took it")
    [outcome], head = apply_series_to_index(upstream.path, fixed, [already])
    assert outcome.status is Status.ALREADY_APPLIED and head == fixed and not outcome.ok
    garbage = patch_file(tmp_path, "0004-garbage.patch", "Subject: x\n\nnot a diff\n")
    assert apply_series_to_index(upstream.path, base, [garbage])[0][0].status is Status.MALFORMED


def test_the_series_stops_at_the_first_failure(tmp_path: Path, upstream: Repo) -> None:
    base = upstream.head
    bad = patch_file(tmp_path, "0001-bad.patch", make_patch(upstream, base, {"README.md": "x\n"}, "R"))
    upstream.commit({"README.md": "changed\n"}, "Upstream README")
    good = patch_file(tmp_path, "0002-good.patch", make_patch(upstream, base, {"src/util.c": "u\n"}, "U"))
    outcomes, head = apply_series_to_index(upstream.path, upstream.head, [bad, good])
    assert [o.patch for o in outcomes] == ["0001-bad.patch"] and head == upstream.head


def test_unsafe_paths_are_refused_before_git_sees_them(tmp_path: Path, upstream: Repo) -> None:
    def diff(path: str, mode: str = "100644", body: str = "+x") -> str:
        return (
            f"Subject: [PATCH] p\n\nx\n---\ndiff --git a/{path} b/{path}\nnew file mode {mode}\n"
            f"--- /dev/null\n+++ b/{path}\n@@ -0,0 +1 @@\n{body}\n"
        )

    cases = {
        "../escape": "path escapes the tree",
        "/etc/passwd": "absolute path",
        ".git/hooks/pre-commit": "path inside .git",
    }
    for path, reason in cases.items():
        patch = patch_file(tmp_path, "p.patch", diff(path))
        assert reason in (unsafe_path_reason(None, patch) or "")
        outcome = apply_series_to_index(upstream.path, upstream.head, [patch])[0][0]
        assert outcome.status is Status.UNSAFE_PATH
    link = patch_file(tmp_path, "l.patch", diff("src/link", "120000", "+../../outside"))
    assert "symlink pointing outside" in (unsafe_path_reason(None, link) or "")
    inside = patch_file(tmp_path, "i.patch", diff("src/link", "120000", "+main.c"))
    assert unsafe_path_reason(None, inside) is None
    (upstream.path / "linked").symlink_to(tmp_path)
    through = patch_file(tmp_path, "t.patch", diff("linked/file.c"))
    assert "through a symlink" in (unsafe_path_reason(upstream.path, through) or "")
    assert unsafe_path_reason(None, through) is None  # no tree: nothing on disk to go through


def test_worktree_application_commits_and_three_way_merges_or_conflicts(tmp_path: Path, upstream: Repo) -> None:
    base = upstream.head
    merges = patch_file(tmp_path, "0001-m.patch", edit_main(upstream, base, "main 10\n", "main 10 ours\n", "Ours"))
    clashes = patch_file(tmp_path, "0002-c.patch", edit_main(upstream, base, "main 30\n", "main 30 ours\n", "Ours 2"))
    # upstream rewrites the neighbourhood of line 10 (strict fails, 3-way merges) and line 30 itself (conflict)
    upstream.commit({"src/main.c": MAIN.replace("main 7\n", "main seven\n").replace("main 30\n", "main 30 theirs\n")})
    head = upstream.head
    strict = apply_in_worktree(upstream.path, merges, commit=False)
    assert strict.status is Status.CONTEXT_DRIFT and upstream.head == head and is_clean(upstream.path)
    merged = apply_in_worktree(upstream.path, merges, three_way=True)
    assert merged.status is Status.MERGED and merged.commit == upstream.head != head
    assert "main 10 ours\n" in upstream.read("src/main.c") and is_clean(upstream.path)
    conflict = apply_in_worktree(upstream.path, clashes, three_way=True)
    assert conflict.status is Status.CONFLICT and conflict.conflict_files == ["src/main.c"]
    assert "<<<<<<<" in upstream.read("src/main.c") and not is_clean(upstream.path)
    assert conflict.describe() == "0002-c.patch: 3-way merge conflict in src/main.c"


def test_the_seed_makes_in_one_fast_import_the_very_commits_commit_tree_makes(tmp_path: Path, upstream: Repo) -> None:
    """seed_three_way_objects commits the series with one `git fast-import` where that writes
    the bytes commit-tree writes (plain identities, UTF-8, dates git surely parses), each tree
    read from the private index (files changed, added, removed), else one write-tree and one
    commit-tree a patch: either way the range-diff's old side has the ids apply gives."""
    base = upstream.head
    texts = [
        edit_main(upstream, base, "main 5\n", "main 5 a\n", "Change A"),
        make_patch(upstream, base, {"src/util.c": "util\n"}, "Change B", "Why B: caf\u00e9."),
        edit_main(upstream, base, "main 30\n", "main 30 c\n", "Change C"),
        make_patch(upstream, base, {"README.md": None}, "Change D"),
    ]
    cases = {  # (author, date) of every patch -> whether the one fast-import writes them
        ("J\u00f6rg M\u00fcller <jm@example.org>", "Tue, 5 Mar 2024 13:07 -0000"): True,
        ("Georgi Gerganov <gg@example.com>", "5 Mar 2024 13:07:09 +0530"): True,
        ('"Quoted, Name" <q@example.com>', "Fri, 13 Oct 2023 10:00:00 +0100"): False,  # git strips the quotes
        ("Name. <a@example.com.>", "Fri, 13 Oct 2023 10:00:00 +0100"): False,
        ("Plain Name <p@example.com>", "Sat, 31 Feb 2024 10:00:00 +0100"): False,  # no such day
    }
    for number, ((author, date), fast) in enumerate(cases.items()):
        patches = []
        for index, text in enumerate(texts):
            text = re.sub(r"^From: .*$", f"From: {author}", text, count=1, flags=re.M)
            text = re.sub(r"^Date: .*$", f"Date: {date}", text, count=1, flags=re.M)
            patches.append(patch_file(tmp_path, f"{number}-{index:04d}.patch", text))
        assert all(fast_importable(p) for p in patches) is fast, (author, date)
        seeded = seed_three_way_objects(upstream.path, base, patches)
        outcomes, head = apply_series_to_index(upstream.path, base, patches)
        assert all(o.ok for o in outcomes) and len(outcomes) == len(texts) and seeded == head, (author, date)
        if fast:  # the commits and their trees from the private index itself, no write-tree a patch
            assert _seed_in_one_import(upstream.path, base, patches) == head
    assert upstream.git("for-each-ref", "--format=%(refname)").split() == ["refs/heads/main"]  # no ref left behind


def test_export_knows_from_the_files_alone_when_a_strict_apply_must_fail(tmp_path: Path, upstream: Repo) -> None:
    """export's `_surely_does_not_apply` answers True only where git's strict apply fails (a
    file's first hunk whose context is gone), and leaves every other case to git."""
    base = upstream.head
    edits = {  # (old, new) of src/main.c made by the patch
        "one hunk": [("main 5\n", "main 5 a\n")],
        "two hunks": [("main 5\n", "main 5 a\n"), ("main 30\n", "main 30 b\n")],
    }
    patches = {
        name: patch_file(tmp_path, f"{name}.patch", edit_main(upstream, base, *pairs[0], name))
        for name, pairs in edits.items()
    }
    text = git.run(["show", f"{base}:src/main.c"], upstream.path).stdout
    both = text.replace("main 5\n", "main 5 a\n").replace("main 30\n", "main 30 b\n")
    patches["two hunks"] = patch_file(
        tmp_path, "two.patch", make_patch(upstream, base, {"src/main.c": both}, "two hunks")
    )
    moves = {  # upstream's change to the file -> whether the first hunk's preimage is gone
        "context of the first hunk edited": (text.replace("main 4\n", "main 4 upstream\n"), True),
        "context of the second hunk edited": (text.replace("main 31\n", "main 31 upstream\n"), False),
        "lines added above (an offset)": ("above\n" * 7 + text, False),
    }
    for move, (changed, first_gone) in moves.items():
        rev = upstream.commit({"src/main.c": changed}, move)
        for name, patch in patches.items():
            with IndexBuilder(upstream.path, rev) as builder:
                applies = builder.apply(patch, commit=False, explain=False).ok
            sure = _surely_does_not_apply(upstream.path, rev, patch)
            assert not (sure and applies), (move, name)  # never claims a failure git would not have
            assert sure == (first_gone and not applies), (move, name)
        upstream.git("reset", "-q", "--hard", base)
