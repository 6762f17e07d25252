"""The composite action (action.yml), run step by step with bash the way the runner runs it
(tests/patchctl/actions_harness.py): inputs through `${{ inputs.x }}` into `env:`, outputs through
$GITHUB_OUTPUT, against a local upstream. Remote actions (setup-python, the caches, upload-artifact)
are not run; the two cache halves are simulated with GitHub's documented key semantics, and `pip
install` is the one command stubbed (it would download torch)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import yaml

from .actions_harness import FakeActionsCache, Harness, JobResult, run_steps_of
from .conftest import Project, Repo
from .fixtures_sync import add_line20_patch, main_c, write_config
from .matrix_fixtures import REPO

ACTION = yaml.safe_load((REPO / "action.yml").read_text())
GATE = """\
gates:
  - name: line-twenty-patched
    command: grep -q 'MAIN 20 patched' src/main.c
    timeout: 60
"""


def stub_bin(tmp_path: Path) -> Path:
    """`python` that records `pip install` (and answers `pip cache dir`) and runs everything else for real."""
    bin_dir = tmp_path / "stub-bin"
    bin_dir.mkdir(exist_ok=True)
    python = bin_dir / "python"
    python.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = -m ] && [ "$2" = pip ] && [ "$3" = install ]; then\n'
        '  printf "%s | PIP_EXTRA_INDEX_URL=%s\\n" "$*" "${PIP_EXTRA_INDEX_URL:-}" >> "$PIP_LOG"; exit 0\n'
        "fi\n"
        'if [ "$1" = -m ] && [ "$2" = pip ] && [ "$3" = cache ]; then echo "$PIP_LOG.cache"; exit 0; fi\n'
        f'exec "{sys.executable}" "$@"\n'
    )
    python.chmod(0o755)
    return bin_dir


def harness(tmp_path: Path, workspace: Path, *, env: dict[str, str] | None = None, **kwargs) -> Harness:
    # The user's pip settings stay out: what pip is told is what the test checks (PIP_LOG excepted).
    base = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "RUNNER_", "INPUT_", "PIP_"))}
    base["PATH"] = os.pathsep.join([str(stub_bin(tmp_path)), str(Path(sys.executable).parent), base["PATH"]])
    base["PIP_LOG"] = str(tmp_path / "pip.log")
    base.update(env or {})
    return Harness(workspace, tmp_path / f"runner-{len(list(tmp_path.glob('runner-*')))}", base_env=base, **kwargs)


def bot_project(tmp_path: Path, upstream: Repo) -> Project:
    """A downstream repository (a git repo) with one patch and a cheap gate, and this checkout's action.
    Its .gitignore ignores patchctl's state, as a real repository's does (git refuses a pathspec naming it)."""
    project = Project(tmp_path / "project", upstream, upstream.head)
    (project.path / ".gitignore").write_text(".patchctl/\n")
    write_config(project, upstream.head, series_extra=GATE)
    add_line20_patch(project, upstream, upstream.head)
    (project.path / "action.yml").write_text((REPO / "action.yml").read_text())
    (project.path / "pyproject.toml").write_text((REPO / "pyproject.toml").read_text())
    project.commit({}, "downstream")
    return project


def step(job: JobResult, name: str):
    return next(s for s in job.all_steps() if s.name == name)


def test_inputs_outputs_and_their_defaults() -> None:
    inputs = ACTION["inputs"]
    assert {name: spec.get("default") for name, spec in inputs.items()} == {
        "command": "",
        "args": "",
        "upstream-url": "",
        "config": "",
        "extras": "",
        "torch-index": "https://download.pytorch.org/whl/cpu",
        "python-version": "3.11",
        "cache": "true",
        "pip-cache": "true",
        "upload-logs": "true",
        "working-directory": ".",
    }
    assert set(ACTION["outputs"]) == {"exit-code", "verdict", "report", "cache-dir"}
    assert ACTION["runs"]["using"] == "composite"
    uses = [s["uses"].split("@")[0] for s in ACTION["runs"]["steps"] if "uses" in s]
    assert uses == [
        "actions/setup-python",
        "actions/cache",
        "actions/cache/restore",
        "actions/cache/save",
        "actions/upload-artifact",
    ]


def test_the_action_applies_lints_and_gates_through_its_outputs(tmp_path: Path, upstream: Repo) -> None:
    project = bot_project(tmp_path, upstream)
    cache = FakeActionsCache(tmp_path / "actions-cache")
    h = harness(tmp_path, project.path, remote=cache.handlers())
    for command in ("lint", "apply", "gate"):
        job = h.run_action(project.path, {"command": command})
        assert job.status == "success", [(s.name, s.stdout, s.stderr) for s in job.run_steps()]
        assert job.outputs["exit-code"] == "0" and job.outputs["verdict"] == "pass"
    report = Path(job.outputs["report"])
    assert report.parent == h.runner_temp and "line-twenty-patched" in report.read_text()
    # Every run: step of the action ran (none skipped), and the logs went to an artifact.
    assert [s.name for s in job.run_steps()] == [
        "check inputs",
        "pip cache key",
        "install patchctl",
        "cache key",
        "patchctl",
        "cache contents",
    ]
    assert len(job.run_steps()) == len(run_steps_of(REPO / "action.yml"))
    upload = next(s for s in job.all_steps() if s.uses.startswith("actions/upload-artifact@"))
    assert upload.outcome == "success" and upload.with_["name"] == "patchctl-action-gate-1"
    assert str(report) in upload.with_["path"] and ".patchctl/gates" in upload.with_["path"]


def test_a_failing_check_sets_the_verdict_and_fails_the_step(tmp_path: Path, upstream: Repo) -> None:
    project = bot_project(tmp_path, upstream)
    (project.series_dir / "0001-patch-line-twenty.patch").write_text("not a patch\n")
    job = harness(tmp_path, project.path).run_action(project.path, {"command": "lint", "cache": "false"})
    assert job.status == "failure"
    assert job.outputs["exit-code"] == "1" and job.outputs["verdict"] == "fail"
    assert step(job, "patchctl").outcome == "failure"
    # Logs are uploaded whatever the verdict.
    assert any(s.uses.startswith("actions/upload-artifact@") for s in job.all_steps())


def test_global_options_reach_patchctl_before_the_command(tmp_path: Path, upstream: Repo) -> None:
    project = bot_project(tmp_path, upstream)
    moved = tmp_path / "moved-upstream"
    upstream.path.rename(moved)
    (project.path / "matrix.yaml").rename(project.path / "ci-matrix.yaml")
    inputs = {"command": "apply", "config": "ci-matrix.yaml", "upstream-url": f"up={moved}", "cache": "false"}
    job = harness(tmp_path, project.path).run_action(project.path, inputs)
    assert job.outputs["verdict"] == "pass", step(job, "patchctl").stderr
    assert "MAIN 20 patched" in (project.path / ".patchctl/trees/main/src/main.c").read_text()


@pytest.mark.parametrize(
    "name, value",
    [("command", "matrix render\n--check"), ("args", "--check\n--json"), ("upstream-url", "a=/x\nb=/y")],
)
def test_multi_line_inputs_are_refused_not_cut(tmp_path: Path, upstream: Repo, name: str, value: str) -> None:
    project = bot_project(tmp_path, upstream)
    inputs = {"command": "matrix render", "cache": "false", name: value}
    job = harness(tmp_path, project.path).run_action(project.path, inputs)
    check = step(job, "check inputs")
    assert check.outcome == "failure" and check.returncode == 2
    assert f"input '{name}' spans several lines" in check.stdout
    # Nothing after the check ran: no install, no command, nothing rendered.
    assert step(job, "install patchctl").outcome == "skipped" and step(job, "patchctl").outcome == "skipped"
    assert job.status == "failure" and not (project.path / ".github").exists()


def test_a_block_scalar_newline_at_the_end_is_not_a_second_line(tmp_path: Path, upstream: Repo) -> None:
    project = bot_project(tmp_path, upstream)
    job = harness(tmp_path, project.path).run_action(project.path, {"command": "lint\n", "cache": "false"})
    assert job.status == "success" and job.outputs["verdict"] == "pass"


def test_args_are_words_never_shell_code(tmp_path: Path, upstream: Repo) -> None:
    project = bot_project(tmp_path, upstream)
    marker = tmp_path / "injected"
    inputs = {"command": "matrix render", "args": f"--check;touch {marker} $(touch {marker})", "cache": "false"}
    job = harness(tmp_path, project.path).run_action(project.path, inputs)
    assert job.outputs["exit-code"] == "2" and job.outputs["verdict"] == "usage-error"
    assert not marker.exists()


@pytest.mark.parametrize("users_index", ["", "https://download.pytorch.org/whl/cpu", "https://mirror.invalid/simple"])
def test_extras_install_from_the_cpu_torch_index(
    tmp_path: Path, upstream: Repo, users_index: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever index the user running the tests exports (the README exports PyTorch's), the
    action sets its own: the CPU index with extras, none without."""
    if users_index:
        monkeypatch.setenv("PIP_EXTRA_INDEX_URL", users_index)
    project = bot_project(tmp_path, upstream)
    h = harness(tmp_path, project.path)
    h.run_action(project.path, {"extras": "engine", "cache": "false"})
    h.run_action(project.path, {"cache": "false"})
    engine, plain = (tmp_path / "pip.log").read_text().splitlines()
    assert f"{project.path}[engine] | PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu" in engine
    assert plain.endswith(f"{project.path} | PIP_EXTRA_INDEX_URL=")
    job = h.run_action(project.path, {"extras": "engine;rm -rf /", "cache": "false"})
    assert "input 'extras' must be comma-separated" in step(job, "check inputs").stdout


