"""ci.yml and pin-sync.yml, rendered for a downstream repository with a local upstream, run step by
step with bash through the workflow harness (tests/patchctl/actions_harness.py): every `run:` step,
the composite action expanded where a job calls `uses: ./`. Left out: calls to GitHub's API (the
pull-request step) and `.ci/run` (the test suite that runs this test)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from .actions_harness import FakeActionsCache, Harness, JobResult, run_steps_of
from .conftest import Project, Repo, run_cli
from .fixtures_sync import main_c, write_config
from .matrix_fixtures import REPO
from .test_action import GATE, bot_project, harness, stub_bin
from .tools import installed_tool

PR_STEP = "open or update the pull request"


def rendered(tmp_path: Path, upstream: Repo) -> Project:
    project = bot_project(tmp_path, upstream)
    shutil.copytree(REPO / "templates", project.path / "templates")
    result = run_cli("-C", str(project.path), "matrix", "render")
    assert result.exit_code == 0, result.output
    project.commit({}, "rendered workflows")
    return project


def workflow(project: Project, name: str) -> Path:
    return project.path / ".github/workflows" / name


def ran_commands(job: JobResult) -> list[tuple[str, str]]:
    return [(s.with_.get("command", ""), s.outputs.get("verdict", "")) for s in job.order if s.kind == "local-action"]


class Artifacts:
    """actions/upload-artifact and download-artifact between two jobs of one run: a directory each."""

    def __init__(self, store: Path) -> None:
        self.store = store

    def upload(self, given: dict[str, str], _env: dict[str, str]) -> dict[str, str]:
        source = Path(given["path"].strip())
        if given["name"].startswith("pin-sync-") and source.is_dir():
            shutil.copytree(source, self.store / given["name"], dirs_exist_ok=True)
        return {}

    def download(self, given: dict[str, str], _env: dict[str, str]) -> dict[str, str]:
        shutil.copytree(self.store / given["name"], Path(given["path"]), dirs_exist_ok=True)
        return {}

    def handlers(self) -> dict:
        return {"actions/upload-artifact": self.upload, "actions/download-artifact": self.download}


def fresh_checkout(project: Path) -> None:
    """What actions/checkout gives the next job: the commit, nothing a job before it left (.patchctl too)."""
    subprocess.run(["git", "reset", "--quiet", "--hard"], cwd=project, check=True)
    subprocess.run(["git", "clean", "-fdxq"], cwd=project, check=True)
    shutil.rmtree(project / ".git" / "patchctl", ignore_errors=True)  # a stopped sync's state: the runner's own


def run_pin_sync(tmp_path: Path, project: Path, *, env: dict | None = None, remote: dict | None = None, **kwargs):
    """pin-sync.yml's two jobs for upstream `up`, each on a fresh runner: the sync, then the publish
    job on a fresh checkout of the same commit, given only the sync's artifact. (sync, publish)."""
    path = project / ".github/workflows/pin-sync.yml"
    artifacts = Artifacts(tmp_path / f"artifacts-{len(list(tmp_path.glob('artifacts-*')))}")
    inputs = kwargs.pop("inputs", {})
    handlers = {**(remote or {}), **artifacts.handlers()}
    sync = harness(tmp_path, project, env=env, remote=handlers, **kwargs).run_job(
        path, "sync", matrix={"upstream": "up"}, inputs=inputs
    )
    fresh_checkout(project)
    publish = harness(tmp_path, project, env=env, remote=handlers, **kwargs).run_job(
        path, "publish", matrix={"upstream": "up"}, inputs=inputs, needs={"sync": {"result": sync.status}}
    )
    return sync, publish


def failures(job: JobResult) -> list[tuple[str, str, str]]:
    return [(s.name, s.stdout, s.stderr) for s in job.run_steps() if s.outcome == "failure"]


def test_ci_runs_patchctl_through_the_action_on_a_pull_request(tmp_path: Path, upstream: Repo) -> None:
    project = rendered(tmp_path, upstream)
    h = harness(tmp_path, project.path, github={"event_name": "pull_request", "ref": "refs/pull/7/merge"})
    job = h.run_job(workflow(project, "ci.yml"), "patchctl")
    assert job.status == "success", [(s.name, s.stdout, s.stderr) for s in job.run_steps() if s.outcome != "success"]
    assert ran_commands(job) == [
        ("lint", "pass"),
        ("matrix render", "pass"),
        ("apply", "pass"),
        ("export main", "pass"),
        ("gate", "pass"),
    ]
    gate = job.steps["gate"]
    assert "line-twenty-patched" in Path(gate.outputs["report"]).read_text()
    # A gate marked slow: true is left to pin-sync: a pull request lists it as skipped.
    slow = GATE + "  - name: too-slow-for-a-pull-request\n    command: 'exit 1'\n    slow: true\n"
    write_config(project, upstream.head, series_extra=slow)
    job = harness(tmp_path, project.path, github={"event_name": "pull_request"}).run_job(
        workflow(project, "ci.yml"), "patchctl"
    )
    assert job.status == "success" and ran_commands(job)[-1] == ("gate", "pass")
    report = Path(job.steps["gate"].outputs["report"]).read_text()
    assert "SKIP too-slow-for-a-pull-request (slow: true, --skip-slow)" in report
    # The same job fails, and says which check, when a gate fails.
    write_config(project, upstream.head, series_extra=GATE.replace("MAIN 20 patched", "MAIN 21 patched"))
    job = harness(tmp_path, project.path, github={"event_name": "pull_request"}).run_job(
        workflow(project, "ci.yml"), "patchctl"
    )
    assert job.status == "failure"
    assert ran_commands(job)[-1] == ("gate", "fail")


def test_ci_matrix_job_and_the_test_job_steps(tmp_path: Path) -> None:
    h = harness(tmp_path, REPO, github={"event_name": "pull_request"}, leave_out={"test suite": "it is this suite"})
    job = h.run_job(REPO / ".github/workflows/ci.yml", "matrix")
    assert job.status == "success", [(s.name, s.stderr) for s in job.run_steps()]
    assert ran_commands(job) == [("matrix render", "pass")]
    assert [s.name for s in job.order][-1] == "patchctl matrix check" and job.order[-1].returncode == 0
    test = h.run_job(REPO / ".github/workflows/ci.yml", "test")
    assert test.status == "success" and test.steps["__2"].kind == "left-out"
    suite = yaml.safe_load((REPO / ".github/workflows/ci.yml").read_text())["jobs"]["test"]["steps"][-1]
    assert suite["env"] == {"PIP_EXTRA_INDEX_URL": "https://download.pytorch.org/whl/cpu"}


