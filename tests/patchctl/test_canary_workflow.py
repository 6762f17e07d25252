"""Every `run:` step of the rendered canary workflow, run as Actions runs it (bash -e, the
step's env with its expressions filled in, GITHUB_OUTPUT, GITHUB_STEP_SUMMARY,
GITHUB_EVENT_NAME, RUNNER_TEMP) against local upstreams: a repository standing in for
github.com (the workflow sets PATCHCTL_UPSTREAM_SOURCE=ci) and a CMake project whose build
one upstream commit breaks. Only the GitHub API is left out: `gh` is a recording stand-in
that answers `issue list` with the issues the test says are open."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from patchctl import git

from .conftest import Project, Repo, make_patch
from .test_canary_compile_docker import BUILD, CMAKE, cmake_image  # noqa: F401  (session fixture)
from .tools import installed_tool

pytestmark = pytest.mark.docker

REPO = Path(__file__).resolve().parents[2]
EXPRESSION = re.compile(r"\$\{\{\s*([^}]+?)\s*\}\}")

FAKE_GH = """\
#!{python}
import json, os, sys
args = sys.argv[1:]
if args[:2] == ["issue", "list"]:
    assert args[args.index("--author") + 1] == "app/github-actions", args  # only the bot's own issues
    assert args[args.index("--label") + 1] == "patchctl-canary", args  # with its label
    sys.stdout.write(open(os.environ["FAKE_GH_OPEN"]).read())
    sys.exit(0)
if args[:2] == ["label", "create"]:  # idempotent set-up (--force), not a filing
    sys.exit(0)
body = None
if "--body-file" in args:
    body = open(args[args.index("--body-file") + 1]).read()
with open(os.environ["FAKE_GH_LOG"], "a") as log:
    log.write(json.dumps({{"args": args, "body": body, "repo": os.environ.get("GH_REPO"),
                          "token": bool(os.environ.get("GH_TOKEN"))}}) + "\\n")
