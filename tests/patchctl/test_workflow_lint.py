"""The rendered workflows and the composite action pass actionlint and zizmor with zero
findings, every third-party action is pinned to a commit from matrix.yaml's actions: table,
and pull requests (forks included) get no write token and no secrets."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from patchctl.matrix.actions import DEFAULT_ACTIONS

from .matrix_fixtures import GOOD, REPO, make_project
from .tools import installed_tool

PINNED_USES = re.compile(r"^\s*-?\s*uses: ([A-Za-z0-9-]+/[A-Za-z0-9._/-]+)@([0-9a-f]{40}) # (v[0-9.]+)$")
WORKFLOWS = ("backend.yml", "canary.yml", "ci.yml", "pin-sync.yml")
# backend.yml's jobs that log in to the registries and push images
PUBLISH_JOBS = ("linux-publish", "merge")


def tool(name: str) -> str:
    return installed_tool(name)


def rendered_project(cli, tmp_path: Path) -> Path:
    """The good fixture rendered into a repository that holds this repo's action and zizmor config."""
    project = make_project(tmp_path)
    shutil.copy(REPO / "action.yml", project / "action.yml")
    (project / ".github").mkdir()
    shutil.copy(REPO / ".github/zizmor.yml", project / ".github/zizmor.yml")
    result = cli("-C", str(project), "matrix", "render")
    assert result.exit_code == 0, result.output
    return project


def run_actionlint(project: Path) -> subprocess.CompletedProcess:
    workflows = sorted(str(p) for p in (project / ".github/workflows").glob("*.yml"))
    return subprocess.run(
        [tool("actionlint"), "-no-color", "-format", "{{json .}}", *workflows],
        cwd=project,
        capture_output=True,
        text=True,
    )


def run_zizmor(project: Path, persona: str = "regular") -> subprocess.CompletedProcess:
    config = str(project / ".github/zizmor.yml")
    return subprocess.run(
        [tool("zizmor"), "--offline", "--persona", persona, "--format", "json", "--config", config, "."],
        cwd=project,
        capture_output=True,
        text=True,
    )


@pytest.mark.parametrize("persona", ["regular", "pedantic", "auditor"])
@pytest.mark.parametrize("where", ["repository", "fixture"])
def test_actionlint_and_zizmor_report_nothing(cli, tmp_path: Path, where: str, persona: str) -> None:
    project = REPO if where == "repository" else rendered_project(cli, tmp_path)
    lint = run_actionlint(project)
    assert lint.returncode == 0 and json.loads(lint.stdout or "[]") == [], lint.stdout + lint.stderr
    audit = run_zizmor(project, persona)
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert json.loads(audit.stdout) == [], audit.stdout
    # Both tools did look: they name every workflow and the action they audited.
    assert "completed ./action.yml" in audit.stderr
    assert all(f"completed ./.github/workflows/{name}" in audit.stderr for name in WORKFLOWS)
    if where == "repository":  # and the hand-written Pages workflow beside the rendered ones
        assert "completed ./.github/workflows/docs.yml" in audit.stderr


def test_the_linters_do_find_what_the_issue_reported(tmp_path: Path) -> None:
    """A workflow as it used to be rendered (tag-pinned node20 actions, persisted credentials) fails both."""
    project = tmp_path / "old"
    (project / ".github/workflows").mkdir(parents=True)
    shutil.copy(REPO / ".github/zizmor.yml", project / ".github/zizmor.yml")
    (project / ".github/workflows/ci.yml").write_text(
        "name: ci\non: [push]\npermissions:\n  contents: read\njobs:\n  test:\n    runs-on: ubuntu-latest\n"
        "    steps:\n      - uses: actions/checkout@v4\n      - uses: actions/setup-python@v5\n"
    )
    lint = run_actionlint(project)
    assert lint.returncode == 1 and {e["kind"] for e in json.loads(lint.stdout)} == {"action"}
    audit = run_zizmor(project)
    assert audit.returncode != 0
    assert {f["ident"] for f in json.loads(audit.stdout)} >= {"unpinned-uses", "artipacked"}