def test_ci_cancels_superseded_pull_request_runs_never_main(tmp_path: Path) -> None:
    concurrency = yaml.safe_load((REPO / ".github/workflows/ci.yml").read_text())["concurrency"]

    def evaluate(event: dict) -> tuple[str, bool]:
        h = Harness(REPO, tmp_path, github=event)
        context = {"github": h.github}
        group = h.substitute(concurrency["group"], context, lambda: "success")
        return group, h.substitute(concurrency["cancel-in-progress"], context, lambda: "success")

    pr = {"event_name": "pull_request", "sha": "a" * 40, "event": {"pull_request": {"number": 7}}}
    assert evaluate(pr) == ("ci-7", True)
    push = {"event_name": "push", "sha": "b" * 40, "ref": "refs/heads/main"}
    assert evaluate(push) == ("ci-" + "b" * 40, False)


def test_pin_sync_bot_moves_to_the_tip_and_writes_the_pull_request(tmp_path: Path, upstream: Repo) -> None:
    project = rendered(tmp_path, upstream)
    old_pin = upstream.head
    tip = upstream.commit({"src/main.c": main_c(prepend=3)}, "upstream: lines on top")
    path = workflow(project, "pin-sync.yml")
    document = yaml.safe_load(path.read_text())

    # The schedule syncs every upstream with its own pin; a dispatch the chosen one.
    cache = FakeActionsCache(tmp_path / "actions-cache")
    strategy = document["jobs"]["sync"]["strategy"]["matrix"]["upstream"]
    h = harness(tmp_path, project.path)
    assert h.substitute(strategy, {"inputs": {}}, lambda: "success") == ["up"]
    assert h.substitute(strategy, {"inputs": {"upstream": "up"}}, lambda: "success") == ["up"]

    # The dashboard's status, judged read-only as the default branch stands, handed over as an artifact.
    handed = Artifacts(tmp_path / "artifacts-status")
    remote = {**FakeActionsCache(tmp_path / "status-cache").handlers(), **handed.handlers()}
    judged = harness(tmp_path, project.path, github={"event_name": "schedule"}, remote=remote).run_job(path, "status")
    assert judged.status == "success", failures(judged)
    [series] = json.loads((handed.store / "pin-sync-status" / "status.json").read_text())["series"]
    assert (series["pin"], series["tip"], series["verdicts"]) == (old_pin, tip, {"ok": 1})
    fresh_checkout(project.path)

    sync, job = run_pin_sync(
        tmp_path,
        project.path,
        github={"event_name": "schedule"},
        leave_out={PR_STEP: "GitHub's API", "report a stop, or close the issue of an earlier one": "GitHub's API"},
        remote=cache.handlers(),
    )
    assert sync.status == "success", failures(sync)
    assert sync.steps["sync"].kind == "local-action" and sync.steps["sync"].outputs["verdict"] == "pass"
    # What the sync fetched goes back into the Actions cache after it; the publish job restores none.
    assert len(cache.saved) == 1
    assert not [s.uses for s in job.all_steps() if s.uses.startswith("actions/cache") and s.kind != "skipped"]
    # The publish job: the change checked (export --check, the gated tree), committed on its branch.
    assert job.status == "success", failures(job)
    assert job.steps["check"].outputs["moved"] == "true" and job.steps["check"].outputs["exit-code"] == "0"
    assert [s.with_.get("cache") for s in job.order if s.kind == "local-action"] == ["false"]
    body = Path(job.steps["body"].outputs["path"]).read_text()
    assert body.startswith("## pin-sync up: ✅") and tip[:12] in body and old_pin[:12] in body
    assert "0001-patch-line-twenty.patch" in body and "applied with offset" in body
    assert "updated in place when a newer tip passes" in body
    if importlib.util.find_spec("patchctl.loop.rangediff"):  # the report carries it where patchctl computes one
        assert "git range-diff" in body and "Patch line twenty" in body
    assert "## pin-sync up" in job.summary
    # The branch the pull request is made from: one per upstream, the pin moved on it.
    assert job.steps["commit"].outputs == {"branch": "patchctl/pin-sync/up", "title": "pin-sync: move up forward"}
    assert project.git("rev-parse", "--abbrev-ref", "HEAD").strip() == "patchctl/pin-sync/up"
    assert tip in project.git("show", "HEAD:matrix.yaml")
    # Everything the sync changed is in the commit; patchctl's state stays out (.gitignore has it).
    assert project.git("status", "--porcelain", "--ignored=no") == ""
    assert project.git("check-ignore", ".patchctl").strip() == ".patchctl"
    assert project.git("show", "--name-only", "--format=", "HEAD").split() == ["matrix.yaml"]
    # Every run: step ran but those that call GitHub's API.
    assert {s.name for s in job.order if s.kind == "left-out"} == {
        PR_STEP,
        "report a stop, or close the issue of an earlier one",
    }
    ran = [s for j in (judged, sync, job) for s in j.order if s.kind == "run"]
    # ... and the dashboard's update (GitHub's API: tests/journeys/test_week_act.py runs it).
    assert len(ran) + 3 == len(run_steps_of(path))


def test_pin_sync_bot_opens_nothing_when_the_pin_is_already_at_the_tip(tmp_path: Path, upstream: Repo) -> None:
    project = rendered(tmp_path, upstream)
    sync, job = run_pin_sync(
        tmp_path, project.path, github={"event_name": "schedule"}, leave_out={PR_STEP: "GitHub's API"}
    )
    assert sync.status == "success" and job.status == "success", failures(sync) + failures(job)
    assert job.steps["check"].outputs["moved"] == "false"
    assert job.steps["commit"].kind == "skipped"
    assert next(s for s in job.order if s.name == PR_STEP).kind == "skipped"


def test_pin_sync_dispatch_to_a_target_and_a_failing_gate(tmp_path: Path, upstream: Repo) -> None:
    project = rendered(tmp_path, upstream)
    middle = upstream.commit({"src/util.c": "util moved\n"}, "upstream work")
    upstream.commit({"src/main.c": main_c({20: "main twenty rewritten"})}, "upstream takes line 20")
    event = {"event_name": "workflow_dispatch"}
    quiet = {PR_STEP: "GitHub's API", "report a stop, or close the issue of an earlier one": "GitHub's API"}
    sync, job = run_pin_sync(
        tmp_path, project.path, github=event, leave_out=quiet, inputs={"upstream": "up", "target": middle}
    )
    assert job.status == "success" and job.steps["commit"].outcome == "success", failures(job)
    assert middle in project.git("show", "HEAD:matrix.yaml")

    # To the tip the patch conflicts: the sync fails and hands over no change; nothing is committed;
    # the report, with what to do, goes to the step that reports the stop.
    project.git("switch", "--quiet", "main")
    write_config(project, middle, series_extra=GATE)
    project.commit({}, "back to main")
    sync, job = run_pin_sync(
        tmp_path, project.path, github=event, leave_out=quiet, inputs={"upstream": "up", "target": ""}
    )
    assert sync.status == "failure" and sync.steps["sync"].outputs["verdict"] == "fail"
    assert job.status == "success", failures(job)
    assert job.steps["check"].outputs == {
        "exit-code": "1",
        "report": job.steps["check"].outputs["report"],
        "moved": "false",
    }
    assert job.steps["commit"].kind == "skipped"
    assert "conflict" in job.summary.lower()
    assert next(s for s in job.order if s.name.startswith("report a stop")).kind == "left-out"


