"""A newcomer's first hour: progress lines, one-line errors that point at the cause, and the
everyday habits (matrix.yaml found from a subdirectory, export --check on a fresh clone,
repository-relative annotations, shell completion, one meaning of --json)."""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from patchctl import git
from patchctl.output import progress

from .conftest import Project, Repo, make_patch

STAMP = r"\[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\] patchctl: "


@pytest.fixture
def good(project: Project, upstream: Repo) -> Project:
    project.add_patch(
        "0001-tune-main.patch",
        make_patch(
            upstream,
            upstream.head,
            {"src/main.c": upstream.read("src/main.c").replace("main 5\n", "main five\n")},
            "Tune main",
        ),
    )
    return project


@pytest.fixture
def loud(monkeypatch: pytest.MonkeyPatch) -> None:
    """Progress on, as for a user (the suite runs quiet)."""
    monkeypatch.delenv(progress.QUIET_ENV, raising=False)


def pin_line(project: Project) -> int:
    lines = (project.path / "matrix.yaml").read_text().splitlines()
    return next(number for number, line in enumerate(lines, 1) if line.strip().startswith("pin:"))


# ---------------------------------------------------------------- matrix.yaml found walking up


def test_lint_works_from_a_subdirectory(good: Project, cli, monkeypatch: pytest.MonkeyPatch) -> None:
    deep = good.path / "src" / "deep"
    deep.mkdir(parents=True)
    monkeypatch.chdir(deep)
    result = cli("lint")
    assert result.exit_code == 0, result.output
    assert "lint: no findings" in result.stdout
    # -C starts the walk elsewhere, and --config still names the file outright.
    assert cli("-C", good.path / "patches", "lint", "--no-apply").exit_code == 0
    assert cli("--config", good.path / "matrix.yaml", "lint", "--no-apply").exit_code == 0


def test_export_works_from_inside_the_applied_tree(good: Project, cli, monkeypatch: pytest.MonkeyPatch) -> None:
    assert cli("-C", good.path, "apply").exit_code == 0
    tree = good.path / ".patchctl" / "trees" / "main"
    Repo(tree).commit({"src/util.c": "util\n"}, "Shrink util\n\nOne line is enough.")
    monkeypatch.chdir(tree / "src")  # where one just committed: a git work tree of its own
    result = cli("export", "main")
    assert result.exit_code == 0, result.output
    assert "0002-Shrink-util.patch" in good.patch_names()


def test_the_walk_stops_at_the_repository_root(good: Project, cli, monkeypatch: pytest.MonkeyPatch) -> None:
    nested = good.path / "vendor" / "other"
    git.init_repo(nested)  # another repository inside: its matrix.yaml would be its own
    monkeypatch.chdir(nested)
    result = cli("lint", "--no-apply")
    assert result.exit_code == 2
    assert result.stderr == (
        f"patchctl: error: no matrix.yaml in {nested.resolve()} or any parent up to the repository root "
        f"{nested.resolve()} (use -C DIR or --config FILE)\n"
    )


# ---------------------------------------------------------------- errors that name the cause


def test_a_pin_that_does_not_exist_names_its_matrix_line(good: Project, cli) -> None:
    good.write_config("deadbeef" * 5)
    line = pin_line(good)
    for command in (["apply"], ["lint"], ["canary"]):
        result = cli("-C", good.path, *command)
        assert result.exit_code == 2, result.output
        assert result.stderr.startswith(f"patchctl: error: {good.path / 'matrix.yaml'}:{line}: upstreams.up.pin: ")
        assert "deadbeef" * 5 in result.stderr and "the upstream was reachable" in result.stderr
        assert "sdist-repos" not in result.stderr and "mirrors" not in result.stderr
        assert len(result.stderr.splitlines()) == 1


def test_a_pin_not_cached_with_the_upstream_gone_says_so(good: Project, upstream: Repo, cli, tmp_path: Path) -> None:
    config = good.path / "matrix.yaml"
    as_url = config.read_text().replace(f"url: {upstream.path}", f"url: file://{upstream.path}")
    config.write_text(as_url)
    assert cli("-C", good.path, "apply").exit_code == 0  # the mirror is cached now
    pin = upstream.head
    upstream.path.rename(tmp_path / "gone")
    config.write_text(as_url.replace(pin, "deadbeef" * 5))
    result = cli("-C", good.path, "apply")
    assert result.exit_code == 3, result.output
    assert result.stderr.startswith(f"patchctl: error: {good.path / 'matrix.yaml'}:{pin_line(good)}: upstreams.up.pin:")
    assert "is not in the cache and upstream up is unreachable" in result.stderr
    assert len(result.stderr.splitlines()) == 1


