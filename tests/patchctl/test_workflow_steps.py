"""ci.yml and pin-sync.yml, rendered for a downstream repository with a local upstream, run step by
step with bash through the workflow harness (tests/patchctl/actions_harness.py): every `run:` step,
the composite action expanded where a job calls `uses: ./`. Left out: calls to GitHub's API (the
pull-request step) and `.ci/run` (the test suite that runs this test)."""

from __future__ import annotations

import importlib.util
import json
import os
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
    h = harness(
        tmp_path,
        project.path,
        github={"event_name": "schedule"},
        leave_out={PR_STEP: "GitHub's API"},
        remote=cache.handlers(),
    )
    strategy = document["jobs"]["pin-sync"]["strategy"]["matrix"]["upstream"]
    assert h.substitute(strategy, {"inputs": {}}, lambda: "success") == ["up"]
    assert h.substitute(strategy, {"inputs": {"upstream": "up"}}, lambda: "success") == ["up"]

    job = h.run_job(path, "pin-sync", matrix={"upstream": "up"}, inputs={})
    failed = [(s.name, s.stdout, s.stderr) for s in job.run_steps() if s.outcome == "failure"]
    assert job.status == "success", failed
    assert job.steps["sync"].kind == "local-action" and job.steps["sync"].outputs["verdict"] == "pass"
    assert job.steps["moved"].outputs == {"moved": "true"}
    # What the sync fetched goes back into the Actions cache after it.
    assert len(cache.saved) == 1
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
    assert ".patchctl/" not in project.git("show", "--name-only", "--format=", "HEAD")
    # Every run: step ran but the one that calls GitHub's API.
    pr = next(s for s in job.order if s.name == PR_STEP)
    assert pr.kind == "left-out"
    ran = [s for s in job.order if s.kind == "run"]
    assert len(ran) + 1 == len(run_steps_of(path))


def test_pin_sync_bot_opens_nothing_when_the_pin_is_already_at_the_tip(tmp_path: Path, upstream: Repo) -> None:
    project = rendered(tmp_path, upstream)
    h = harness(tmp_path, project.path, github={"event_name": "schedule"}, leave_out={PR_STEP: "GitHub's API"})
    job = h.run_job(workflow(project, "pin-sync.yml"), "pin-sync", matrix={"upstream": "up"}, inputs={})
    assert job.steps["moved"].outputs == {"moved": "false"}
    assert job.steps["commit"].kind == "skipped"
    assert next(s for s in job.order if s.name == PR_STEP).kind in ("skipped", "left-out")


def test_pin_sync_dispatch_to_a_target_and_a_failing_gate(tmp_path: Path, upstream: Repo) -> None:
    project = rendered(tmp_path, upstream)
    middle = upstream.commit({"src/util.c": "util moved\n"}, "upstream work")
    upstream.commit({"src/main.c": main_c({20: "main twenty rewritten"})}, "upstream takes line 20")
    path = workflow(project, "pin-sync.yml")
    event = {"event_name": "workflow_dispatch"}
    h = harness(tmp_path, project.path, github=event, leave_out={PR_STEP: "GitHub's API"})
    job = h.run_job(path, "pin-sync", matrix={"upstream": "up"}, inputs={"upstream": "up", "target": middle})
    assert job.status == "success" and job.steps["commit"].outcome == "success"
    assert middle in project.git("show", "HEAD:matrix.yaml")

    # To the tip the patch conflicts: the job fails, no commit, the report still in the summary.
    project.git("switch", "--quiet", "main")
    write_config(project, middle, series_extra=GATE)
    project.commit({}, "back to main")
    h = harness(tmp_path, project.path, github=event, leave_out={PR_STEP: "GitHub's API"})
    job = h.run_job(path, "pin-sync", matrix={"upstream": "up"}, inputs={"upstream": "up", "target": ""})
    assert job.status == "failure" and job.steps["sync"].outputs["verdict"] == "fail"
    assert job.steps["commit"].kind == "skipped"
    assert "conflict" in job.summary.lower()