def test_pin_sync_hand_over_and_commit_steps_in_a_clone_of_this_repository(tmp_path: Path) -> None:
    """The rendered hand-over step (sync job) and commit step (publish job), verbatim, in real clones
    of this repository (its .gitignore ignores .patchctl/): after a sync that moved the pins and
    left patchctl's state, the diff handed over names matrix.yaml alone, and applied to a fresh
    clone it is the commit of the pin-sync branch."""
    document = yaml.safe_load((REPO / ".github/workflows/pin-sync.yml").read_text())
    hand_over = next(
        s for s in document["jobs"]["sync"]["steps"] if s.get("name") == "hand over the change and the report"
    )
    commit_step = next(s for s in document["jobs"]["publish"]["steps"] if s.get("id") == "commit")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True, capture_output=True)
    assert subprocess.run(["git", "check-ignore", "-q", ".patchctl/"], cwd=clone).returncode == 0
    # What pin-sync leaves behind: the moved pins, its report, and its own state under .patchctl/.
    config = clone / "matrix.yaml"
    text = config.read_text()
    up = yaml.safe_load(text)["upstreams"]["llama.cpp"]
    config.write_text(text.replace(up["ci"]["pin"], "f" * 40).replace(up["pin"], "f" * 40))
    (clone / ".patchctl/trees/llama.cpp").mkdir(parents=True)
    (clone / ".patchctl/trees/llama.cpp/README").write_text("a tree\n")
    (clone / ".patchctl/pin-sync.json").write_text("{}")
    report = tmp_path / "report.md"
    report.write_text("## pin-sync llama.cpp: ✅\n\nmoved\n")
    sync = {"id": "sync", "run": f'printf "report={report}\\nexit-code=0\\n" >> "$GITHUB_OUTPUT"'}
    job = {"runs-on": "ubuntu-latest", "steps": [sync, hand_over]}
    workflow_file = tmp_path / "steps.yml"
    workflow_file.write_text(yaml.safe_dump({"name": "pin-sync", "on": "push", "jobs": {"sync": job}}))
    h = harness(tmp_path, clone, github={"event_name": "schedule"})
    result = h.run_job(workflow_file, "sync", matrix={"upstream": "llama.cpp"})
    assert result.status == "success", failures(result)
    bundle = h.runner_temp / "pin-sync-bundle"
    assert sorted(p.name for p in bundle.iterdir()) == ["changes.diff", "exit-code", "pin-sync.json", "report.md"]
    diff = (bundle / "changes.diff").read_text()
    assert [line for line in diff.splitlines() if line.startswith("diff --git")] == [
        "diff --git a/matrix.yaml b/matrix.yaml"
    ]
    # The publish job's side, in a fresh clone: the change applied, then committed on the branch.
    fresh = tmp_path / "fresh"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(fresh)], check=True, capture_output=True)
    subprocess.run(["git", "apply", "--index", str(bundle / "changes.diff")], cwd=fresh, check=True)
    check = {"id": "check", "run": f'echo "report={report}" >> "$GITHUB_OUTPUT"; echo moved=true >> "$GITHUB_OUTPUT"'}
    job = {"runs-on": "ubuntu-latest", "steps": [check, commit_step]}
    workflow_file.write_text(yaml.safe_dump({"name": "pin-sync", "on": "push", "jobs": {"publish": job}}))
    result = harness(tmp_path, fresh, github={"event_name": "schedule"}).run_job(
        workflow_file, "publish", matrix={"upstream": "llama.cpp"}
    )
    assert result.status == "success", failures(result)
    assert result.steps["commit"].outputs["branch"] == "patchctl/pin-sync/llama.cpp"
    committed = subprocess.run(
        ["git", "show", "--name-only", "--format=%s", "HEAD"], cwd=fresh, capture_output=True, text=True, check=True
    ).stdout.split()
    assert committed == ["pin-sync:", "move", "llama.cpp", "forward", "matrix.yaml"]
    status = subprocess.run(["git", "status", "--porcelain"], cwd=fresh, capture_output=True, text=True, check=True)
    assert status.stdout == ""


# The payloads GitHub documents ("Events that trigger workflows", "Webhook events and payloads"):
# a scheduled run is on the default branch and its payload is only the cron that fired (no
# `repository`); a manual run carries `repository`, `ref`, `inputs`. The default branch is
# neither main nor master here (act fills `master` into a schedule payload).
DEFAULT_BRANCH = "trunk"
REPOSITORY = {"full_name": "owner/repo", "default_branch": DEFAULT_BRANCH}


def canary_event(event_name: str, ref: str, inputs: dict[str, str] | None = None) -> dict:
    if event_name == "schedule":
        event: dict = {"schedule": "17 3 * * 1"}
    else:
        event = {
            "inputs": inputs or {},
            "ref": ref,
            "repository": REPOSITORY,
            "workflow": ".github/workflows/canary.yml",
        }
    return {"event_name": event_name, "ref": ref, "run_id": "4242", "workflow": "canary", "event": event}


@pytest.mark.parametrize(
    ("event_name", "ref", "inputs", "files", "group"),
    [
        ("schedule", f"refs/heads/{DEFAULT_BRANCH}", None, True, "canary-4242"),
        ("workflow_dispatch", f"refs/heads/{DEFAULT_BRANCH}", {"rev": ""}, True, "canary-4242"),
        ("workflow_dispatch", f"refs/heads/{DEFAULT_BRANCH}", {"rev": "b" * 40}, False, "canary-4242"),
        ("workflow_dispatch", "refs/heads/feature", {"rev": ""}, False, "canary-refs/heads/feature"),
    ],
)
def test_canary_files_issues_from_the_default_branch_for_every_documented_payload(
    tmp_path: Path, event_name: str, ref: str, inputs: dict | None, files: bool, group: str
) -> None:
    document = yaml.safe_load((REPO / ".github/workflows/canary.yml").read_text())
    h = Harness(REPO, tmp_path, github=canary_event(event_name, ref, inputs))
    context = {
        "github": h.github,
        "inputs": dict(inputs or {}),
        "needs": {"resolve": {"outputs": {"rev": "a" * 40}, "result": "success"}, "compile": {"result": "failure"}},
    }
    assert h.condition(document["jobs"]["issues"]["if"], context, lambda: "failure") is files
    assert h.substitute(document["concurrency"]["group"], {"github": h.github}, lambda: "success") == group