"""


class Runner:
    """Runs the canary workflow's `run:` steps for one project, one simulated run at a time."""

    def __init__(self, project: Path, tmp: Path):
        self.project = project
        self.tmp = tmp
        self.workflow = yaml.safe_load((project / ".github/workflows/canary.yml").read_text())
        self.bin = tmp / "fake-bin"
        self.bin.mkdir(parents=True)
        gh = self.bin / "gh"
        gh.write_text(FAKE_GH.format(python=sys.executable))
        gh.chmod(gh.stat().st_mode | stat.S_IEXEC)
        self.run_number = 0

    def steps(self, job: str) -> list[dict]:
        return [s for s in self.workflow["jobs"][job]["steps"] if "run" in s]

    def run_step(self, job: str, step: dict, context: dict[str, str], workspace: Path) -> tuple[int, dict, str]:
        """Run STEP in WORKSPACE; returns (exit code, its outputs, its step summary)."""
        self.run_number += 1
        scratch = self.tmp / f"step-{self.run_number}"
        scratch.mkdir()
        output, summary = scratch / "output", scratch / "summary"
        output.touch()
        summary.touch()

        def fill(value: object) -> str:
            def replace(match: re.Match) -> str:
                if match.group(1) not in context:
                    raise AssertionError(
                        f"{job}: step uses ${{{{ {match.group(1)} }}}} which the test does not provide"
                    )
                return context[match.group(1)]

            return EXPRESSION.sub(replace, str(value))

        env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "PATCHCTL_"))}
        env.update({k: fill(v) for k, v in self.workflow.get("env", {}).items()})
        env.update({k: fill(v) for k, v in step.get("env", {}).items()})
        env.update(
            {
                "PATH": f"{self.bin}:{Path(sys.executable).parent}:{env['PATH']}",
                "CI": "true",
                "GITHUB_ACTIONS": "true",
                "GITHUB_OUTPUT": str(output),
                "GITHUB_STEP_SUMMARY": str(summary),
                "GITHUB_EVENT_NAME": context["github.event_name"],
                "GITHUB_WORKSPACE": str(workspace),
                "RUNNER_TEMP": str(self.tmp / "runner-temp"),
            }
        )
        assert "${{" not in step["run"], "a run: script must take expressions through env only"
        script = scratch / "step.sh"
        script.write_text(step["run"])
        proc = subprocess.run(
            ["bash", "-e", str(script)], cwd=workspace, env=env, capture_output=True, text=True, timeout=600
        )
        outputs = dict(line.split("=", 1) for line in output.read_text().splitlines() if "=" in line)
        return proc.returncode, outputs, summary.read_text() + proc.stdout + proc.stderr

    def workflow_run(self, event: str, open_issues: list[dict], lost: tuple[str, ...] = (), rev: str = "") -> dict:
        """One run of the workflow: resolve, one compile job per toolchain, the issue step
        (its artifact download done by copying every job's canary-report/)."""
        shutil.rmtree(self.tmp / "runner-temp", ignore_errors=True)
        (self.tmp / "runner-temp").mkdir()
        context = {"github.event_name": event, "inputs.rev": rev, "github.token": "fake-token"}
        # Each job runs in a fresh checkout of the project.
        jobs: dict[str, dict] = {}
        workspace = self._checkout("resolve")
        resolve, status = self.steps("resolve")
        code, outputs, log = self.run_step("resolve", resolve, context, workspace)
        jobs["resolve"] = {"code": code, "outputs": outputs, "log": log, "reports": [workspace / "canary-report"]}
        assert outputs.get("rev"), log
        if not rev:  # the dashboard's status, judged in the same job (a hand-picked rev leaves it out)
            s_code, _, s_log = self.run_step("resolve", status, context, workspace)
            assert s_code == 0, s_log
            judged = json.loads((workspace / "canary-report" / "status.json").read_text())
            assert [series["tip"] for series in judged["series"]] == [outputs["rev"]], judged
        matrix = json.loads(outputs["toolchains"])["include"]
        for entry in matrix:
            ws = self._checkout(f"compile-{entry['name']}")
            ctx = {**context, "needs.resolve.outputs.rev": outputs["rev"], "matrix.name": entry["name"]}
            [compile_step] = self.steps("compile")
            c_code, _, c_log = self.run_step("compile", compile_step, ctx, ws)
            jobs[f"compile-{entry['name']}"] = {"code": c_code, "log": c_log, "reports": [ws / "canary-report"]}
        if rev:  # the issues job's `if:` skips a hand-picked rev
            return {"jobs": jobs, "rev": outputs["rev"], "gh": []}
        issues_ws = self.tmp / f"issues-{self.run_number}"
        (issues_ws / "canary-report").mkdir(parents=True)
        for name, job in jobs.items():
            for report in [] if name in lost else job["reports"]:  # LOST: jobs whose upload never happened
                for file in report.glob("*.json") if report.is_dir() else []:
                    shutil.copy(file, issues_ws / "canary-report" / file.name)
        open_file = self.tmp / f"open-{self.run_number}.json"
        open_file.write_text(json.dumps(open_issues))
        gh_log = self.tmp / f"gh-{self.run_number}.jsonl"
        ctx = {
            **context,
            "needs.resolve.outputs.rev": outputs["rev"],
            "github.token": "fake-token",
            "github.repository": "example/patchctl",
        }
        [issues_step] = self.steps("issues")
        issues_step = {
            **issues_step,
            "env": {**issues_step["env"], "FAKE_GH_OPEN": str(open_file), "FAKE_GH_LOG": str(gh_log)},
        }
        i_code, _, i_log = self.run_step("issues", issues_step, ctx, issues_ws)
        calls = [json.loads(line) for line in gh_log.read_text().splitlines()] if gh_log.exists() else []
        return {"jobs": jobs, "rev": outputs["rev"], "issues_code": i_code, "issues_log": i_log, "gh": calls}

    def _checkout(self, name: str) -> Path:
        dest = self.tmp / f"ws-{name}-{self.run_number}"
        subprocess.run(["git", "clone", "-q", str(self.project), str(dest)], check=True, capture_output=True)
        return dest