def uses_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if re.match(r"^\s*-?\s*uses:", line)]


@pytest.mark.parametrize("path", [f".github/workflows/{name}" for name in WORKFLOWS] + ["action.yml"])
def test_every_action_is_pinned_to_the_table_commit(path: str) -> None:
    table = yaml.safe_load((REPO / "matrix.yaml").read_text())["actions"]
    assert set(table) == set(DEFAULT_ACTIONS), "matrix.yaml's table and the built-in defaults disagree"
    for name, pin in DEFAULT_ACTIONS.items():
        assert table[name] == {"sha": pin.sha, "version": pin.version}
    lines = uses_lines((REPO / path).read_text())
    assert lines
    for line in lines:
        if line.strip().removeprefix("- ") == "uses: ./":
            continue
        match = PINNED_USES.match(line)
        assert match, f"{path}: not pinned to a commit: {line.strip()}"
        name, sha, version = match.groups()
        assert table[name] == {"sha": sha, "version": version}, line


def steps_of(document: dict) -> list[dict]:
    if "runs" in document:
        return document["runs"]["steps"]
    return [step for job in document["jobs"].values() for step in job.get("steps", [])]


@pytest.mark.parametrize("path", [f".github/workflows/{name}" for name in WORKFLOWS] + ["action.yml"])
def test_checkouts_do_not_persist_credentials_and_scripts_read_only_env(path: str) -> None:
    document = yaml.safe_load((REPO / path).read_text())
    for step in steps_of(document):
        if step.get("uses", "").startswith("actions/checkout@"):
            assert step["with"]["persist-credentials"] is False, step
        assert "${{" not in step.get("run", ""), step


def test_least_privilege_and_fork_safety() -> None:
    for name in WORKFLOWS:
        document = yaml.safe_load((REPO / ".github/workflows" / name).read_text())
        assert document["permissions"] == {}, f"{name}: top-level permissions must be empty"
        triggers = set(document[True])  # PyYAML reads the key `on` as True
        assert "pull_request_target" not in triggers and "workflow_run" not in triggers
        for job_name, job in document["jobs"].items():
            writes = {scope for scope, level in job.get("permissions", {}).items() if level == "write"}
            secrets = set(re.findall(r"secrets\.[A-Za-z0-9_]+", yaml.safe_dump(job)))
            if name == "backend.yml" and job_name in PUBLISH_JOBS:
                # The image pushes: only when the plan says so (default branch or a v* tag, never a PR).
                assert "needs.plan.outputs.push == 'true'" in job["if"], f"{name}:{job_name}: {job['if']}"
                assert writes <= {"packages"}, f"{name}:{job_name} writes {writes}"
                continue
            # Besides those: pin-sync's bot token, in a workflow only a person or the clock starts.
            allowed = {"secrets.PATCHCTL_BOT_TOKEN"} if name == "pin-sync.yml" else set()
            assert secrets <= allowed, f"{name}:{job_name}: {secrets}"
            if writes:
                # Only a person or the clock may start a job that pushes.
                assert triggers <= {"workflow_dispatch", "schedule"}, f"{name}:{job_name} writes on {triggers}"
            # A secret lives in a deployment environment (zizmor's auditor persona: secrets-outside-env).
            assert not secrets or job.get("environment"), f"{name}:{job_name} reads {secrets} outside an environment"
    sync = yaml.safe_load((REPO / ".github/workflows/pin-sync.yml").read_text())
    # The upstream's build and the gates run with a read-only token; only the publish job writes.
    assert sync["jobs"]["sync"]["permissions"] == {"contents": "read"}
    assert sync["jobs"]["publish"]["permissions"] == {
        "contents": "write",
        "pull-requests": "write",
        "issues": "write",
        "actions": "write",
    }
    assert set(sync[True]) == {"workflow_dispatch", "schedule"}
    # The dashboard issue: written by one job of each scheduled workflow, which reads the pull
    # requests and their checks and writes issues only (contents: read for the `./` checkout).
    canary = yaml.safe_load((REPO / ".github/workflows/canary.yml").read_text())
    for document in (sync, canary):
        assert document["jobs"]["dashboard"]["permissions"] == {
            "contents": "read",
            "issues": "write",
            "pull-requests": "read",
            "checks": "read",
            "statuses": "read",
        }
    backend = yaml.safe_load((REPO / ".github/workflows/backend.yml").read_text())
    for job_name in PUBLISH_JOBS:
        assert backend["jobs"][job_name]["environment"] == "registry"