def test_ci_tests_the_pin_that_pin_sync_moves(tmp_path: Path, upstream: Repo) -> None:
    """pin-sync follows (and moves) each upstream's `ci:` pin on github.com; the pull request's CI
    must lint, apply and gate that pin, not the embedded default."""
    project = rendered(tmp_path, upstream)
    default_pin = upstream.head

    def follow_ci_at(pin: str) -> None:
        ci = f"ci: {{url: '{upstream.path}', branch: main, pin: '{pin}'}}\n"
        write_config(project, default_pin, series_extra=GATE, up_extra=ci)
        project.commit({}, f"ci source at {pin[:12]}")

    follow_ci_at(upstream.commit({"src/ci-only.c": "only at the ci pin\n"}, "upstream: past the default pin"))
    job = harness(tmp_path, project.path, github={"event_name": "pull_request"}).run_job(
        workflow(project, "ci.yml"), "patchctl"
    )
    assert job.status == "success", [(s.name, s.stdout, s.stderr) for s in job.run_steps() if s.outcome != "success"]
    assert [command for command, _ in ran_commands(job)] == ["lint", "matrix render", "apply", "export main", "gate"]
    assert (project.path / ".patchctl/trees/main/src/ci-only.c").is_file()
    # The Actions cache is keyed by the pin followed: moving the ci pin alone gives a new key.
    key = next(s for s in job.all_steps() if s.name == "cache key").outputs["key"]
    follow_ci_at(upstream.commit({"src/ci-only.c": "moved on\n"}, "upstream moves on"))
    again = harness(tmp_path, project.path).run_action(
        REPO, {"command": "apply"}, env={"PATCHCTL_UPSTREAM_SOURCE": "ci"}
    )
    assert again.status == "success", [(s.name, s.stderr) for s in again.run_steps()]
    assert next(s for s in again.all_steps() if s.name == "cache key").outputs["key"] != key
    assert (project.path / ".patchctl/trees/main/src/ci-only.c").read_text() == "moved on\n"


def test_every_workflow_that_runs_patchctl_follows_the_ci_source() -> None:
    for path in sorted((REPO / ".github/workflows").glob("*.yml")):
        document = yaml.safe_load(path.read_text())
        for job_id, job in document["jobs"].items():
            runs_patchctl = any(
                s.get("uses") == "./" and (s.get("with") or {}).get("command") or "patchctl " in str(s.get("run", ""))
                for s in job.get("steps", [])
            )
            source = {**(document.get("env") or {}), **(job.get("env") or {})}.get("PATCHCTL_UPSTREAM_SOURCE")
            assert not runs_patchctl or source == "ci", f"{path.name}: job {job_id} runs patchctl at another pin"


FAKE_DOCKER = """#!/bin/sh
# `docker buildx imagetools`: inspect answers from the images listed in $FAKE_REGISTRY, create is recorded.
echo "$*" >> "$FAKE_DOCKER_LOG"
if [ "$3" = inspect ]; then grep -qxF "$4" "$FAKE_REGISTRY"; exit $?; fi
exit 0
"""


@pytest.mark.parametrize("arm64_built", [True, False])
def test_backend_merge_joins_a_pair_only_from_what_this_run_pushed(tmp_path: Path, arm64_built: bool) -> None:
    path = REPO / ".github/workflows/backend.yml"
    document = yaml.safe_load(path.read_text())
    commit = "c" * 40
    suffix = "-cpu-llama-cpp"
    h = Harness(REPO, tmp_path, github={"event_name": "push", "sha": commit, "ref": "refs/heads/main"})
    # It runs although a row failed (here the CUDA rows, the whole linux-publish matrix is then `failure`).
    needs = {
        "plan": {"outputs": {"has-pairs": "true", "push": "true"}, "result": "success"},
        "linux-publish": {"outputs": {}, "result": "failure"},
    }
    assert h.condition(document["jobs"]["merge"]["if"], {"github": h.github, "needs": needs}, lambda: "success")
    assert not h.condition(
        document["jobs"]["merge"]["if"],
        {"github": h.github, "needs": {**needs, "plan": {"outputs": {"has-pairs": "true", "push": "false"}}}},
        lambda: "success",
    )
    repositories = ["docker.io/patchctl/backends", "quay.io/patchctl/backends"]
    tags = [f"{r}:{t}{suffix}" for r in repositories for t in ("master", "main", f"sha-{commit}")]
    pushed = [f"{r}:sha-{commit}{suffix}-amd64" for r in repositories]
    if arm64_built:
        pushed += [f"{r}:sha-{commit}{suffix}-arm64" for r in repositories]
    # An older commit's arm64 image is there in both cases: it must never be joined in.
    pushed += [f"{r}:sha-{'0' * 40}{suffix}-arm64" for r in repositories]
    registry, log = tmp_path / "registry.txt", tmp_path / "docker.log"
    registry.write_text("\n".join(pushed) + "\n")
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "docker").write_text(FAKE_DOCKER)
    (fake_bin / "docker").chmod(0o755)
    env = {**os.environ, "PATH": f"{fake_bin}:{os.environ['PATH']}", "FAKE_REGISTRY": str(registry)}
    env["FAKE_DOCKER_LOG"] = str(log)
    h = Harness(
        REPO,
        tmp_path,
        github={"event_name": "push", "sha": commit, "ref": "refs/heads/main"},
        base_env=env,
        remote={"docker/metadata-action": lambda given, _env: {"tags": "\n".join(tags)}},
    )
    job = h.run_job(path, "merge", matrix={"suffix": suffix})
    assert job.status == "success", [(s.name, s.stdout, s.stderr) for s in job.run_steps()]
    created = [line for line in log.read_text().splitlines() if " create " in line]
    if arm64_built:
        assert created == [
            f"buildx imagetools create -t {t} {t.rsplit(':', 1)[0]}:sha-{commit}{suffix}-amd64 "
            f"{t.rsplit(':', 1)[0]}:sha-{commit}{suffix}-arm64"
            for t in tags
        ]
        assert f"`{suffix}`: joined amd64 + arm64" in job.summary
    else:
        assert created == []
        assert f"`{suffix}`: not joined" in job.summary and f"sha-{commit}{suffix}-arm64" in job.summary


CANARY = """\
canary:
  upstream: up
  toolchains:
    - {name: cpu, tag-suffix: -cpu-up, cuda-major-version: '', image: 'gcc:14-bookworm'}
"""


def test_the_canary_saves_the_upstream_it_fetched_to_the_cache(tmp_path: Path, upstream: Repo) -> None:
    project = bot_project(tmp_path, upstream)
    write_config(project, upstream.head, series_extra=GATE, tail=CANARY)
    shutil.copytree(REPO / "templates", project.path / "templates")
    assert run_cli("-C", str(project.path), "matrix", "render").exit_code == 0
    project.commit({}, "a canary")
    cache = FakeActionsCache(tmp_path / "actions-cache")

    def weekly_run(week: int) -> JobResult:
        # A fresh runner each week: an empty patchctl cache until the action restores it.
        fresh = {"PATCHCTL_CACHE": str(tmp_path / f"runner-cache-{week}")}
        h = harness(tmp_path, project.path, env=fresh, github={"event_name": "schedule"}, remote=cache.handlers())
        job = h.run_job(workflow(project, "canary.yml"), "resolve", inputs={})
        assert job.status == "success", [(s.name, s.stdout, s.stderr) for s in job.run_steps()]
        return job

    first = weekly_run(1)
    assert first.outputs["rev"] == upstream.head
    assert len(cache.saved) == 1  # the upstream it fetched, saved after the canary ran
    tip = upstream.commit({"src/util.c": "util moved on\n"}, "upstream: a new week")
    second = weekly_run(2)
    assert second.outputs["rev"] == tip
    restore = next(s for s in second.all_steps() if s.uses.startswith("actions/cache/restore@"))
    assert restore.outputs["cache-matched-key"] == cache.saved[0]  # last week's fetch, restored
    assert len(cache.saved) == 2  # and this week's new commits saved on top
    weekly_run(3)
    assert len(cache.saved) == 2  # nothing new upstream: nothing saved


