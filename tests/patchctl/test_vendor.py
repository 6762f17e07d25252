"""`patchctl vendor`: a series' vendored copy of the patched tree, written and checked from
pin + series, moved by pin-sync with the pin, and taken back into the series by
`export --from-vendor`. Real git repositories throughout (the conftest upstream)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import yaml

from patchctl import git
from patchctl.state import journal

from .conftest import Project, Repo, disk_snapshot, make_patch, numbered, ok, one_line_error, run_cli

VENDOR_YAML = """\
    vendor:
      - from: src
        to: third_party/up/src
        include: ['**/*.c', '**/*.sh']
        exclude: ['skip.c']
        protect: ['**/*.go', 'glue/**']
      - from: include
        to: third_party/up/include
"""


def vendored_project(tmp_path: Path, upstream: Repo) -> Project:
    """A project whose series adds src/feature.c and edits src/util.c, vendoring src/*.c
    (not skip.c) and include/ into third_party/up/, with its own Go binding in the copy."""
    upstream.commit(
        {"src/skip.c": "not vendored\n", "src/run.sh": "#!/bin/sh\necho run\n", "src/deep/x.c": "deep\n"}, "more"
    )
    os.chmod(upstream.path / "src" / "run.sh", 0o755)
    git.commit_all(upstream.path, "run.sh is executable")
    project = Project(tmp_path / "project", upstream, upstream.head, extra_yaml=VENDOR_YAML)
    base = upstream.head
    project.add_patch(
        "0001-Add-feature.patch", make_patch(upstream, base, {"src/feature.c": numbered(5, "f")}, "Add feature")
    )
    util = numbered(30, "util").replace("util 7\n", "util 7 patched\n")
    project.add_patch("0002-Patch-util.patch", make_patch(upstream, base, {"src/util.c": util}, "Patch util"))
    (project.path / "third_party/up/src/glue").mkdir(parents=True)
    (project.path / "third_party/up/src/bind.go").write_text("package up\n")
    (project.path / "third_party/up/src/glue/build.txt").write_text("ours\n")
    (project.path / "third_party/up/src/NOTES").write_text("not selected: the project's\n")
    return project


def vendored(project: Project) -> dict[str, bytes]:
    base = project.path / "third_party"
    return {p.relative_to(base).as_posix(): p.read_bytes() for p in sorted(base.rglob("*")) if p.is_file()}


def test_vendor_writes_the_selected_files_of_pin_plus_series_and_check_passes(tmp_path: Path, upstream: Repo) -> None:
    project = vendored_project(tmp_path, upstream)
    out = ok("-C", project.path, "vendor")
    assert "main: 6 vendored file(s) from" in out and "wrote 6, deleted 0" in out
    files = vendored(project)
    assert sorted(files) == [
        "up/include/util.h",
        "up/src/NOTES",
        "up/src/bind.go",
        "up/src/deep/x.c",
        "up/src/feature.c",
        "up/src/glue/build.txt",
        "up/src/main.c",
        "up/src/run.sh",
        "up/src/util.c",
    ]
    assert files["up/src/feature.c"] == numbered(5, "f").encode()  # from the series
    assert b"util 7 patched\n" in files["up/src/util.c"]
    assert files["up/src/bind.go"] == b"package up\n" and files["up/src/glue/build.txt"] == b"ours\n"
    assert os.stat(project.path / "third_party/up/src/run.sh").st_mode & 0o111  # the executable bit too
    assert not (project.path / "third_party/up/src/feature.c").stat().st_mode & 0o111
    assert "up to date" in ok("-C", project.path, "vendor", "--check")
    assert "up to date (nothing written)" in ok("-C", project.path, "vendor")
    assert not list(project.path.rglob("*.patchctl-new-*")) and not journal.journal_path(project.path).exists()


def test_check_names_each_file_that_differs_and_writes_nothing(tmp_path: Path, upstream: Repo) -> None:
    project = vendored_project(tmp_path, upstream)
    ok("-C", project.path, "vendor")
    copy = project.path / "third_party/up"
    (copy / "src/util.c").write_text((copy / "src/util.c").read_text().replace("util 9\n", "util 9 edited\n"))
    (copy / "src/main.c").unlink()
    (copy / "src/stale.c").write_text("left over from an older pin\n")
    os.chmod(copy / "src/run.sh", 0o644)
    (copy / "src/bind.go").write_text("package up // edited: protected\n")
    (copy / "src/NOTES").write_text("edited: not selected\n")
    before = project.snapshot()
    result = run_cli("-C", project.path, "vendor", "--check")
    assert result.exit_code == 1, result.output
    assert result.stdout.splitlines() == [
        "third_party/up/src/main.c: missing (pin + series has it)",
        "third_party/up/src/run.sh: executable bit differs from pin + series",
        "third_party/up/src/stale.c: not in pin + series (a stale file the copy manages)",
        "third_party/up/src/util.c: differs from pin + series",
        "main: 6 vendored file(s) from " + upstream.head[:12] + " + series: 4 differ",
    ]
    assert result.stderr.count("\n") == 1 and "4 vendored file(s) differ" in result.stderr
    assert project.snapshot() == before

    ok("-C", project.path, "vendor")  # puts it right: rewrites three, deletes the stale one
    assert "up to date" in ok("-C", project.path, "vendor", "--check")
    assert not (copy / "src/stale.c").exists()
    assert (copy / "src/bind.go").read_text() == "package up // edited: protected\n"
    assert (copy / "src/NOTES").read_text() == "edited: not selected\n"


def test_check_as_json_and_as_github_annotations(tmp_path: Path, upstream: Repo, monkeypatch) -> None:
    project = vendored_project(tmp_path, upstream)
    ok("-C", project.path, "vendor")
    (project.path / "third_party/up/include/util.h").write_text("edited\n")
    result = run_cli("-C", project.path, "vendor", "--check", "--json")
    data = json.loads(result.stdout)
    assert result.exit_code == 1 and data["ok"] is False
    assert data["copies"][0]["differences"] == [{"kind": "differs", "path": "third_party/up/include/util.h"}]
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    result = run_cli("-C", project.path, "vendor", "--check")
    assert "::error file=third_party/up/include/util.h,line=1,title=vendor::differs from pin + series" in result.stdout


def test_stale_deletions_remove_the_directories_they_empty(tmp_path: Path, upstream: Repo) -> None:
    project = vendored_project(tmp_path, upstream)
    ok("-C", project.path, "vendor")
    (project.path / "third_party/up/src/old/older").mkdir(parents=True)
    (project.path / "third_party/up/src/old/older/gone.c").write_text("stale\n")
    out = ok("-C", project.path, "vendor")
    assert "wrote 0, deleted 1" in out
    assert not (project.path / "third_party/up/src/old").exists() and (project.path / "third_party/up/src").is_dir()


def test_nothing_to_vendor_fails_closed(project: Project) -> None:
    result = run_cli("-C", project.path, "vendor", "--check")
    assert result.exit_code == 2 and "no series in matrix.yaml declares a `vendor:` copy" in result.stderr
    result = run_cli("-C", project.path, "vendor", "main")
    assert result.exit_code == 2 and "series main declares no `vendor:` copy" in result.stderr


def test_a_copy_that_selects_nothing_names_its_line(tmp_path: Path, upstream: Repo) -> None:
    project = Project(tmp_path / "p", upstream, upstream.head)
    project.write_config(
        upstream.head, "    allow_empty: true\n    vendor:\n      - {from: src, to: v, include: ['*.rs']}\n"
    )
    result = run_cli("-C", project.path, "vendor", "--check")
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.output
    assert "matrix.yaml:14: series.main.vendor[0]: selects no file of the patched tree under src/" in result.stderr


def test_config_refuses_overlapping_and_reserved_destinations(tmp_path: Path, upstream: Repo) -> None:
    cases = {
        "    vendor:\n      - {from: src, to: v}\n      - {from: include, to: v/inc}\n": (
            "series.main.vendor[1].to: v/inc overlaps v, the vendored copy of series main"
        ),
        "    vendor:\n      - {from: src, to: patches/main/src}\n": (
            "series.main.vendor[0].to: patches/main/src overlaps patches/main, the patch directory of series main"
        ),
        "    vendor:\n      - {from: src, to: .patchctl/src}\n": "must be a directory of its own in the repository",
        "    vendor:\n      - {from: src, to: ../out}\n": "without '..'",
        "    vendor:\n      - {from: src}\n": "missing required key 'to'",
        "    vendor:\n      - {from: src, to: v, include: []}\n": "selects nothing",
        "    vendor:\n      - {from: src, to: v, exclude: ['/abs']}\n": "must be a non-empty glob relative",
        "    vendor:\n      - {from: src, to: v, protct: []}\n": "unknown key (allowed: from, to, include, exclude",
    }
    project = Project(tmp_path / "p", upstream, upstream.head)
    for extra, message in cases.items():
        project.write_config(upstream.head, extra)
        result = run_cli("-C", project.path, "vendor", "--check")
        assert result.exit_code == 2 and result.stderr.count("\n") == 1, (extra, result.output)
        assert message in result.stderr, (extra, result.stderr)


def test_filter_and_files_are_validated_on_load_naming_the_line(tmp_path: Path, upstream: Repo) -> None:
    project = Project(tmp_path / "p", upstream, upstream.head)
    (project.path / "v").mkdir()
    (project.path / "v/.rsync-filter").write_text("# ours\n+ *.c\nincludes *.h\n")
    head = "    vendor:\n      - from: src\n        to: v\n"
    cases = {
        "        filter: v/missing\n": (
            "matrix.yaml:15: series.main.vendor[0].filter: the filter file v/missing does not exist"
        ),
        "        filter: v/.rsync-filter\n": (
            "matrix.yaml:15: series.main.vendor[0].filter: v/.rsync-filter:3: unknown filter rule 'includes *.h'"
        ),
        "        filter: ['- *.o', 'dir-merge .f']\n": (
            "matrix.yaml:15: series.main.vendor[0].filter[1]: rule 'dir-merge .f': dir-merge (per-directory"
        ),
        "        filter: ['- *.o', merge ../f]\n": "series.main.vendor[0].filter[1]: refusing to read ../f",
        "        filter: 3\n": "must be a filter file's path or a list of rsync filter rules, got 3",
        "        filter: ['- *.o', 7]\n": "series.main.vendor[0].filter[1]: must be an rsync filter rule",
        "        files: [{from: README.md, to: elsewhere/README.md}]\n": (
            "matrix.yaml:15: series.main.vendor[0].files[0].to: must be a path inside the copy's `to` (v/)"
        ),
        "        files: [{from: ../x, to: v/x}]\n": "series.main.vendor[0].files[0].from: path must be relative",
        "        files: [{from: /, to: v/x}]\n": "must name an upstream file, not the tree's root",
        "        files: [{from: README.md}]\n": "series.main.vendor[0].files[0]: missing required key 'to'",
        "        files: [{from: README.md, to: v/R, mode: x}]\n": "unknown key (allowed: from, to)",
        "        files: [{from: README.md, to: v/R}, {from: CMakeLists.txt, to: v/R}]\n": (
            "series.main.vendor[0].files[1].to: v/R is already the destination of another `files:` item"
        ),
        "        protect: [README.md]\n        files: [{from: README.md, to: v/README.md}]\n": (
            "v/README.md is the project's own (protect, filter): a `files:` item is copied there"
        ),
        "        filter: ['P *.md']\n        files: [{from: README.md, to: v/README.md}]\n": "is the project's own",
        "        filter: v/.rsync-filter\n        files: [{from: README.md, to: v/.rsync-filter}]\n": (
            "is the project's own"
        ),
    }
    for extra, message in cases.items():
        if "includes" not in message and "rsync-filter" in extra:
            (project.path / "v/.rsync-filter").write_text("+ *.c\n")
        project.write_config(upstream.head, head + extra)
        result = run_cli("-C", project.path, "vendor", "--check")
        assert result.exit_code == 2 and result.stderr.count("\n") == 1, (extra, result.output)
        assert message in result.stderr, (extra, result.stderr)


def test_a_single_file_the_tree_lacks_or_a_directory_copy_also_brings_stops_vendor(
    tmp_path: Path, upstream: Repo
) -> None:
    project = Project(tmp_path / "p", upstream, upstream.head)
    entry = (
        "    allow_empty: true\n    vendor:\n      - from: src\n        to: v\n        files: [{from: %s, to: v/%s}]\n"
    )
    project.write_config(upstream.head, entry % ("LICENSE", "LICENSE"))
    result = run_cli("-C", project.path, "vendor")
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.output
    assert "matrix.yaml:14: series.main.vendor[0]: files: the patched tree has no file LICENSE at" in result.stderr
    project.write_config(upstream.head, entry % ("include", "util.h"))
    result = run_cli("-C", project.path, "vendor")
    assert result.exit_code == 2 and "the patched tree has no file include at" in result.stderr  # a directory
    project.write_config(upstream.head, entry % ("README.md", "main.c"))
    result = run_cli("-C", project.path, "vendor")
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.output
    assert "v/main.c is both the upstream's src/main.c and the `files:` item from README.md" in result.stderr
    assert not (project.path / "v").exists()
    project.write_config(upstream.head, entry % ("README.md", "README.md"))
    assert "wrote 3, deleted 0" in ok("-C", project.path, "vendor")
    assert (project.path / "v/README.md").read_text() == "# upstream\n"


def test_a_symlink_where_a_vendored_file_belongs_is_refused_and_nothing_leaves_the_repository(
    tmp_path: Path, upstream: Repo
) -> None:
    project = vendored_project(tmp_path, upstream)
    ok("-C", project.path, "vendor")
    outside = tmp_path / "outside.c"
    outside.write_text("outside\n")
    util = project.path / "third_party/up/src/util.c"
    util.unlink()
    util.symlink_to(outside)
    check = run_cli("-C", project.path, "vendor", "--check")
    assert check.exit_code == 1 and "third_party/up/src/util.c: a symlink where pin + series has a regular file" in (
        check.stdout
    )
    result = run_cli("-C", project.path, "vendor")
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.output
    assert "third_party/up/src/util.c is a symlink in a vendored directory" in result.stderr
    assert outside.read_text() == "outside\n"

    util.unlink()
    ok("-C", project.path, "vendor")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (project.path / "third_party/up/include").rename(tmp_path / "moved")
    (project.path / "third_party/up/include").symlink_to(elsewhere)
    result = run_cli("-C", project.path, "vendor")
    assert result.exit_code == 2 and "is a symlink to" in result.stderr and "outside the repository" in result.stderr
    assert list(elsewhere.iterdir()) == []


def test_a_series_that_does_not_apply_stops_vendor_in_one_line(tmp_path: Path, upstream: Repo) -> None:
    project = vendored_project(tmp_path, upstream)
    (project.series_dir / "0002-Patch-util.patch").write_text(
        make_patch(upstream, upstream.head, {"src/util.c": "other\n"}, "Patch util").replace("-util 1\n", "-utl 1\n")
    )
    result = run_cli("-C", project.path, "vendor")
    assert result.exit_code == 1 and result.stderr.count("\n") == 1, result.output
    assert "series main does not apply to" in result.stderr and "0002-Patch-util.patch" in result.stderr
    assert not (project.path / "third_party/up/src/main.c").exists()


def test_export_from_vendor_turns_an_edit_in_the_copy_into_a_patch(tmp_path: Path, upstream: Repo) -> None:
    project = vendored_project(tmp_path, upstream)
    ok("-C", project.path, "vendor")
    copy = project.path / "third_party/up"
    (copy / "src/main.c").write_text((copy / "src/main.c").read_text().replace("main 3\n", "main 3 fixed\n"))
    (copy / "src/new.c").write_text("new in the copy\n")
    (copy / "src/deep/x.c").unlink()
    (copy / "src/bind.go").write_text("package up // protected: not taken back\n")
    result = run_cli("-C", project.path, "export", "main", "--from-vendor", "-m", "Fix main\n\nFound while vendoring.")
    assert result.exit_code == 0, result.output
    assert "3 file(s) edited in the vendored copy" in result.stderr
    assert project.patch_names() == ["0001-Add-feature.patch", "0002-Patch-util.patch", "0003-Fix-main.patch"]
    patch = (project.series_dir / "0003-Fix-main.patch").read_text()
    assert "Subject: [PATCH] Fix main" in patch and "Found while vendoring." in patch
    assert "+main 3 fixed" in patch and "src/new.c" in patch and "deleted file mode" in patch
    assert "bind.go" not in patch
    ok("-C", project.path, "export", "main", "--check")
    assert "up to date" in ok("-C", project.path, "vendor", "--check")

    nothing = run_cli("-C", project.path, "export", "main", "--from-vendor")
    assert nothing.exit_code == 2 and "hold no edit: nothing to take back" in nothing.stderr
    both = run_cli("-C", project.path, "export", "main", "--from-vendor", "--check")
    assert both.exit_code == 2 and "--from-vendor" in both.stderr


def test_pin_sync_moves_pin_series_and_vendored_copy_together(tmp_path: Path, upstream: Repo) -> None:
    project = vendored_project(tmp_path, upstream)
    ok("-C", project.path, "vendor")
    old = upstream.head
    upstream.commit(
        {
            "src/main.c": numbered(40, "main").replace("main 30\n", "main 30 upstream\n"),
            "src/deep/x.c": None,
            "include/new.h": "new header\n",
        },
        "upstream moves",
    )
    new = upstream.head
    report = tmp_path / "report.json"
    result = run_cli("-C", project.path, "pin-sync", "--to", new, "--json-file", report)
    assert result.exit_code == 0, result.output
    data = json.loads(report.read_text())
    assert {
        "third_party/up/src/main.c",
        "third_party/up/src/deep/x.c",
        "third_party/up/include/new.h",
        "matrix.yaml",
    } <= set(data["files_changed"])
    assert yaml.safe_load((project.path / "matrix.yaml").read_text())["upstreams"]["up"]["pin"] == new
    copy = project.path / "third_party/up"
    assert b"main 30 upstream\n" in (copy / "src/main.c").read_bytes()
    assert not (copy / "src/deep").exists() and (copy / "include/new.h").read_text() == "new header\n"
    assert "up to date" in ok("-C", project.path, "vendor", "--check")
    assert (copy / "src/bind.go").read_text() == "package up\n"
    assert old != new


def test_pin_sync_refuses_a_vendored_copy_with_edits_and_writes_nothing(tmp_path: Path, upstream: Repo) -> None:
    project = vendored_project(tmp_path, upstream)
    ok("-C", project.path, "vendor")
    (project.path / "third_party/up/src/util.c").write_text("edited\n")
    upstream.commit({"src/main.c": numbered(41, "main")}, "upstream moves")
    before = project.snapshot()
    result = run_cli("-C", project.path, "pin-sync", "--to", upstream.head)
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.output
    assert "the vendored copy of series main differs from" in result.stderr
    assert "third_party/up/src/util.c: differs from pin + series" in result.stderr
    assert "patchctl export main --from-vendor" in result.stderr
    assert project.snapshot() == before


def test_pin_sync_that_stops_at_a_conflict_leaves_the_vendored_copy_as_it_was(tmp_path: Path, upstream: Repo) -> None:
    project = vendored_project(tmp_path, upstream)
    ok("-C", project.path, "vendor")
    upstream.commit({"src/util.c": numbered(30, "util").replace("util 7\n", "util 7 upstream\n")}, "conflict")
    before = project.snapshot()
    result = run_cli("-C", project.path, "pin-sync", "--to", upstream.head)
    assert result.exit_code == 1 and "stops at a conflict" in result.stderr, result.output
    assert project.snapshot() == before
    ok("-C", project.path, "pin-sync", "--abort")


def test_vendor_is_listed_in_help_and_explains_its_keys() -> None:
    assert "vendor" in ok("--help")
    assert "protect" in ok("vendor", "--help") and "--from-vendor" in ok("vendor", "--help")


def test_the_rendered_ci_workflow_checks_each_vendored_copy(tmp_path: Path, upstream: Repo) -> None:
    project = vendored_project(tmp_path, upstream)
    published = "acme/patchctl@" + "ab" * 20  # a downstream names the action its workflows call
    config = project.path / "matrix.yaml"
    config.write_text(config.read_text() + f"workflows:\n  action: {published}\n")
    ok("-C", project.path, "matrix", "render")
    workflow = yaml.safe_load((project.path / ".github/workflows/ci.yml").read_text())
    steps = [s.get("with", {}) for s in workflow["jobs"]["patchctl"]["steps"]]
    assert {"command": "vendor main", "args": "--check", "pip-cache": "false"} in steps
    commands = [s.get("command") for s in steps]
    assert commands.index("vendor main") > commands.index("apply")


# ---------------------------------------------------------------- hostile checkouts: links on the way


def _git_dir_link_project(tmp_path: Path, upstream: Repo) -> Project:
    """A project whose copy lives at `vendor/objects`, with a committed link `vendor -> .git`:
    followed, the copy's stale files would be .git's objects."""
    project = vendored_project(tmp_path, upstream)
    text = (project.path / "matrix.yaml").read_text()
    text = text.replace("to: third_party/up/src", "to: vendor/objects").replace(
        "to: third_party/up/include", "to: vendor/info"
    )
    (project.path / "matrix.yaml").write_text(text.replace("include: ['**/*.c', '**/*.sh']", "include: ['**']"))
    git.commit_all(project.path, "a project")
    (project.path / "vendor").symlink_to(".git")
    return project


def test_vendor_through_a_committed_link_into_git_touches_nothing(tmp_path: Path, upstream: Repo) -> None:
    project = _git_dir_link_project(tmp_path, upstream)
    before = disk_snapshot(project.path)
    for args in (["vendor"], ["vendor", "--check"], ["export", "main", "--from-vendor"]):
        line = one_line_error(run_cli("-C", project.path, *args), 2)
        assert "vendor is a symlink to .git" in line and "inside .git; patchctl goes through no link" in line, line
    assert disk_snapshot(project.path) == before
    assert git.run(["fsck", "--no-progress"], project.path).ok


def test_vendor_through_a_linked_subdirectory_of_the_copy_writes_no_hook(tmp_path: Path, upstream: Repo) -> None:
    upstream.commit({"src/hooks/pre-commit.sh": "#!/bin/sh\ntouch owned\n"}, "a script named like a hook")
    project = vendored_project(tmp_path, upstream)
    ok("-C", project.path, "vendor")
    hooks = project.path / "third_party/up/src/hooks"
    for path in hooks.iterdir():
        path.unlink()
    hooks.rmdir()
    hooks.symlink_to("../../../.git/hooks")  # inside the repository, into .git
    before = disk_snapshot(project.path)
    line = one_line_error(run_cli("-C", project.path, "vendor"), 2)
    assert "refusing to write third_party/up/src/hooks/pre-commit.sh: third_party/up/src/hooks is a symlink" in line
    assert disk_snapshot(project.path) == before
    assert not (project.path / ".git/hooks/pre-commit.sh").exists()


def test_export_from_vendor_reads_nothing_through_a_link_out(tmp_path: Path, upstream: Repo) -> None:
    project = vendored_project(tmp_path, upstream)
    ok("-C", project.path, "vendor")
    outside = tmp_path / "outside"
    (project.path / "third_party").rename(outside)
    (outside / "up/src/id_rsa.c").write_text("PRIVATE KEY\n")
    (project.path / "third_party").symlink_to(outside)
    before_outside, before_project = disk_snapshot(outside), disk_snapshot(project.path)
    line = one_line_error(run_cli("-C", project.path, "export", "main", "--from-vendor", "-m", "Steal"), 2)
    assert f"third_party is a symlink to {outside}, outside the repository" in line, line
    assert disk_snapshot(outside) == before_outside and disk_snapshot(project.path) == before_project
    assert project.patch_names() == ["0001-Add-feature.patch", "0002-Patch-util.patch"]


def test_export_from_vendor_with_the_copy_missing_refuses_instead_of_deleting_everything(
    tmp_path: Path, upstream: Repo
) -> None:
    project = vendored_project(tmp_path, upstream)
    ok("-C", project.path, "vendor")
    shutil.rmtree(project.path / "third_party/up/include")
    before = project.snapshot()
    line = one_line_error(run_cli("-C", project.path, "export", "main", "--from-vendor", "-m", "Oops"), 2)
    assert "the vendored copy third_party/up/include is missing, not a directory: nothing to take back" in line
    assert project.snapshot() == before