def test_pin_sync_commit_steps_in_a_clone_of_this_repository(tmp_path: Path) -> None:
    """The rendered `moved` and `commit` steps, verbatim, in a real clone of this repository (its
    .gitignore ignores .patchctl/), after a sync that moved the ci pin and left patchctl's state."""
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True, capture_output=True)
    assert subprocess.run(["git", "check-ignore", "-q", ".patchctl/"], cwd=clone).returncode == 0
    rendered_steps = yaml.safe_load((REPO / ".github/workflows/pin-sync.yml").read_text())["jobs"]["pin-sync"]["steps"]
    by_id = {s.get("id"): s for s in rendered_steps}
    # What pin-sync leaves behind: the moved pin, its report, and its own state under .patchctl/.
    config = clone / "matrix.yaml"
    text = config.read_text()
    old = yaml.safe_load(text)["upstreams"]["llama.cpp"]["ci"]["pin"]
    config.write_text(text.replace(old, "f" * 40))
    (clone / ".patchctl/trees/llama.cpp").mkdir(parents=True)
    (clone / ".patchctl/trees/llama.cpp/README").write_text("a tree\n")
    report = tmp_path / "report.md"
    report.write_text("## pin-sync llama.cpp: ✅\n\nmoved\n")
    sync = {"id": "sync", "run": f'echo "report={report}" >> "$GITHUB_OUTPUT"'}
    job = {"runs-on": "ubuntu-latest", "steps": [sync, by_id["moved"], by_id["commit"]]}
    workflow_file = tmp_path / "steps.yml"
    workflow_file.write_text(yaml.safe_dump({"name": "pin-sync", "on": "push", "jobs": {"pin-sync": job}}))
    h = harness(tmp_path, clone, github={"event_name": "schedule"})
    result = h.run_job(workflow_file, "pin-sync", matrix={"upstream": "llama.cpp"})
    assert result.status == "success", [(s.name, s.stdout, s.stderr) for s in result.run_steps()]
    assert result.steps["moved"].outputs == {"moved": "true"}
    assert result.steps["commit"].outputs["branch"] == "patchctl/pin-sync/llama.cpp"
    committed = subprocess.run(
        ["git", "show", "--name-only", "--format=%s", "HEAD"], cwd=clone, capture_output=True, text=True, check=True
    ).stdout.split()
    assert committed == ["pin-sync:", "move", "llama.cpp", "forward", "matrix.yaml"]
    status = subprocess.run(["git", "status", "--porcelain"], cwd=clone, capture_output=True, text=True, check=True)
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
        [installed_tool("zizmor"), "--offline", "--persona", "pedantic", "."],
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
# gh as the pull-request step calls it: every call recorded with the token it was given.
printf '%s | GH_TOKEN=%s\\n' "$*" "$GH_TOKEN" >> "$FAKE_GH_LOG"
if [ "$1 $2" = "pr list" ]; then echo 0; fi
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
def test_the_pull_request_token_and_a_warning_when_the_pull_request_gets_no_ci(
    tmp_path: Path, upstream: Repo, token: str
) -> None:
    project, fake_bin, log = pin_sync_ready(tmp_path, upstream, APP if token == "github-app" else "")
    minted = []
    h = harness(
        tmp_path,
        project.path,
        env={
            "PATH": os.pathsep.join([str(fake_bin), str(stub_bin(tmp_path)), os.environ["PATH"]]),
            "FAKE_GH_LOG": str(log),
        },
        github={"event_name": "schedule", "token": "the-github-token", "ref_name": "main"},
        secrets={"PATCHCTL_BOT_TOKEN": "the-bot-token"} if token == "bot-secret" else {"SYNC_APP_KEY": "a key"},
        vars={"SYNC_APP_CLIENT_ID": "Iv1.client"},
        remote={"actions/create-github-app-token": lambda given, _env: minted.append(given) or {"token": "app-tok"}},
    )
    job = h.run_job(workflow(project, "pin-sync.yml"), "pin-sync", matrix={"upstream": "up"}, inputs={})
    assert job.status == "success", [(s.name, s.stdout, s.stderr) for s in job.run_steps() if s.outcome != "success"]
    calls = log.read_text().splitlines()
    assert any(c.startswith("pr create --base main --head patchctl/pin-sync/up") for c in calls), calls
    used = {"github-token": "the-github-token", "bot-secret": "the-bot-token", "github-app": "app-tok"}[token]
    assert all(c.endswith(f"GH_TOKEN={used}") for c in calls)
    pushed = ["git", "rev-parse", "--verify", "refs/heads/patchctl/pin-sync/up"]
    assert subprocess.run(pushed, cwd=tmp_path / "origin.git").returncode == 0
    pr_step = next(s for s in job.order if s.name == PR_STEP)
    warned = "::warning title=pin-sync pull request without CI::" in pr_step.stdout
    assert warned is (token == "github-token")
    assert ("gets no CI" in job.summary) is (token == "github-token")
    if token == "github-app":
        rendered_file = str(workflow(project, "pin-sync.yml"))
        lint = subprocess.run(
            [installed_tool("actionlint"), "-no-color", rendered_file], capture_output=True, text=True
        )
        assert lint.returncode == 0, lint.stdout + lint.stderr
        config = str(REPO / ".github/zizmor.yml")
        audit = subprocess.run(
            [installed_tool("zizmor"), "--offline", "--persona", "pedantic", "--config", config, rendered_file],
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
    breaks = [{"key": key, "title": "canary: main no longer applies", "body": "broken\n" + marker.format(key)}]
    (reports / "issues-apply.json").write_text(json.dumps(breaks))
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
    job = h.run_job(REPO / ".github/workflows/canary.yml", "issues", needs=needs)
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
    h = harness(
        tmp_path,
        project.path,
        env={
            "PATH": os.pathsep.join([str(fake_bin), str(stub_bin(tmp_path)), os.environ["PATH"]]),
            "FAKE_GH_LOG": str(log),
        },
        github={"event_name": "schedule", "token": "the-github-token", "ref_name": "main"},
        secrets={"PATCHCTL_BOT_TOKEN": "the-bot-token"} if token == "bot-secret" else {},
    )
    job = h.run_job(rendered_file, "pin-sync", matrix={"upstream": "up"}, inputs={})
    assert job.status == "success", [(s.name, s.stdout, s.stderr) for s in job.run_steps() if s.outcome != "success"]
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
        [installed_tool("zizmor"), "--offline", "--persona", "pedantic", "--config", str(REPO / ".github/zizmor.yml"),
         str(rendered_file)],
    ):  # fmt: skip
        found = subprocess.run(linter, capture_output=True, text=True)
        assert found.returncode == 0, found.stdout + found.stderr
