"""Zero churn for the naming styles real series ship: header-less `git diff` patches numbered
with three digits, and a format-patch series carrying two patches with the same number."""

from __future__ import annotations

import json
from pathlib import Path

from patchctl import git

from .conftest import Project, Repo, make_patch


def tree_of(project: Project) -> Path:
    return project.path / ".patchctl" / "trees" / project.series_name


def bare_diff(upstream: Repo, files: dict[str, str]) -> str:
    """What `git diff` prints for FILES against the upstream's HEAD: no mail header at all."""
    upstream.write(files)
    try:
        git.run(["add", "-A"], upstream.path)
        return git.run(["diff", "--cached", "--full-index"], upstream.path).stdout
    finally:
        git.run(["reset", "-q", "--hard"], upstream.path)


def export_json(cli, project: Project, *args: str) -> dict:
    result = cli("-C", project.path, "export", "main", "--json", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_header_less_three_digit_patches_survive_apply_and_export(project: Project, upstream: Repo, cli) -> None:
    main_c, util_c = upstream.read("src/main.c"), upstream.read("src/util.c")
    project.add_patch("001-tune-main.patch", bare_diff(upstream, {"src/main.c": main_c.replace("main 4\n", "m4\n")}))
    project.add_patch("003-grow-util.patch", bare_diff(upstream, {"src/util.c": util_c + "util end\n"}))
    project.add_patch("010-add-paged.patch", bare_diff(upstream, {"src/paged.c": "int paged;\n"}))
    before = project.snapshot()
    assert cli("-C", project.path, "apply").exit_code == 0
    check = cli("-C", project.path, "export", "main", "--check")
    assert check.exit_code == 0, check.output
    payload = export_json(cli, project)
    assert payload["unchanged"] == ["001-tune-main.patch", "003-grow-util.patch", "010-add-paged.patch"]
    assert payload["written"] == [] and payload["renamed"] == [] and payload["deleted"] == []
    assert project.snapshot() == before, "header-less patches stay header-less, under their names"
    # A new commit continues the series in its own number width.
    Repo(tree_of(project)).commit({"src/new.c": "int fresh;\n"}, "Add the new thing")
    payload = export_json(cli, project)
    assert payload["written"] == ["011-Add-the-new-thing.patch"]
    assert project.patch_names()[:3] == ["001-tune-main.patch", "003-grow-util.patch", "010-add-paged.patch"]


def test_duplicate_numbers_keep_their_names_on_a_no_op_round_trip(project: Project, upstream: Repo, cli) -> None:
    base = upstream.head
    main_c, util_c = upstream.read("src/main.c"), upstream.read("src/util.c")
    names = {
        "0035-Tune-main.patch": make_patch(upstream, base, {"src/main.c": main_c.replace("main 4", "m4")}, "Tune main"),
        "0036-Grow-util.patch": make_patch(upstream, base, {"src/util.c": util_c + "util end\n"}, "Grow util"),
        "0036-Add-paged.patch": make_patch(upstream, base, {"src/paged.c": "int paged;\n"}, "Add paged"),
        "0037-Add-header.patch": make_patch(upstream, base, {"include/paged.h": "int paged;\n"}, "Add header"),
    }
    for name, text in names.items():
        project.add_patch(name, text)
    before = project.snapshot()
    assert cli("-C", project.path, "apply").exit_code == 0
    assert cli("-C", project.path, "export", "main", "--check").exit_code == 0
    payload = export_json(cli, project)
    assert payload["renamed"] == [] and payload["written"] == [] and payload["deleted"] == []
    assert sorted(payload["unchanged"]) == sorted(names)
    assert project.snapshot() == before
    # lint may warn about the duplicate, but export never renames it.
    lint = json.loads(cli("-C", project.path, "lint", "--no-apply", "--json").stdout)
    assert [f["rule"] for f in lint["findings"] if f["file"].endswith("0036-Grow-util.patch")] == ["PC001"]
