"""`patchctl canary`: signal only, on scripted upstream drift in real temporary repositories."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from .conftest import Project, Repo
from .fixtures_sync import add_hello_patch, add_line20_patch, load_json, main_c, write_config

needs_cc = pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")


def run_canary(cli, project: Project, *args: str):
    out = project.path.parent / "canary.json"
    out.unlink(missing_ok=True)
    result = cli(
        "-C", project.path, "canary", *args, "--json-file", out, "--work-dir", project.path.parent / "canary-work"
    )
    return result, (load_json(out) if out.exists() else None)


def test_green_canary_changes_nothing_in_the_repository(project: Project, upstream: Repo, cli) -> None:
    pin = upstream.head
    add_line20_patch(project, upstream, pin)
    add_hello_patch(project, upstream, pin)
    write_config(project, pin)
    upstream.commit({"src/main.c": main_c(prepend=2)}, "Insert lines at the top")
    tip = upstream.commit({"src/util.c": "other\n"}, "Unrelated")
    git_state = project.git("status", "--porcelain", "--ignored")
    before = project.snapshot()
    result, payload = run_canary(cli, project)
    assert result.exit_code == 0, result.output
    assert payload["red"] is False and payload["tip"] == tip and payload["commits_since_pin"] == 2
    assert [(p["patch"], p["strict"], p["verdict"]) for p in payload["series"][0]["patches"]] == [
        ("0001-patch-line-twenty.patch", "applied-with-offset", "ok"),
        ("0002-add-hello.patch", "applied", "ok"),
    ]
    assert "canary up: ✅ green" in result.stdout
    assert project.snapshot() == before
    assert project.git("status", "--porcelain", "--ignored") == git_state
    assert not (project.path / ".patchctl").exists()


def test_mechanical_drift_is_red_and_bisect_names_the_breaking_commit(
    project: Project, upstream: Repo, cli, monkeypatch
) -> None:
    pin = upstream.head
    add_line20_patch(project, upstream, pin)
    add_hello_patch(project, upstream, pin)
    write_config(project, pin)
    upstream.commit({"src/util.c": "one\n"}, "Unrelated one")
    upstream.commit({"include/util.h": "two\n"}, "Unrelated two")
    breaking = upstream.commit({"src/main.c": main_c({22: "main 22 edited"})}, "Edit near line 20")
    upstream.commit({"src/util.c": "three\n"}, "Unrelated three")
    summary = project.path.parent / "step-summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    before = project.snapshot()

    result, payload = run_canary(cli, project, "up", "--summary", project.path.parent / "canary.md")
    assert result.exit_code == 1
    assert "canary is red: 1 patch(es) fail strictly (main/0001-patch-line-twenty.patch)" in result.stderr
    patch = payload["series"][0]["patches"][0]
    assert patch["strict"] == "context-drift" and patch["verdict"] == "mechanical"
    assert patch["trial"] == "merged 3-way without conflict"
    assert patch["breaking_commit"] == {"sha": breaking, "subject": "Edit near line 20"}
    assert payload["series"][0]["verdict"] == "mechanical"
    assert payload["series"][0]["patches"][1]["verdict"] == "ok"
    markdown = (project.path.parent / "canary.md").read_text()
    assert "pin-sync would be mechanical" in markdown and f"`{breaking[:12]}` `Edit near line 20`" in markdown
    assert summary.read_text() == "earlier step\n" + markdown  # appended, not overwritten
    assert project.snapshot() == before


def test_a_true_conflict_is_called_so_and_later_patches_are_judged(project: Project, upstream: Repo, cli) -> None:
    pin = upstream.head
    add_line20_patch(project, upstream, pin)
    add_hello_patch(project, upstream, pin)
    write_config(project, pin)
    breaking = upstream.commit({"src/main.c": main_c({20: "main 20 upstream"})}, "Upstream rewrites line 20")
    result, payload = run_canary(cli, project)
    assert result.exit_code == 1
    first, second = payload["series"][0]["patches"]
    # One word per stop (docs/reference/index.md#stops): a 3-way merge with markers is a conflict.
    assert first["verdict"] == "conflict" and first["trial"] == "3-way conflict in src/main.c"
    assert first["breaking_commit"]["sha"] == breaking
    assert second["strict"] == "applied" and second["verdict"] == "ok"
    assert payload["series"][0]["verdict"] == "stops"
    assert "fails; a pin-sync would stop (a conflict, a patch that needs a hand or a look" in result.stdout


def test_patch_taken_upstream_is_mechanical(project: Project, upstream: Repo, cli) -> None:
    pin = upstream.head
    add_line20_patch(project, upstream, pin)
    write_config(project, pin)
    upstream.commit({"src/main.c": main_c({20: "MAIN 20 patched"})}, "Take the fix")
    result, payload = run_canary(cli, project, "--no-bisect")
    assert result.exit_code == 1
    patch = payload["series"][0]["patches"][0]
    assert (
        patch["strict"] == "already-applied" and patch["verdict"] == "mechanical" and patch["breaking_commit"] is None
    )


def test_rev_selects_an_older_commit(project: Project, upstream: Repo, cli) -> None:
    pin = upstream.head
    add_line20_patch(project, upstream, pin)
    write_config(project, pin)
    fine = upstream.commit({"src/util.c": "x\n"}, "Fine")
    upstream.commit({"src/main.c": main_c({20: "broken"})}, "Breaks it")
    result, payload = run_canary(cli, project, "--rev", fine)
    assert result.exit_code == 0, result.output
    assert payload["tip"] == fine and payload["red"] is False


@needs_cc
def test_compile_runs_the_build_steps_in_a_clean_tree(project: Project, upstream: Repo, cli) -> None:
    pin = upstream.head
    add_hello_patch(project, upstream, pin, name="0001-add-hello.patch")
    write_config(
        project,
        pin,
        series_extra=(
            "build:\n  - name: cc\n    command: cc -o hello-bin src/hello.c && ./hello-bin && test ! -e stale\n"
        ),
    )
    upstream.commit({"src/util.c": "x\n"}, "Drift")
    result, payload = run_canary(cli, project, "--compile")
    assert result.exit_code == 0, result.output
    [record] = payload["compiles"]
    assert record["state"] == "passed" and record["toolchain"] == "declared"
    assert "hello 42" in Path(record["steps"][0]["log"]).read_text()
    assert not list((project.path.parent / "canary-work" / "trees").iterdir())  # build trees removed, logs kept


@needs_cc
def test_failing_compile_makes_the_canary_red(project: Project, upstream: Repo, cli) -> None:
    pin = upstream.head
    add_hello_patch(project, upstream, pin, name="0001-add-hello.patch")
    write_config(
        project, pin, series_extra="build:\n  - name: cc\n    command: cc -Werror=unused-variable -c src/extra.c\n"
    )
    upstream.commit({"src/extra.c": "int f(void) { int unused; return 0; }\n"}, "Upstream adds a warning")
    result, payload = run_canary(cli, project, "--compile")
    assert result.exit_code == 1
    assert payload["compiles"][0]["state"] == "failed" and "compile failed for declared/main" in result.stderr
    assert all(p["verdict"] == "ok" for p in payload["series"][0]["patches"])


def test_work_dir_inside_the_repository_is_refused(project: Project, upstream: Repo, cli) -> None:
    add_line20_patch(project, upstream, upstream.head)
    write_config(project, upstream.head)
    result = cli("-C", project.path, "canary", "--work-dir", project.path / "scratch")
    assert result.exit_code == 2 and "inside the repository" in result.stderr
    assert not (project.path / "scratch").exists()