def test_untrusted_code_never_shares_a_job_with_a_write_token() -> None:
    """The jobs that run the upstream's code (pin-sync's build and gates, the canary's apply and
    compile) hold a read-only token and no secret; the jobs that write take only their artifacts,
    and restore no cache such a job could have saved."""
    untrusted = {"pin-sync.yml": ["sync", "status"], "canary.yml": ["resolve", "compile"]}
    writers = {"pin-sync.yml": ["publish", "dashboard"], "canary.yml": ["issues", "dashboard"]}
    for name in untrusted:
        jobs = yaml.safe_load((REPO / ".github/workflows" / name).read_text())["jobs"]
        for job_name in untrusted[name]:
            job = jobs[job_name]
            assert job["permissions"] == {"contents": "read"}, f"{name}:{job_name}"
            assert "secrets." not in yaml.safe_dump(job), f"{name}:{job_name}"
        for job_name in writers[name]:
            job = jobs[job_name]
            assert set(untrusted[name]) & set([job["needs"]] if isinstance(job["needs"], str) else job["needs"])
            for step in job["steps"]:
                uses = step.get("uses", "")
                assert not uses.startswith("actions/cache"), f"{name}:{job_name} restores a cache"
                if uses == "./":  # patchctl's action: no cache of either kind
                    assert step["with"].get("cache") == "false" and step["with"].get("pip-cache") == "false", step


def test_an_actions_table_overrides_a_default_and_must_be_a_commit(cli, tmp_path: Path) -> None:
    other = "0123456789abcdef0123456789abcdef01234567"
    project = make_project(
        tmp_path, GOOD.read_text() + f"\nactions:\n  actions/checkout: {{sha: {other}, version: v9.1.0}}\n"
    )
    assert cli("-C", str(project), "matrix", "render").exit_code == 0
    text = (project / ".github/workflows/ci.yml").read_text()
    assert f"actions/checkout@{other} # v9.1.0" in text
    assert "actions/checkout@" + DEFAULT_ACTIONS["actions/checkout"].sha not in text

    for case, (bad, message) in enumerate(
        [
            ("{sha: v7.0.1, version: v7.0.1}", "must be a full 40-character lowercase commit id, got 'v7.0.1'"),
            (f"{{sha: {other.upper()}, version: v7}}", "must be a full 40-character lowercase commit id"),
            (f"{{sha: {other}, version: main}}", "must be a release tag like v7.0.1, got 'main'"),
            (f"{{sha: {other}}}", "missing required key 'version'"),
        ]
    ):
        case_dir = tmp_path / f"case{case}"
        case_dir.mkdir()
        project = make_project(case_dir, GOOD.read_text() + f"\nactions:\n  actions/checkout: {bad}\n")
        result = cli("-C", str(project), "matrix", "render")
        assert result.exit_code == 2, result.output
        assert message in result.stderr and "matrix.yaml:" in result.stderr and "Traceback" not in result.output
        assert not (project / ".github").exists()


def test_a_template_using_an_unpinned_action_is_refused(cli, tmp_path: Path) -> None:
    project = make_project(tmp_path)
    template = project / "templates/ci.yml.j2"
    template.write_text(template.read_text() + '      - uses: {@ action("someone/unknown") @}\n')
    result = cli("-C", str(project), "matrix", "render")
    assert result.exit_code == 2
    assert "templates/ci.yml.j2: action 'someone/unknown' has no pinned commit" in result.stderr
    assert not (project / ".github").exists()