@pytest.fixture
def setup(tmp_path: Path, cmake_image: str, cli) -> tuple[Runner, Repo, Repo]:  # noqa: F811
    frozen = Repo(tmp_path / "embedded-default")
    frozen.commit(
        {
            "CMakeLists.txt": CMAKE.format(extra=""),
            "src/a.c": "int a(void) { return 1; }\n",
            "src/b.c": "int b(void) { return 2; }\n",
        },
        "initial",
    )
    pin = frozen.head
    github = Repo(tmp_path / "github")
    github.git("fetch", "-q", str(frozen.path), "main")
    github.git("checkout", "-q", "-B", "master", "FETCH_HEAD")
    project = Project(tmp_path / "project", frozen, pin)
    project.add_patch(
        "0001-add-hello.patch",
        make_patch(
            frozen,
            pin,
            {"CMakeLists.txt": CMAKE.format(extra=" src/hello.c"), "src/hello.c": "int hello(void) { return 42; }\n"},
            "Add hello",
        ),
    )
    (project.path / "matrix.yaml").write_text(
        textwrap.dedent(
            f"""\
            version: 1
            upstreams:
              up:
                url: {frozen.path}
                branch: main
                pin: '{pin}'
                ci: {{url: {github.path}, branch: master}}
            series:
              main: {{upstream: up, dir: patches/main}}
            canary:
              upstream: up
              toolchains:
                - name: cpu
                  tag-suffix: -cpu-up
                  cuda-major-version: ''
                  image: {cmake_image}
                  command: {BUILD}
            workflows: {{action: ./}}  # the action.yml copied in below
            """
        )
    )
    templates = tmp_path / "templates"
    templates.mkdir()
    shutil.copy(REPO / "templates/canary.yml.j2", templates / "canary.yml.j2")
    shutil.copy(REPO / "action.yml", project.path / "action.yml")
    result = cli("-C", project.path, "matrix", "render", "--templates", templates)
    assert result.exit_code == 0, result.output
    project.git("add", "-A")
    project.git("commit", "-q", "-m", "project")
    return Runner(project.path, tmp_path / "actions"), frozen, github


def test_canary_workflow_steps_file_comment_and_close_one_issue_per_break(setup) -> None:
    runner, frozen, github = setup
    runner.tmp.mkdir(exist_ok=True)
    frozen.commit({"src/b.c": "int b(void) { return frozen_only_break; }\n"}, "Only in the embedded default")

    # green on GitHub's tip: nothing filed (the embedded default's break is not followed)
    github.commit({"src/a.c": "int a(void) { return 2; }\n"}, "Unrelated")
    green = runner.workflow_run("schedule", [])
    assert green["rev"] == github.head and green["jobs"]["resolve"]["code"] == 0
    assert green["jobs"]["compile-cpu"]["code"] == 0, green["jobs"]["compile-cpu"]["log"]
    assert green["issues_code"] == 0 and green["gh"] == [], green["issues_log"]

    # red: one upstream commit breaks the build; the issue names it and quotes the log
    breaking = github.commit({"src/b.c": "int b(void) { return no_such_symbol; }\n"}, "Break b")
    first_tip = github.commit({"src/a.c": "int a(void) { return 3; }\n"}, "Unrelated two")
    red = runner.workflow_run("schedule", [{"number": 3, "body": "someone else's issue"}])
    assert red["jobs"]["compile-cpu"]["code"] == 1
    assert red["issues_code"] == 0, red["issues_log"]
    [create] = red["gh"]
    key = f"up/compile/cpu/main/{breaking}"
    assert create["args"][:2] == ["issue", "create"] and create["repo"] == "example/patchctl" and create["token"]
    assert create["args"][create["args"].index("--title") + 1] == "canary up: main does not build with cpu"
    assert create["body"].startswith(f"<!-- patchctl-canary-key: {key} -->")
    assert f"`{breaking}` `Break b`" in create["body"] and "no_such_symbol" in create["body"]
    assert f"tip: `{first_tip}`" in create["body"]
    assert f"new issue: `{key}`" in red["issues_log"]

    # a hand-picked older rev (workflow_dispatch input) is what every job tests
    older = runner.workflow_run("workflow_dispatch", [], rev=first_tip)
    assert older["rev"] == first_tip and older["jobs"]["compile-cpu"]["code"] == 1

    # still red at a new tip: a comment on the same issue, nothing new
    second_tip = github.commit({"src/a.c": "int a(void) { return 4; }\n"}, "Unrelated three")
    filed = [{"number": 3, "body": "someone else's issue"}, {"number": 12, "body": create["body"]}]
    again = runner.workflow_run("schedule", filed)
    assert [c["args"][:3] for c in again["gh"]] == [["issue", "comment", "12"]]
    assert f"tip: `{second_tip}`" in again["gh"][0]["body"]

    # green again: the issue is closed, the unrelated one is left alone
    fixed = github.commit({"src/b.c": "int b(void) { return 5; }\n"}, "Fix b")
    closing = runner.workflow_run("workflow_dispatch", filed)
    assert closing["jobs"]["compile-cpu"]["code"] == 0
    [close] = closing["gh"]
    assert close["args"][:3] == ["issue", "close", "12"] and fixed in " ".join(close["args"])