@pytest.mark.parametrize(
    "args, line",
    [
        (["export"], "export: missing argument SERIES (see 'patchctl export --help')"),
        (["apply", "--bogus"], "apply: no such option '--bogus' (see 'patchctl apply --help')"),
        (["nosuch"], "no such command 'nosuch' (see 'patchctl --help')"),
        (
            ["matrix", "render", "--bogus"],
            "matrix render: no such option '--bogus' (see 'patchctl matrix render --help')",
        ),
        (["canary", "--rev", "a", "--rev"], "option '--rev' requires an argument"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(args: list[str], line: str, cli) -> None:
    result = cli(*args)
    assert result.exit_code == 2
    assert result.stderr == f"patchctl: error: {line}\n" and result.stdout == ""


def test_lint_offline_on_a_first_run_says_what_needs_the_network(good: Project, cli) -> None:
    text = (good.path / "matrix.yaml").read_text().replace(f"url: {good.upstream.path}", "url: file:///nonexistent/up")
    (good.path / "matrix.yaml").write_text(text)
    result = cli("-C", good.path, "lint")
    assert result.exit_code == 3
    assert "cannot fetch file:///nonexistent/up" in result.stderr and "--no-apply" in result.stderr
    assert len(result.stderr.splitlines()) == 1
    assert cli("-C", good.path, "lint", "--no-apply").exit_code == 0


# ---------------------------------------------------------------- progress


def test_a_cold_apply_off_a_terminal_prints_timestamped_progress(good: Project, cli, loud) -> None:
    result = cli("-C", good.path, "apply", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["ok"] is True  # stdout stays the JSON alone
    lines = result.stderr.splitlines()
    assert lines and all(re.match(STAMP, line) for line in lines), lines
    steps = [re.sub(STAMP, "", line) for line in lines]
    assert f"mirroring {good.upstream.path}" in steps
    assert any(step.startswith("applying main at ") for step in steps)
    assert any(step.startswith("checking out ") for step in steps)


def test_canary_off_a_terminal_logs_its_milestones(good: Project, cli, loud) -> None:
    result = cli("-C", good.path, "canary", "--no-bisect")
    assert result.exit_code == 0, result.output
    steps = [re.sub(STAMP, "", line) for line in result.stderr.splitlines() if re.match(STAMP, line)]
    assert f"applying main at {good.upstream.head[:12]}" in steps
    assert result.stdout.startswith("## canary up")  # the report alone on stdout


def test_quiet_silences_progress(good: Project, cli, loud, monkeypatch: pytest.MonkeyPatch) -> None:
    assert cli("-q", "-C", good.path, "apply").stderr == ""
    monkeypatch.setenv(progress.QUIET_ENV, "1")
    shutil.rmtree(good.path / ".patchctl")
    assert cli("-C", good.path, "apply", "--force").stderr == ""


def test_a_long_gate_gets_heartbeat_lines(good: Project, cli, loud, monkeypatch: pytest.MonkeyPatch) -> None:
    good.write_config(
        good.upstream.head, "    gates:\n      - name: slow\n        command: echo building libllama; sleep 1.5\n"
    )
    assert cli("-q", "-C", good.path, "apply").exit_code == 0
    monkeypatch.setenv(progress.INTERVAL_ENV, "0.25")
    result = cli("-C", good.path, "gate")
    assert result.exit_code == 0, result.output
    steps = [re.sub(STAMP, "", line) for line in result.stderr.splitlines()]
    log = good.path / ".patchctl" / "gates" / "main" / "01-slow.log"
    assert steps[0] == f"gate slow (main) (log: {log})" and log.is_file(), steps  # where its log is
    beats = [s for s in steps if s.startswith("still gate slow (main) (")]
    assert len(beats) >= 2, steps  # about one every 0.25 s of a 1.5 s gate, with the elapsed time
    assert beats[-1].endswith(f"s; log: {log}): building libllama"), beats  # and the last line of the gate's log
    assert re.fullmatch(r"gate slow \(main\): done in \d+\.\ds", steps[-1]), steps


def test_on_a_terminal_the_live_line_is_drawn_and_cleared() -> None:
    master, slave = os.openpty()
    stream = os.fdopen(slave, "w")
    try:
        progress.install(stream)
        progress.say("bisecting 0001-x.patch over 12 commit(s)")
        with progress.step("downloading llama-cpp-python 0.3.30"):
            progress.note("50%")
            time.sleep(0.6)  # the redraw thread (every 0.25 s) shows the note
        progress.uninstall()
        stream.flush()
        shown = b""
        while select.select([master], [], [], 0.5)[0]:  # one read may return a part of what was written
            shown += os.read(master, 65536)
        shown = shown.decode()
    finally:
        progress.uninstall()
        stream.close()
        os.close(master)
    assert "\r\x1b[Kdownloading llama-cpp-python 0.3.30 (0." in shown
    assert "s): 50%" in shown
    assert shown.startswith("\r\x1b[Kbisecting 0001-x.patch over 12 commit(s)\r\x1b[Kdownloading")
    assert shown.endswith("\r\x1b[K")  # nothing left on the line for what prints next
    assert "patchctl:" not in shown  # no log lines on a terminal


# ---------------------------------------------------------------- export --check on a fresh clone


def test_export_check_works_on_a_fresh_clone(good: Project, cli) -> None:
    assert cli("-C", good.path, "apply").exit_code == 0
    assert cli("-C", good.path, "export", "main").exit_code == 0  # the series in export's form
    shutil.rmtree(good.path / ".patchctl")  # what a fresh clone has
    result = cli("-C", good.path, "export", "main", "--check")
    assert result.exit_code == 0, result.output
    assert "applying the series first" in result.stderr
    assert (good.path / ".patchctl" / "trees" / "main").is_dir()


def test_export_without_a_tree_says_what_to_run_first(good: Project, cli) -> None:
    result = cli("-C", good.path, "export", "main")
    assert result.exit_code == 2
    assert result.stderr == (
        "patchctl: error: no applied tree for main at .patchctl/trees/main: run `patchctl apply main`, "
        "commit your changes in it, then export\n"
    )


# ---------------------------------------------------------------- annotations


def test_annotations_name_files_from_the_repository_root(
    good: Project, cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # matrix.yaml in a subdirectory of the repository, as with the action's working-directory.
    shutil.rmtree(good.path / ".git")
    git.init_repo(tmp_path)
    (good.series_dir / "Fix Things.patch").write_text("x")
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    result = cli("-C", good.path, "lint", "--no-apply")
    assert result.exit_code == 1
    assert "patches/main/Fix Things.patch:1: PC002:" in result.stdout  # text stays relative to matrix.yaml
    annotations = [line for line in result.stdout.splitlines() if line.startswith("::error file=")]
    assert annotations and all(line.startswith("::error file=project/patches/main/") for line in annotations)


# ---------------------------------------------------------------- completion


def complete(cwd: Path, words: str) -> list[str]:
    env = {
        **os.environ,
        "_PATCHCTL_COMPLETE": "bash_complete",
        "COMP_WORDS": words,
        "COMP_CWORD": str(len(words.split(" ")) - 1),
    }
    done = subprocess.run(
        [sys.executable, "-m", "patchctl"], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return [line for line in done.stdout.splitlines() if line]


def test_shell_completion_offers_commands_series_and_upstreams(good: Project) -> None:
    text = (good.path / "matrix.yaml").read_text()
    (good.path / "matrix.yaml").write_text(text + "  other:\n    upstream: up\n    dir: patches/other\n")
    sub = good.path / "patches"
    assert "plain,pin-sync" in complete(sub, "patchctl pi")
    assert complete(sub, "patchctl apply ") == ["plain,main", "plain,other"]
    assert complete(sub, "patchctl export ot") == ["plain,other"]
    assert complete(sub, "patchctl canary ") == ["plain,up"]
    assert complete(sub.parent.parent, "patchctl apply ") == []  # no matrix.yaml: nothing, and no error


# ---------------------------------------------------------------- one meaning of --json


def test_json_is_a_flag_everywhere(good: Project, cli, tmp_path: Path) -> None:
    flag = cli("-C", good.path, "canary", "--json", "--no-bisect")
    assert flag.exit_code == 0, flag.output
    assert json.loads(flag.stdout)["upstream"] == "up"
    dash = cli("-C", good.path, "canary", "--json-file", "-", "--no-bisect")
    assert json.loads(dash.stdout) == json.loads(flag.stdout) | {"duration_s": json.loads(dash.stdout)["duration_s"]}
    assert not (good.path / "-").exists()
    out = tmp_path / "canary.json"
    to_file = cli("-C", good.path, "canary", "--json-file", out, "--no-bisect")
    assert to_file.exit_code == 0 and json.loads(out.read_text())["upstream"] == "up"
    assert to_file.stdout.startswith("## canary up")  # the Markdown report, as before
    old = cli("-C", good.path, "canary", "--json", "canary.json")
    assert old.exit_code == 2
    assert old.stderr == (
        "patchctl: error: --json is a flag (JSON on stdout, as in every command); to write the report to "
        "canary.json, use --json-file canary.json\n"
    )


def test_git_failures_say_what_they_usually_mean(tmp_path: Path) -> None:
    git.init_repo(tmp_path / "repo")
    with pytest.raises(git.GitError) as missing:
        git.run(["read-tree", "deadbeef" * 5], tmp_path / "repo")
    assert "a commit that is not in the upstream: check the pin in matrix.yaml" in str(missing.value)
    assert "(git: fatal: failed to unpack tree object " in str(missing.value)  # git's words stay, behind
    (tmp_path / "repo" / ".git" / "index.lock").write_text("")
    (tmp_path / "repo" / "f").write_text("x")
    with pytest.raises(git.GitError) as locked:
        git.run(["add", "f"], tmp_path / "repo")
    assert "a killed one left its .lock file" in str(locked.value)
    unknown = git.run(["frobnicate"], tmp_path / "repo", check=False)
    assert git.explain(unknown.stderr) == git.first_line(unknown.stderr)  # nothing made up