def test_the_cache_lives_where_patchctl_keeps_it(tmp_path: Path, upstream: Repo) -> None:
    project = bot_project(tmp_path, upstream)
    env = {"XDG_CACHE_HOME": str(tmp_path / "xdg")}
    h = harness(tmp_path, project.path, env=env)
    del h.base_env["PATCHCTL_CACHE"]
    job = h.run_action(project.path, {})
    assert job.outputs["cache-dir"] == str(tmp_path / "xdg" / "patchctl")
    job = harness(tmp_path, project.path, env={"PATCHCTL_CACHE": str(tmp_path / "mine")}).run_action(project.path, {})
    assert job.outputs["cache-dir"] == str(tmp_path / "mine")


def test_the_cache_is_saved_again_when_it_grows_and_only_then(tmp_path: Path, upstream: Repo) -> None:
    project = bot_project(tmp_path, upstream)
    cache = FakeActionsCache(tmp_path / "actions-cache")

    def run(command: str) -> JobResult:
        # A fresh runner each time: an empty cache directory until the restore.
        fresh = tmp_path / f"cache-{len(cache.saved)}-{command}"
        h = harness(tmp_path, project.path, env={"PATCHCTL_CACHE": str(fresh)}, remote=cache.handlers())
        job = h.run_action(project.path, {"command": command})
        assert job.status == "success", [(s.name, s.stderr) for s in job.run_steps()]
        return job

    run("apply")  # the first run fetches the upstream: saved
    assert len(cache.saved) == 1
    first = cache.saved[0]
    run("apply")  # restored by prefix, nothing new fetched: not saved again
    run("lint")
    assert cache.saved == [first]
    with (project.path / "matrix.yaml").open("a") as config:
        config.write("# an edit that moves no pin\n")  # a new parsed document: not worth a save
    run("lint")
    assert cache.saved == [first]
    tip = upstream.commit({"src/util.c": "util changed\n"}, "upstream work")
    write_config(project, tip, series_extra=GATE)  # a new pin: restored from the old pin's entry
    job = run("apply")
    restore = next(s for s in job.all_steps() if s.uses.startswith("actions/cache/restore@"))
    assert restore.outputs["cache-matched-key"] == first
    assert len(cache.saved) == 2 and cache.saved[1] != first
    assert cache.saved[1].startswith(step(job, "cache key").outputs["key"] + "-")
    assert main_c({20: "MAIN 20 patched"}) == (project.path / ".patchctl/trees/main/src/main.c").read_text()


def test_a_second_call_in_the_same_job_does_not_restore_again(tmp_path: Path, upstream: Repo) -> None:
    project = bot_project(tmp_path, upstream)
    cache = FakeActionsCache(tmp_path / "actions-cache")
    h = harness(tmp_path, project.path, remote=cache.handlers())
    first = h.run_action(project.path, {"command": "apply"})
    second = h.run_action(project.path, {"command": "gate"})
    assert step(first, "cache key").outputs["restore"] == "true"
    assert step(second, "cache key").outputs["restore"] == "false"
    assert not any(s.uses.startswith("actions/cache/restore@") and s.outcome == "success" for s in second.all_steps())
    assert len(cache.saved) == 1  # the gate added nothing to the upstream cache
