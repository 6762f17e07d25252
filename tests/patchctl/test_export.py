"""`patchctl export`: deterministic, minimal churn, excluded paths reported, verified."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from patchctl import git

from .conftest import Project, Repo, make_patch, numbered, tree_files


def tree_of(project: Project) -> Path:
    return project.path / ".patchctl" / "trees" / project.series_name


def seeded(project: Project, upstream: Repo) -> Project:
    main_c = upstream.read("src/main.c")
    project.add_patch(
        "0001-tune-main.patch",
        make_patch(upstream, upstream.head, {"src/main.c": main_c.replace("main 5\n", "main five\n")}, "Tune main"),
    )
    project.add_patch(
        "0002-add-paged.patch", make_patch(upstream, upstream.head, {"src/paged.c": "int paged;\n"}, "Add paged")
    )
    return project


def commit_in(tree: Path, files: dict[str, str | None], message: str) -> str:
    return Repo(tree).commit(files, message)


def test_export_of_an_unchanged_tree_changes_nothing(project: Project, upstream: Repo, cli) -> None:
    seeded(project, upstream)
    # Short index lines and another Date: same hunks, so no churn.
    path = project.series_dir / "0001-tune-main.patch"
    text = re.sub(
        r"^index ([0-9a-f]{7})[0-9a-f]{33}\.\.([0-9a-f]{7})[0-9a-f]{33}", r"index \1..\2", path.read_text(), flags=re.M
    )
    path.write_text(text.replace("Date: ", "Date: Mon, 1 Jan 2024 00:00:00 +0000\nX-Old-Date: "))
    before = project.snapshot()
    assert cli("-C", project.path, "apply").exit_code == 0
    result = cli("-C", project.path, "export", "main", "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["unchanged"] == ["0001-tune-main.patch", "0002-add-paged.patch"]
    assert payload["written"] == [] and payload["deleted"] == []
    assert project.snapshot() == before
    assert cli("-C", project.path, "export", "main", "--check").exit_code == 0


def test_new_commit_becomes_the_next_patch_and_check_reports_it(project: Project, upstream: Repo, cli) -> None:
    seeded(project, upstream)
    assert cli("-C", project.path, "apply").exit_code == 0
    commit_in(tree_of(project), {"src/util.c": numbered(31, "util")}, "Grow util\n\nUtil needs one more line.")
    before = project.snapshot()
    check = cli("-C", project.path, "export", "main", "--check")
    assert check.exit_code == 1 and "0003-Grow-util.patch" in check.stderr
    assert project.snapshot() == before, "--check must write nothing"
    result = cli("-C", project.path, "export", "main")
    assert result.exit_code == 0, result.output
    assert project.patch_names() == ["0001-tune-main.patch", "0002-add-paged.patch", "0003-Grow-util.patch"]
    new = (project.series_dir / "0003-Grow-util.patch").read_text()
    assert new.startswith("From 0000000000000000000000000000000000000000 ")
    assert "Subject: [PATCH] Grow util\n\nUtil needs one more line.\n" in new
    assert re.search(r"^index [0-9a-f]{40}\.\.[0-9a-f]{40} 100644$", new, re.M)
    assert not re.search(r"^-- \n", new, re.M), "no version signature"
    # And the new series applies to reproduce the tree (export verified it; prove it again).
    assert cli("-C", project.path, "apply", "--into", project.path.parent / "again").exit_code == 0
    assert tree_files(project.path.parent / "again") == tree_files(tree_of(project))


def test_changed_patch_keeps_its_name_and_removed_one_is_deleted(project: Project, upstream: Repo, cli) -> None:
    seeded(project, upstream)
    assert cli("-C", project.path, "apply").exit_code == 0
    tree = tree_of(project)
    # Rewrite history: drop "Add paged", change "Tune main".
    git.run(["reset", "-q", "--hard", upstream.head], tree)
    commit_in(
        tree,
        {"src/main.c": upstream.read("src/main.c").replace("main 5\n", "main FIVE\n")},
        "Tune main\n\nWhy this change.",
    )
    result = cli("-C", project.path, "export", "main", "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["written"] == ["0001-tune-main.patch"] and payload["deleted"] == ["0002-add-paged.patch"]
    assert project.patch_names() == ["0001-tune-main.patch"]
    assert "+main FIVE" in (project.series_dir / "0001-tune-main.patch").read_text()


def test_excluded_paths_are_dropped_and_reported(project: Project, upstream: Repo, cli) -> None:
    seeded(project, upstream)
    assert cli("-C", project.path, "apply").exit_code == 0
    tree = tree_of(project)
    commit_in(tree, {"src/util.c": numbered(29, "util"), "docs/design.md": "why\n", "NOTES.md": "n\n"}, "Shrink util")
    commit_in(tree, {"README.md": "# downstream\n"}, "Docs only")
    result = cli("-C", project.path, "export", "main")
    assert result.exit_code == 0, result.output
    assert "dropped hunks on excluded path NOTES.md (commit 'Shrink util')" in result.stdout
    assert "dropped hunks on excluded path docs/design.md (commit 'Shrink util')" in result.stdout
    assert "dropped commit 'Docs only': it only touches excluded paths" in result.stdout
    text = (project.series_dir / "0003-Shrink-util.patch").read_text()
    assert "src/util.c" in text and "design.md" not in text and "NOTES.md" not in text
    assert project.patch_names()[-1] == "0003-Shrink-util.patch"


def test_export_is_byte_identical_whatever_the_git_config(
    project: Project, upstream: Repo, tmp_path: Path, monkeypatch, cli
) -> None:
    seeded(project, upstream)
    assert cli("-C", project.path, "apply").exit_code == 0
    tree = tree_of(project)
    commit_in(
        tree,
        {"src/util.c": numbered(12, "util") + "inserted\n" + numbered(30, "util")[len(numbered(12, "util")) :]},
        "Insert util",
    )
    assert cli("-C", project.path, "export", "main").exit_code == 0
    reference = (project.series_dir / "0003-Insert-util.patch").read_bytes()
    (project.series_dir / "0003-Insert-util.patch").unlink()

    hostile = tmp_path / "hostile.gitconfig"
    hostile.write_text(
        "[diff]\n\tnoprefix = true\n\talgorithm = patience\n\tcontext = 7\n[format]\n\tsignature = "
        "evil\n\tnumbered = true\n[core]\n\tabbrev = 7\n"
    )
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(hostile))
    # The repository's own config cannot change the output either.
    git.run(["config", "--worktree", "diff.mnemonicPrefix", "true"], tree, check=False)
    git.run(["config", "diff.noprefix", "true"], tree)
    try:
        assert cli("-C", project.path, "export", "main").exit_code == 0
    finally:
        git.run(["config", "--unset", "diff.noprefix"], tree)
    assert (project.series_dir / "0003-Insert-util.patch").read_bytes() == reference


def test_offset_only_changes_cause_no_churn(project: Project, upstream: Repo, cli) -> None:
    seeded(project, upstream)
    before = project.snapshot()
    upstream.commit({"src/main.c": "top 1\ntop 2\n" + upstream.read("src/main.c")}, "upstream grows")
    assert cli("-C", project.path, "apply", "--rev", upstream.head).exit_code == 0
    result = cli("-C", project.path, "export", "main", "--base", upstream.head, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["written"] == []
    assert project.snapshot() == before


def test_export_refuses_uncommitted_work(project: Project, upstream: Repo, cli) -> None:
    seeded(project, upstream)
    assert cli("-C", project.path, "apply").exit_code == 0
    (tree_of(project) / "src/main.c").write_text("unsaved\n")
    result = cli("-C", project.path, "export", "main")
    assert result.exit_code == 2 and "uncommitted changes" in result.stderr


def test_export_from_a_tree_not_on_the_pin(project: Project, tmp_path: Path, cli) -> None:
    other = Repo(tmp_path / "other")
    other.commit({"x": "1\n"}, "unrelated")
    result = cli("-C", project.path, "export", "main", "--from", other.path)
    assert result.exit_code == 2 and "is not in the history" in result.stderr


# ---------------------------------------------------------------- property: export then apply


FILES = ["src/main.c", "src/util.c", "include/util.h", "src/new.c", "docs/x.md"]
edit = st.tuples(
    st.sampled_from(FILES),
    st.integers(0, 45),
    st.sampled_from(["insert", "delete", "replace"]),
    st.text("abc xyz", min_size=1, max_size=8),
)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(commits=st.lists(st.lists(edit, min_size=1, max_size=3), min_size=1, max_size=4))
def test_export_then_apply_round_trips(tmp_path_factory, upstream: Repo, cli, commits) -> None:
    # A series must hold a patch (fail closed): at least one commit inserts into a source file.
    assume(any(kind == "insert" and not path.endswith(".md") for edits in commits for path, _, kind, _ in edits))
    root = tmp_path_factory.mktemp("roundtrip")
    project = Project(root / "project", upstream, upstream.head)
    work = root / "work"
    git.run(["clone", "-q", str(upstream.path), str(work)], root)
    for i, edits in enumerate(commits):
        for path, line, kind, text in edits:
            target = work / path
            lines = target.read_text().splitlines(keepends=True) if target.exists() else []
            at = min(line, len(lines))
            if kind == "insert" or not lines:
                lines.insert(at, text + "\n")
            elif kind == "delete":
                del lines[min(at, len(lines) - 1)]
            else:
                lines[min(at, len(lines) - 1)] = text + "\n"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text("".join(lines))
        git.commit_all(work, f"Change {i}\n\nStep {i}.")
    result = cli("-C", project.path, "export", "main", "--from", work)
    assert result.exit_code == 0, result.output
    applied = cli("-C", project.path, "apply", "--into", root / "applied")
    assert applied.exit_code == 0, applied.output
    expected = {k: v for k, v in tree_files(work).items() if not k.endswith(".md")}
    got = {k: v for k, v in tree_files(root / "applied").items() if not k.endswith(".md")}
    assert got == expected
    # Exporting again from the applied tree is a fixed point: nothing changes.
    again = cli("-C", project.path, "export", "main", "--from", root / "applied", "--check")
    assert again.exit_code == 0, again.output


def test_a_wrong_claim_of_what_a_commit_was_applied_from_never_reaches_the_series(
    project: Project, upstream: Repo, cli
) -> None:
    """pin-sync tells export which file each commit of its replay was applied from (strictly or
    not), sparing the formatting: a claim that does not hold (here: a commit amended since) makes
    export keep a file that no longer says what the commit does, and the strict apply that comes
    before any write catches it."""
    from patchctl.errors import CheckFailed
    from patchctl.project import config as config_mod
    from patchctl.series import exporter
    from patchctl.series.patchset import PatchFile

    seeded(project, upstream)
    assert cli("-C", project.path, "apply").exit_code == 0
    tree = tree_of(project)
    Repo(tree).write({"src/paged.c": "int paged = 1;\n"})
    git.run(["commit", "-q", "-a", "--amend", "--no-edit"], tree)
    config = config_mod.load(project.path / "matrix.yaml")
    series = config.get_series(project.series_name)
    base = git.rev_parse(tree, "HEAD~2")
    path = project.series_dir / "0002-add-paged.patch"
    paged = PatchFile(path, path.read_bytes())
    claim = {git.rev_parse(tree, "HEAD"): (paged.digest, True)}

    planned, result = exporter.plan_export(series, tree, base, replayed=claim)
    assert result.unchanged == ["0001-tune-main.patch", "0002-add-paged.patch"]  # the claim was taken
    with pytest.raises(CheckFailed, match=r"does not reproduce the work tree \(src/paged.c\)"):
        exporter.verify_tree(series, tree, base, [PatchFile(series.dir / p.name, p.data) for p in planned])
    # Without the claim, the amended commit is written anew.
    assert exporter.plan_export(series, tree, base)[1].written == ["0002-add-paged.patch"]