def test_a_new_downstream_gets_workflows_that_reference_only_what_it_has(tmp_path: Path, upstream: Repo) -> None:
    """`init --action` then `matrix render` in a fresh repository with another series name, no action.yml
    and no .ci/: its workflows call the published action named, run only its own series, pass
    actionlint, zizmor and `matrix check`, and its CI job runs green."""
    downstream = Repo(tmp_path / "downstream")
    downstream.commit({".gitignore": ".patchctl/\n"}, "a new repository")
    # Any commit (the harness runs this checkout for it), but not this checkout's HEAD: a developer's
    # unpushed HEAD is a commit github.com does not have, which render refuses.
    published = "patchctl/patchctl@" + "c0ffee00" * 5
    result = run_cli(
        "-C", str(downstream.path), "init", "--upstream-url", str(upstream.path), "--pin", upstream.head,
        "--action", published,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert f"chose: workflows: action: {published} (--action)" in result.stdout
    assert f"  action: {published}\n" in (downstream.path / "matrix.yaml").read_text()
    assert run_cli("-C", str(downstream.path), "matrix", "render").exit_code == 0
    downstream.commit({}, "patchctl init and render")
    workflows = downstream.path / ".github/workflows"
    # No rows: no backend.yml; init's apply-only canary: canary.yml.
    assert sorted(p.name for p in workflows.iterdir()) == ["canary.yml", "ci.yml", "pin-sync.yml"]
    for path in workflows.iterdir():
        text = path.read_text()
        assert "uses: ./" not in text and ".ci/run" not in text and "llama.cpp" not in text, path.name
        assert f"uses: {published}\n" in text
    check = run_cli("-C", str(downstream.path), "matrix", "check")
    assert check.exit_code == 0 and "no findings" in check.output, check.output
    lint = subprocess.run(
        [installed_tool("actionlint"), "-no-color", *map(str, workflows.iterdir())],
        text=True,
        capture_output=True,
        cwd=downstream.path,
    )
    assert lint.returncode == 0, lint.stdout + lint.stderr
    audit = subprocess.run(
        [installed_tool("zizmor"), "--offline", "--persona", "auditor", "."],
        text=True,
        capture_output=True,
        cwd=downstream.path,
    )
    assert audit.returncode == 0, audit.stdout + audit.stderr
    # Its CI job, with the published action standing in for this checkout (act's --local-repository).
    h = harness(tmp_path, downstream.path, github={"event_name": "pull_request"}, local_actions={published: REPO})
    job = h.run_job(workflows / "ci.yml", "patchctl")
    assert job.status == "success", [(s.name, s.stdout, s.stderr) for s in job.run_steps() if s.outcome != "success"]
    assert ran_commands(job) == [
        ("lint", "pass"),
        ("matrix render", "pass"),
        ("apply", "pass"),
        ("export upstream", "pass"),
    ]  # no gate step: init's series declares no gates yet (a gate step would fail on none)


FAKE_GH = """#!/bin/sh
# gh as the publish job calls it: every call recorded with the token it was given; after `pr create`
# the branch has open pull request #5.
printf '%s | GH_TOKEN=%s\\n' "$*" "$GH_TOKEN" >> "$FAKE_GH_LOG"
case "$1 $2" in
  "pr create") touch "$FAKE_GH_LOG.pr" ;;
  "pr list")
    case "$*" in
      *"--jq length"*) if [ -f "$FAKE_GH_LOG.pr" ]; then echo 1; else echo 0; fi ;;
      *) if [ -f "$FAKE_GH_LOG.pr" ]; then echo 5; fi ;;
    esac ;;
esac
exit 0
"""
APP = "workflows:\n  pin_sync:\n    github_app: {client_id_var: SYNC_APP_CLIENT_ID, private_key_secret: SYNC_APP_KEY}\n"


def pin_sync_ready(tmp_path: Path, upstream: Repo, tail: str) -> tuple[Project, Path, Path]:
    """A bot project whose workflows are rendered (matrix.yaml ending in TAIL) and committed, with an
    origin to push to, an upstream that moved, and a `gh` stand-in: (project, its bin dir, its log)."""
    project = bot_project(tmp_path, upstream)
    write_config(project, upstream.head, series_extra=GATE, tail=tail)
    shutil.copytree(REPO / "templates", project.path / "templates")
    assert run_cli("-C", str(project.path), "matrix", "render").exit_code == 0
    project.commit({}, "rendered workflows")
    origin = tmp_path / "origin.git"
    subprocess.run(["git", "init", "--quiet", "--bare", str(origin)], check=True)
    project.git("remote", "add", "origin", str(origin))
    upstream.commit({"src/main.c": main_c(prepend=3)}, "upstream: lines on top")
    fake_bin, log = tmp_path / "fake-gh", tmp_path / "gh.log"
    fake_bin.mkdir()
    (fake_bin / "gh").write_text(FAKE_GH)
    (fake_bin / "gh").chmod(0o755)
    return project, fake_bin, log


@pytest.mark.parametrize("token", ["github-token", "bot-secret", "github-app"])
def test_the_pull_request_token_and_ci_started_by_dispatch_with_github_token_alone(
    tmp_path: Path, upstream: Repo, token: str
) -> None:
    project, fake_bin, log = pin_sync_ready(tmp_path, upstream, APP if token == "github-app" else "")
    minted = []
    sync, job = run_pin_sync(
        tmp_path,
        project.path,
        env={
            "PATH": os.pathsep.join([str(fake_bin), str(stub_bin(tmp_path)), os.environ["PATH"]]),
            "FAKE_GH_LOG": str(log),
        },
        github={"event_name": "schedule", "token": "the-github-token", "ref_name": "main", "sha": project.head},
        secrets={"PATCHCTL_BOT_TOKEN": "the-bot-token"} if token == "bot-secret" else {"SYNC_APP_KEY": "a key"},
        vars={"SYNC_APP_CLIENT_ID": "Iv1.client"},
        remote={"actions/create-github-app-token": lambda given, _env: minted.append(given) or {"token": "app-tok"}},
    )
    assert sync.status == "success" and job.status == "success", failures(sync) + failures(job)
    calls = log.read_text().splitlines()
    assert any(c.startswith("pr create --base main --head patchctl/pin-sync/up") for c in calls), calls
    used = {"github-token": "the-github-token", "bot-secret": "the-bot-token", "github-app": "app-tok"}[token]
    # The pull request with the bot's token; the issue of an earlier stop looked for (and closed) with
    # GITHUB_TOKEN, whose bot opens those issues.
    pull_calls = [
        c for c in calls if c.startswith(("auth ", "pr ", "label create pin-sync", "label create dependencies"))
    ]
    assert pull_calls and all(c.endswith(f"GH_TOKEN={used}") for c in pull_calls), calls
    issue_calls = [c for c in calls if c.startswith(("issue ", "label create patchctl-pin-sync"))]
    assert issue_calls and all(c.endswith("GH_TOKEN=the-github-token") for c in issue_calls), calls
    # With GITHUB_TOKEN alone the pull request gets no pull_request CI: CI is started on its branch.
    dispatched = [c.split(" | ")[0] for c in calls if c.startswith("workflow run")]
    if token == "github-token":
        assert dispatched == ["workflow run ci.yml --ref patchctl/pin-sync/up"], calls
    else:
        assert dispatched == [], calls
    pushed = ["git", "rev-parse", "--verify", "refs/heads/patchctl/pin-sync/up"]
    assert subprocess.run(pushed, cwd=tmp_path / "origin.git").returncode == 0
    pr_step = next(s for s in job.order if s.name == PR_STEP)
    noticed = "::notice title=pin-sync pull request CI::" in pr_step.stdout
    assert noticed is (token == "github-token")
    assert ("CI was started on patchctl/pin-sync/up by workflow_dispatch" in job.summary) is (token == "github-token")
    if token == "github-app":
        rendered_file = str(workflow(project, "pin-sync.yml"))
        lint = subprocess.run(
            [installed_tool("actionlint"), "-no-color", rendered_file], capture_output=True, text=True
        )
        assert lint.returncode == 0, lint.stdout + lint.stderr
        config = str(REPO / ".github/zizmor.yml")
        audit = subprocess.run(
            [installed_tool("zizmor"), "--offline", "--persona", "auditor", "--config", config, rendered_file],
            capture_output=True,
            text=True,
        )
        assert audit.returncode == 0, audit.stdout + audit.stderr
        assert minted == [
            {
                "client-id": "Iv1.client",
                "private-key": "a key",
                "permission-contents": "write",
                "permission-pull-requests": "write",
                "permission-issues": "write",
            }
        ]
    else:
        assert minted == [] and "create-github-app-token" not in workflow(project, "pin-sync.yml").read_text()


FAKE_ISSUES_GH = """#!{python}
# gh for the canary's issues job: `issue list` filtered by --author and --label as the API does,
# over the issues in $FAKE_ISSUES; every other call recorded.
import json, os, sys
args = sys.argv[1:]
def option(name):
    return args[args.index(name) + 1] if name in args else None
if args[:2] == ["issue", "list"]:
    issues = json.load(open(os.environ["FAKE_ISSUES"]))
    author, label = option("--author"), option("--label")
    shown = [
        {{"number": i["number"], "body": i["body"]}}
        for i in issues
        if (author is None or i["author"] == author) and (label is None or label in i["labels"])
    ]
    print(json.dumps(shown))
    sys.exit(0)
with open(os.environ["FAKE_GH_LOG"], "a") as log:
    log.write(" ".join(args[:3] if args[0] == "label" else args) + "\\n")
"""


def canary_issue_job(tmp_path: Path, reports: Path) -> tuple[JobResult, Path]:
    """This repository's canary `issues` job, handed the lists in REPORTS, with the open issues of
    tmp_path/issues.json: (the job, the log of what gh was asked besides listing issues)."""
    fake_bin, log = tmp_path / "bin", tmp_path / "gh.log"
    fake_bin.mkdir()
    (fake_bin / "gh").write_text(FAKE_ISSUES_GH.format(python=sys.executable))
    (fake_bin / "gh").chmod(0o755)
    workspace = tmp_path / "ws"
    workspace.mkdir()

    def download(given: dict[str, str], _env: dict[str, str]) -> dict[str, str]:
        shutil.copytree(reports, workspace / given["path"], dirs_exist_ok=True)
        return {}

    env = {**os.environ, "PATH": f"{fake_bin}:{os.environ['PATH']}", "FAKE_ISSUES": str(tmp_path / "issues.json")}
    env["FAKE_GH_LOG"] = str(log)
    h = Harness(
        workspace,
        tmp_path,
        github={"event_name": "schedule", "token": "t", "repository": "owner/repo"},
        base_env=env,
        remote={"actions/download-artifact": download},
    )
    needs = {"resolve": {"outputs": {"rev": "a" * 40}, "result": "success"}, "compile": {"result": "success"}}
    return h.run_job(REPO / ".github/workflows/canary.yml", "issues", needs=needs), log


def test_the_canary_files_only_into_issues_its_own_bot_opened_with_its_label(tmp_path: Path) -> None:
    marker = "<!-- patchctl-canary-key: {} -->"
    bot, label = "app/github-actions", "patchctl-canary"
    issues = [
        {
            "number": 5,
            "author": "mallory",
            "labels": [label],
            "body": "pasted " + marker.format("llama.cpp/apply/main"),
        },
        {"number": 6, "author": bot, "labels": [label], "body": "fixed since " + marker.format("llama.cpp/apply/gone")},
        {"number": 7, "author": bot, "labels": [], "body": "unlabelled " + marker.format("llama.cpp/apply/other")},
        {"number": 8, "author": "mallory", "labels": [], "body": "spoof " + marker.format("llama.cpp/apply/stale")},
    ]
    (tmp_path / "issues.json").write_text(json.dumps(issues))
    reports = tmp_path / "reports"
    reports.mkdir()
    key = "llama.cpp/apply/main"
    breaks = [{"key": key, "title": "canary: main no longer applies", "body": marker.format(key) + "\nbroken\n"}]
    (reports / "issues-apply.json").write_text(json.dumps(breaks))
    job, log = canary_issue_job(tmp_path, reports)
    assert job.status == "success", [(s.name, s.stdout, s.stderr) for s in job.run_steps()]
    # A new issue (#5's pasted marker is not the bot's), #6 closed; #7 (no label) and #8 untouched.
    assert log.read_text().splitlines() == [
        f"label create {label}",
        f"issue create --title canary: main no longer applies --body-file body.md --label {label}",
        "issue close 6 --comment The canary no longer finds this break at `" + "a" * 40 + "`: closing.",
    ]


AUTOMERGE = "workflows:\n  pin_sync:\n    automerge: squash\n"


@pytest.mark.parametrize("token", ["bot-secret", "github-token"])
def test_a_green_sync_sets_its_pull_request_to_merge_itself_when_asked(
    tmp_path: Path, upstream: Repo, token: str
) -> None:
    """`workflows: pin_sync: automerge: squash`: after a sync that passed every gate, the pull
    request is set to merge itself (`gh pr merge --auto --squash`); not with GITHUB_TOKEN, whose
    pull request runs no CI (no required check would pass): a warning says so instead."""
    project, fake_bin, log = pin_sync_ready(tmp_path, upstream, AUTOMERGE)
    rendered_file = workflow(project, "pin-sync.yml")
    assert 'gh pr merge "$BRANCH" --auto --squash' in rendered_file.read_text()
    sync, job = run_pin_sync(
        tmp_path,
        project.path,
        env={
            "PATH": os.pathsep.join([str(fake_bin), str(stub_bin(tmp_path)), os.environ["PATH"]]),
            "FAKE_GH_LOG": str(log),
        },
        github={"event_name": "schedule", "token": "the-github-token", "ref_name": "main"},
        secrets={"PATCHCTL_BOT_TOKEN": "the-bot-token"} if token == "bot-secret" else {},
    )
    assert sync.status == "success" and job.status == "success", failures(sync) + failures(job)
    calls = log.read_text().splitlines()
    merges = [c for c in calls if c.startswith("pr merge")]
    if token == "bot-secret":
        assert merges == ["pr merge patchctl/pin-sync/up --auto --squash | GH_TOKEN=the-bot-token"], calls
    else:
        assert merges == [], calls
        step = next(s for s in job.order if s.name == "merge the pull request when its required checks pass")
        assert "::warning title=pin-sync auto-merge off::" in step.stdout
    for linter in (
        [installed_tool("actionlint"), "-no-color", str(rendered_file)],
        [installed_tool("zizmor"), "--offline", "--persona", "auditor", "--config", str(REPO / ".github/zizmor.yml"),
         str(rendered_file)],
    ):  # fmt: skip
        found = subprocess.run(linter, capture_output=True, text=True)
        assert found.returncode == 0, found.stdout + found.stderr


# ---------------------------------------------------------------- the publish job's checks


def tampered_sync(tmp_path: Path, upstream: Repo, tamper) -> tuple[Project, JobResult, Path]:
    """A sync that moved the pin, its artifact changed by TAMPER(bundle, project) (what a build that
    ran in the sync job could do), then the publish job: (project, publish job, gh log)."""
    project, fake_bin, log = pin_sync_ready(tmp_path, upstream, "")
    env = {
        "PATH": os.pathsep.join([str(fake_bin), str(stub_bin(tmp_path)), os.environ["PATH"]]),
        "FAKE_GH_LOG": str(log),
    }
    path = project.path / ".github/workflows/pin-sync.yml"
    artifacts = Artifacts(tmp_path / "artifacts")
    github = {"event_name": "schedule", "token": "the-github-token", "ref_name": "main"}
    sync = harness(tmp_path, project.path, env=env, github=github, remote=artifacts.handlers()).run_job(
        path, "sync", matrix={"upstream": "up"}, inputs={}
    )
    assert sync.status == "success", failures(sync)
    tamper(artifacts.store / "pin-sync-up", project)
    fresh_checkout(project.path)
    publish = harness(tmp_path, project.path, env=env, github=github, remote=artifacts.handlers()).run_job(
        path, "publish", matrix={"upstream": "up"}, inputs={}, needs={"sync": {"result": "success"}}
    )
    return project, publish, log


def workflow_edit(bundle: Path, project: Project) -> None:
    """A change to a workflow file slipped into the diff: what a write token would then push."""
    ci = ".github/workflows/ci.yml"
    text = (project.path / ci).read_text()
    scratch = project.path.parent / "scratch"
    subprocess.run(["git", "clone", "-q", str(project.path), str(scratch)], check=True)
    subprocess.run(["git", "apply", "--index", str(bundle / "changes.diff")], cwd=scratch, check=True)
    (scratch / ci).write_text(text + "# run anything\n")
    subprocess.run(["git", "add", ci], cwd=scratch, check=True)
    diff = subprocess.run(["git", "diff", "--cached", "--binary", "--full-index"], cwd=scratch, capture_output=True)
    (bundle / "changes.diff").write_bytes(diff.stdout)


def link_added(bundle: Path, project: Project) -> None:
    with open(bundle / "changes.diff", "a") as diff:
        diff.write(
            "diff --git a/patches/main/evil b/patches/main/evil\nnew file mode 120000\n"
            "index 0000000..1111111\n--- /dev/null\n+++ b/patches/main/evil\n@@ -0,0 +1 @@\n+/etc/passwd\n"
            "\\ No newline at end of file\n"
        )


def gated_tree_lie(bundle: Path, project: Project) -> None:
    report = json.loads((bundle / "pin-sync.json").read_text())
    assert report["gated_trees"]["main"]
    report["gated_trees"]["main"] = "0" * 40
    (bundle / "pin-sync.json").write_text(json.dumps(report))


def change_after_a_stop(bundle: Path, project: Project) -> None:
    (bundle / "exit-code").write_text("1\n")


@pytest.mark.parametrize(
    ("tamper", "message"),
    [
        (workflow_edit, "the change touches what pin-sync never writes: .github/workflows/ci.yml"),
        (link_added, "the change adds a symbolic link or a submodule: refused"),
        (gated_tree_lie, "not the tree its gates passed on"),
        (change_after_a_stop, "pin-sync exited 1 but handed over a change: refused"),
    ],
    ids=["outside-the-expected-paths", "a-symbolic-link", "not-the-gated-tree", "a-change-from-a-stopped-sync"],
)
def test_the_publish_job_checks_the_change_before_it_pushes(tmp_path: Path, upstream: Repo, tamper, message) -> None:
    """The sync job ran the upstream's build: what it hands over is checked before a write token
    touches it. Each tampering fails the check; nothing is committed, pushed or opened."""
    project, publish, log = tampered_sync(tmp_path, upstream, tamper)
    assert publish.status == "failure"
    check = publish.steps["check"]
    assert check.outcome == "failure" and message in check.stdout + check.stderr, (check.stdout, check.stderr)
    assert publish.steps["commit"].kind == "skipped"
    assert not log.exists() or not [c for c in log.read_text().splitlines() if not c.startswith(("label", "issue"))]
    pushed = ["git", "rev-parse", "--verify", "--quiet", "refs/heads/patchctl/pin-sync/up"]
    assert subprocess.run(pushed, cwd=tmp_path / "origin.git").returncode != 0


def test_an_untampered_change_passes_the_same_checks(tmp_path: Path, upstream: Repo) -> None:
    project, publish, log = tampered_sync(tmp_path, upstream, lambda bundle, project: None)
    assert publish.status == "success", failures(publish)
    assert publish.steps["check"].outputs["moved"] == "true"


def cli_env(tmp_path: Path) -> dict[str, str]:
    """A shell in which `patchctl` is this checkout's, with a cache of its own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PATCHCTL_", "GITHUB_"))}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env["PATH"]])
    env["PATCHCTL_CACHE"] = str(tmp_path / "shell-cache")
    return env


STATEFUL_GH = """#!{python}
# gh for the stop step: `pr list --head` and `issue list` answered from $FAKE_STATE (open pull
# requests by branch, issues with author, labels and body); every other call recorded.
import json, os, subprocess, sys
args = sys.argv[1:]
state = json.load(open(os.environ["FAKE_STATE"]))
def option(name):
    return args[args.index(name) + 1] if name in args else None
def emit(rows):
    text = json.dumps(rows)
    if option("--jq"):
        text = subprocess.run(["jq", "-r", option("--jq")], input=text, capture_output=True, text=True).stdout
    sys.stdout.write(text)
if args[:2] == ["pr", "list"]:
    emit([{{"number": n}} for n in state["pulls"].get(option("--head"), [])])
elif args[:2] == ["issue", "list"]:
    emit([{{"number": i["number"], "body": i["body"]}} for i in state["issues"]
          if i["author"] == option("--author") and option("--label") in i["labels"]])
else:
    body = open(option("--body-file")).read() if option("--body-file") else None
    with open(os.environ["FAKE_GH_LOG"], "a") as log:
        log.write(json.dumps({{"args": args[:3] if args[0] == "label" else args, "body": body}}) + "\\n")
"""


@pytest.mark.parametrize("where", ["an-issue", "the-open-pull-request", "the-open-issue"])
def test_a_stopped_sync_reports_with_its_advice_on_the_pull_request_or_one_issue(
    tmp_path: Path, upstream: Repo, where: str
) -> None:
    """A sync that stops at a conflict: its report (where it stopped, what to run) is commented on the
    open pin-sync pull request, or on the open issue this workflow's bot opened, or opens one."""
    project = rendered(tmp_path, upstream)
    upstream.commit({"src/main.c": main_c({20: "main twenty rewritten"})}, "upstream takes line 20")
    marker = "<!-- patchctl-pin-sync-stop: up -->"
    bot, label = "app/github-actions", "patchctl-pin-sync"
    state = {
        "pulls": {"patchctl/pin-sync/up": [4]} if where == "the-open-pull-request" else {},
        "issues": [
            {"number": 2, "author": "mallory", "labels": [label], "body": "pasted " + marker},
            *(
                [{"number": 9, "author": bot, "labels": [label], "body": marker + "\nolder"}]
                if where == "the-open-issue"
                else []
            ),
        ],
    }
    (tmp_path / "state.json").write_text(json.dumps(state))
    fake_bin, log = tmp_path / "bin", tmp_path / "gh.log"
    fake_bin.mkdir()
    (fake_bin / "gh").write_text(STATEFUL_GH.format(python=sys.executable))
    (fake_bin / "gh").chmod(0o755)
    env = {
        "PATH": os.pathsep.join([str(fake_bin), str(stub_bin(tmp_path)), os.environ["PATH"]]),
        "FAKE_GH_LOG": str(log),
        "FAKE_STATE": str(tmp_path / "state.json"),
    }
    sync, job = run_pin_sync(tmp_path, project.path, env=env, github={"event_name": "schedule", "token": "gt"})
    assert sync.status == "failure" and job.status == "success", failures(job)
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert calls[0]["args"] == ["label", "create", label]
    [report] = calls[1:]
    expected = {
        "an-issue": ["issue", "create", "--title", "pin-sync of up needs a hand", "--body-file"],
        "the-open-pull-request": ["pr", "comment", "4", "--body-file"],
        "the-open-issue": ["issue", "comment", "9", "--body-file"],
    }[where]
    assert report["args"][: len(expected)] == expected, report
    body = report["body"]
    assert body.startswith(marker + "\n") and "conflict" in body.lower()
    assert "patchctl pin-sync up --continue" in body and "0001-patch-line-twenty.patch" in body  # the stop's advice
    # Its first command, run as printed in a clone, stops where the workflow's sync stopped.
    [first] = re.findall(r"run in a clone of this repository `([^`]+)`", body)
    clone = tmp_path / f"clone-{where}"
    subprocess.run(["git", "clone", "-q", str(project.path), str(clone)], check=True)
    again = subprocess.run(["bash", "-c", first], cwd=clone, capture_output=True, text=True, env=cli_env(tmp_path))
    assert again.returncode == 1 and "conflict" in again.stdout + again.stderr, again.stdout + again.stderr
    assert (clone / ".patchctl/sync/up/main/src/main.c").read_text().count("<<<<<<<") == 1
    # A sync that goes through later closes the issue of the stop.
    if where == "the-open-issue":
        upstream.commit({"src/main.c": main_c()}, "upstream reverts line 20")
        fake = tmp_path / "fake-gh"
        fake.mkdir()
        (fake / "gh").write_text(FAKE_GH)  # opens pull request #5
        (fake / "gh").chmod(0o755)
        env["PATH"] = os.pathsep.join([str(fake), env["PATH"]])
        # The stateful gh answers the issue list; FAKE_GH the pull request calls.
        (fake / "gh").write_text(
            '#!/bin/sh\ncase "$1" in issue|label) exec "' + str(fake_bin / "gh") + '" "$@" ;; esac\n' + FAKE_GH[10:]
        )
        origin = tmp_path / "origin.git"
        subprocess.run(["git", "init", "--quiet", "--bare", str(origin)], check=True)
        project.git("remote", "add", "origin", str(origin))
        log.unlink()
        sync, job = run_pin_sync(
            tmp_path, project.path, env=env, github={"event_name": "schedule", "token": "gt", "ref_name": "main"}
        )
        assert job.status == "success", failures(job)
        calls = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
        assert calls[-1]["args"][:3] == ["issue", "close", "9"], calls


@pytest.mark.parametrize(
    "tampered",
    [
        [{"key": "other/apply/main/x", "title": "t", "body": "<!-- patchctl-canary-key: other/apply/main/x -->"}],
        [
            {
                "key": "llama.cpp/compile/cpu/main/x",
                "title": "t",
                "body": "<!-- patchctl-canary-key: llama.cpp/compile/cpu/main/x -->",
            }
        ],
        [{"key": "llama.cpp/apply/main/x", "title": "t", "body": "no marker first"}],
        [
            {
                "key": "llama.cpp/apply/main/x",
                "title": "t",
                "body": "<!-- patchctl-canary-key: llama.cpp/apply/main/x -->",
                "labels": ["x"],
            }
        ],
        {"key": "llama.cpp/apply/main/x"},
    ],
    ids=["another-upstream", "a-compile-key-in-the-apply-list", "no-marker", "an-extra-field", "not-a-list"],
)
def test_the_canary_issue_job_files_nothing_from_a_list_that_is_not_one(tmp_path: Path, tampered) -> None:
    """The apply and compile jobs ran the upstream's code: the issue job takes their lists only in
    the shape patchctl writes them, for this upstream and that job's kind, or files nothing."""
    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "issues-apply.json").write_text(json.dumps(tampered))
    (tmp_path / "issues.json").write_text("[]")
    job, log = canary_issue_job(tmp_path, reports)
    assert job.status == "failure"
    assert "is not a canary issue list of llama.cpp: nothing is filed" in "".join(s.stdout for s in job.run_steps())
    assert not log.exists()