def test_apply_break_is_filed_and_a_crashed_job_closes_nothing(setup) -> None:
    runner, frozen, github = setup
    runner.tmp.mkdir(exist_ok=True)
    breaking = github.commit({"CMakeLists.txt": CMAKE.format(extra=" src/c.c"), "src/c.c": "int c;\n"}, "Add c")
    red = runner.workflow_run("schedule", [])
    assert red["jobs"]["resolve"]["code"] == 1  # red apply: the job fails, but still hands on its rev
    # One red job per break: the series is not built, and the compile job says why and stays green.
    assert red["jobs"]["compile-cpu"]["code"] == 0, red["jobs"]["compile-cpu"]["log"]
    assert "the series does not apply at the tip" in red["jobs"]["compile-cpu"]["log"]
    assert "nothing failed to compile" in red["jobs"]["compile-cpu"]["log"]
    [create] = red["gh"]  # one issue: the compile job's copy of the apply break is the same key
    key = f"up/apply/main/0001-add-hello.patch/{breaking}"
    assert create["body"].startswith(f"<!-- patchctl-canary-key: {key} -->")

    # the apply is green again, but the compile job crashed before writing its issue list:
    # the apply issue is closed, the compile issue it cannot speak for stays open
    stale = "<!-- patchctl-canary-key: up/compile/cpu/main/" + "a" * 40 + " -->\nold"
    (runner.project / "patches/main/0001-add-hello.patch").unlink()
    config = runner.project / "matrix.yaml"  # the series is empty on purpose now (it fails closed otherwise)
    config.write_text(config.read_text().replace("dir: patches/main}", "dir: patches/main, allow_empty: true}"))
    git.run(["commit", "-qam", "drop the patch"], runner.project)  # patchctl's git: an identity whatever HOME holds
    filed = [{"number": 5, "body": create["body"]}, {"number": 6, "body": stale}]
    run = runner.workflow_run("schedule", filed, lost=("compile-cpu",))
    assert run["jobs"]["resolve"]["code"] == 0, run["jobs"]["resolve"]["log"]
    assert [c["args"][:3] for c in run["gh"]] == [["issue", "close", "5"]]

    # with every job's list present, the stale compile issue is closed too
    run = runner.workflow_run("schedule", filed)
    assert sorted(c["args"][2] for c in run["gh"]) == ["5", "6"]


def test_rendered_canary_workflow_is_clean_for_zizmor_pedantic_and_scopes_issue_writes() -> None:
    zizmor = installed_tool("zizmor")
    workflow = REPO / ".github/workflows/canary.yml"
    proc = subprocess.run(
        [
            zizmor,
            "--offline",
            "--persona",
            "pedantic",
            "--format",
            "json",
            "--config",
            str(REPO / ".github/zizmor.yml"),
            str(workflow),
        ],
        capture_output=True,
        text=True,
    )
    assert json.loads(proc.stdout or "[]") == [], proc.stdout + proc.stderr
    jobs = yaml.safe_load(workflow.read_text())["jobs"]
    writers = {name for name, job in jobs.items() if "write" in json.dumps(job.get("permissions", {}))}
    assert writers == {"issues", "dashboard"} and jobs["issues"]["permissions"] == {"issues": "write"}
    assert {scope for scope, level in jobs["dashboard"]["permissions"].items() if level == "write"} == {"issues"}
    assert yaml.safe_load(workflow.read_text())["env"]["PATCHCTL_UPSTREAM_SOURCE"] == "ci"
