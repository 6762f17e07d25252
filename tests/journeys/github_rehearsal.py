"""github.com, rehearsed on this machine: a repository's rendered workflows run by `act` on the
host (`-P LABEL=-self-hosted`: no Docker for the runner itself), started by the events GitHub
would send, with every remote action replaced by a local stand-in.

    github = GitHubRehearsal(tmp_path / "github", "rehearsal/project")
    github.publish(project_dir)                      # the first push to main
    [canary] = github.schedule("canary.yml")         # a scheduled run, as GitHub starts it
    assert canary.conclusion == "success"
    github.issues()                                  # what the workflows filed, as `gh` sees it

What stands in for what:
- github.com's git: a bare repository $ROOT/git/OWNER/NAME.git whose HEAD is the default
  branch (`main`, never `master`: act fills `master` into payloads that lack a repository);
- the remote actions: tests/journeys/actions/OWNER/REPO (--local-repository), one per action
  the workflows and their composite actions use; an action with no stand-in is an error;
- the published patchctl action (`OWNER/patchctl@SHA` in a downstream): this checkout;
- the API: `gh` on PATH (tests/journeys/gh_standin.py), its state in $ROOT/store/github.json;
- the registry: a log of pushed tags, $ROOT/store/registry.jsonl; `docker buildx imagetools
  create` (a multi-arch manifest) is answered by a `docker` wrapper from that log;
- a runner per job: act's fresh job directory (RUNNER_TEMP, the workspace, a home cache).

GitHub decides which workflows an event starts; so does `GitHubRehearsal.on()`: the `on:`
triggers with their `branches`, `tags` and `paths` filters, the workflow files of the commit
the event is for (the default branch's for `schedule`), and no run for events made with
GITHUB_TOKEN (a pull request opened with it gets no CI).

Payloads have the shapes GitHub documents: `schedule` carries only `schedule` (the cron), a
`workflow_dispatch` `inputs`, `ref`, `repository`; `pull_request` `number` and the pull
request with `head` and `base`; `push` `ref`, `before`, `after`, `repository`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from patchctl.project.globs import glob_match

HERE = Path(__file__).resolve().parent
STANDINS = HERE / "actions"
ACT_TIMEOUT_S = 600
GITHUB_TOKEN = "ghs_rehearsal_github_token"
ZERO = "0" * 40
# Every runs-on label the rendered workflows use runs on this host.
RUNNER_LABELS = ("ubuntu-latest", "ubuntu-24.04", "ubuntu-24.04-arm", "ubuntu-22.04", "macos-14", "macos-latest")
USES = re.compile(r"^\s*(?:-\s+)?uses:\s*['\"]?([^'\"\s#]+)", re.MULTILINE)

DOCKER_WRAPPER = """\
#!{python}
# `docker` for the rehearsal: `buildx imagetools inspect` and `create` (a manifest list in a
# registry) are answered from the registry log; every other command is the engine's own docker.
import json, os, sys
args = sys.argv[1:]
def pushed_tags():
    log = os.path.join(os.environ["JOURNEY_STORE"], "registry.jsonl")
    return [json.loads(line)["tag"] for line in open(log)] if os.path.exists(log) else []
if args[:3] == ["buildx", "imagetools", "inspect"]:
    image = [a for a in args[3:] if not a.startswith("-")][0]
    if image not in pushed_tags():
        sys.stderr.write("ERROR: " + image + ": not found\\n")
        sys.exit(1)
    print("Name: " + image)
    sys.exit(0)
if args[:3] == ["buildx", "imagetools", "create"]:
    rest = args[3:]
    tags = [rest[i + 1] for i, a in enumerate(rest) if a in ("-t", "--tag")]
    sources = [a for i, a in enumerate(rest)
               if not a.startswith("-") and (i == 0 or rest[i - 1] not in ("-t", "--tag"))]
    log = os.path.join(os.environ["JOURNEY_STORE"], "registry.jsonl")
    pushed = {{}}
    if os.path.exists(log):
        for line in open(log):
            entry = json.loads(line)
            pushed[entry["tag"]] = entry
    missing = [s for s in sources if s not in pushed]
    if missing:
        sys.stderr.write("ERROR: " + missing[0] + ": not found\\n")
        sys.exit(1)
    with open(log, "a") as out:
        for tag in tags:
            entry = {{"tag": tag, "manifests": [pushed[s]["image"] for s in sources], "sources": sources,
                      "platforms": [pushed[s]["platform"] for s in sources], "run_id": os.environ.get("GITHUB_RUN_ID")}}
            out.write(json.dumps(entry, sort_keys=True) + "\\n")
    sys.exit(0)
os.execv({docker!r}, [{docker!r}, *args])
"""

GH_WRAPPER = """\
#!/bin/sh
exec {python} {script} "$@"
"""


@dataclass
class Job:
    job_id: str
    name: str
    matrix: dict[str, Any]
    result: str  # success | failure | skipped | cancelled


@dataclass
class WorkflowRun:
    workflow: str
    event: str
    run_id: int
    returncode: int
    jobs: list[Job]
    steps: list[dict[str, Any]]
    log: str
    jobs_defined: list[str] = field(default_factory=list)  # the workflow's jobs: those not in `jobs` were skipped

    @property
    def conclusion(self) -> str:
        if any(j.result == "failure" for j in self.jobs) or (self.returncode != 0 and not self.jobs):
            return "failure"
        return "success"

    def results(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for job in self.jobs:
            out.setdefault(job.job_id, []).append(job.result)
        return out

    def ran(self, job_id: str) -> list[Job]:
        return [j for j in self.jobs if j.job_id == job_id]

    def output_of(self, job_id: str) -> str:
        """What the job's steps printed (every matrix leg of it, in order)."""
        return "".join(s["msg"] for s in self.steps if s.get("jobID") == job_id and s.get("raw_output"))

    def step_results(self, job_id: str) -> list[tuple[str, str]]:
        return [
            (s["step"], s["stepResult"])
            for s in self.steps
            if s.get("jobID") == job_id and "stepResult" in s and s.get("stage") == "Main" and len(s["stepID"]) == 1
        ]

    def seconds(self, job_id: str, step: str | None = None) -> float:
        """How long JOB_ID (every matrix leg of it, or its STEP alone) ran, from act's timestamps."""
        from datetime import datetime

        times = [
            datetime.fromisoformat(s["time"].replace("Z", "+00:00")).timestamp()
            for s in self.steps
            if s.get("jobID") == job_id and "time" in s and (step is None or s.get("step") == step)
        ]
        return max(times) - min(times) if times else 0.0

    def describe(self) -> str:
        """The run, for an assertion message: each job's result and the tail of what failed."""
        lines = [f"{self.workflow} on {self.event} (run {self.run_id}, act exit {self.returncode}): {self.results()}"]
        for job in self.jobs:
            if job.result == "failure":
                lines.append(f"--- {job.job_id} {job.matrix or ''}\n{self.output_of(job.job_id)[-4000:]}")
        if self.returncode != 0 and not self.jobs:
            lines.append(self.log[-4000:])
        return "\n".join(lines)


def host_site_packages() -> list[str]:
    """The running interpreter's package directories: what a job's Python sees beside its own."""
    paths = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}
    return sorted(p for p in paths if p and Path(p).is_dir())


def uses_of(text: str) -> list[str]:
    return [u for u in USES.findall(text) if not u.startswith(("./", "docker://"))]


def workflow_triggers(document: dict[str, Any]) -> dict[str, Any]:
    # YAML 1.1 reads the key `on` as True.
    on = document.get("on", document.get(True))
    if isinstance(on, str):
        return {on: {}}
    if isinstance(on, list):
        return {name: {} for name in on}
    return {name: (spec or {}) for name, spec in (on or {}).items()}


def _filter(values: Iterable[str], include: list[str] | None, exclude: list[str] | None) -> bool:
    """GitHub's include/ignore filter: a pattern list with `!` negations, the last match wins."""
    values = list(values)
    if include is not None:

        def included(value: str) -> bool:
            verdict = False
            for pattern in include:
                if pattern.startswith("!"):
                    if glob_match(value, pattern[1:]):
                        verdict = False
                elif glob_match(value, pattern):
                    verdict = True
            return verdict

        return any(included(v) for v in values)
    if exclude is not None:
        return any(not any(glob_match(v, p) for p in exclude) for v in values)
    return True


class GitHubRehearsal:
    """One repository on the rehearsal's github.com, and the runs its events start."""

    def __init__(
        self,
        root: Path,
        repository: str,
        *,
        default_branch: str = "main",
        secrets: dict[str, str] | None = None,
        variables: dict[str, str] | None = None,
        published_actions: dict[str, Path] | None = None,
    ) -> None:
        self.root = root
        self.repository = repository
        self.default_branch = default_branch
        self.secrets = dict(secrets or {})
        self.variables = dict(variables or {})
        # OWNER/NAME (an action published elsewhere, e.g. OWNER/patchctl) -> a local checkout of it.
        self.published_actions = dict(published_actions or {})
        self.store = root / "store"
        self.git_root = root / "git"
        self.bin = root / "bin"
        self.home = root / "home"
        for path in (self.store, self.git_root, self.bin, self.home):
            path.mkdir(parents=True, exist_ok=True)
        self.origin = self.git_root / f"{repository}.git"
        if not self.origin.exists():
            self._git("init", "-q", "--bare", f"--initial-branch={default_branch}", str(self.origin))
        self.run_count = 0
        self._write_tools()

    # ------------------------------------------------------------ set-up

    def _write_tools(self) -> None:
        docker = shutil.which("docker") or "/usr/bin/docker"
        wrappers = {
            "gh": GH_WRAPPER.format(python=sys.executable, script=HERE / "gh_standin.py"),
            "docker": DOCKER_WRAPPER.format(python=sys.executable, docker=docker),
        }
        for name, text in wrappers.items():
            path = self.bin / name
            path.write_text(text)
            path.chmod(0o755)

    def _git(self, *args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
        identity = {
            "GIT_AUTHOR_NAME": "rehearsal",
            "GIT_AUTHOR_EMAIL": "rehearsal@example.com",
            "GIT_COMMITTER_NAME": "rehearsal",
            "GIT_COMMITTER_EMAIL": "rehearsal@example.com",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_CONFIG_NOSYSTEM": "1",
        }
        proc = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, env={**os.environ, **identity, **(env or {})}
        )
        if proc.returncode != 0:
            raise AssertionError(f"git {' '.join(args)} failed: {proc.stderr.strip()}")
        return proc.stdout

    def origin_git(self, *args: str) -> str:
        return self._git("--git-dir", str(self.origin), *args)

    def sha(self, ref: str) -> str:
        return self.origin_git("rev-parse", ref + "^{commit}").strip()

    def publish(self, source: Path, message: str = "initial import") -> str:
        """Push SOURCE (a directory: its files as `git add --all` sees them, .gitignore honoured)
        as the first commit of the default branch."""
        work = self.root / "publish"
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(source, work, ignore=shutil.ignore_patterns(".git"), symlinks=True)
        self._git("init", "-q", f"--initial-branch={self.default_branch}", cwd=work)
        self._git("add", "--all", cwd=work)
        self._git("commit", "-q", "-m", message, cwd=work)
        self._git("push", "-q", str(self.origin), f"HEAD:refs/heads/{self.default_branch}", cwd=work)
        shutil.rmtree(work)
        return self.sha(f"refs/heads/{self.default_branch}")

    def clone(self, ref: str, into: Path) -> Path:
        """A working clone at REF (a branch is checked out as itself), for a test to push from."""
        shutil.rmtree(into, ignore_errors=True)
        self._git("clone", "-q", str(self.origin), str(into))
        branch = ref.removeprefix("refs/heads/")
        if ref.startswith("refs/heads/"):
            self._git("checkout", "-q", "-B", branch, f"origin/{branch}", cwd=into)
        else:
            self._git("fetch", "-q", "origin", ref, cwd=into)
            self._git("checkout", "-q", "--detach", "FETCH_HEAD", cwd=into)
        return into

    # ------------------------------------------------------------ state, as the API shows it

    def state(self) -> dict[str, Any]:
        path = self.store / "github.json"
        return json.loads(path.read_text()).get(self.repository, {}) if path.exists() else {}

    def issues(self, state: str = "all") -> list[dict[str, Any]]:
        return [i for i in self.state().get("issues", []) if state == "all" or i["state"] == state.upper()]

    def pulls(self, state: str = "all") -> list[dict[str, Any]]:
        return [p for p in self.state().get("pulls", []) if state == "all" or p["state"] == state.upper()]

    def gh_calls(self, run_id: int | None = None) -> list[dict[str, Any]]:
        path = self.store / "gh.jsonl"
        calls = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
        return [c for c in calls if run_id is None or c["run_id"] == str(run_id)]

    def action_calls(self, run_id: int | None = None) -> list[dict[str, Any]]:
        path = self.store / "actions.jsonl"
        calls = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
        return [c for c in calls if run_id is None or c["run_id"] == str(run_id)]

    def registry(self) -> list[dict[str, Any]]:
        path = self.store / "registry.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def artifacts(self, run_id: int, pattern: str = "*") -> list[Path]:
        """The artifacts run RUN_ID uploaded whose names match PATTERN."""
        return sorted((self.store / "artifacts" / str(run_id)).glob(pattern))

    def remove_images(self) -> None:
        """Take the images the runs built out of the Docker engine again."""
        built = sorted({c["image"] for c in self.action_calls() if c["action"] == "docker/build-push-action"})
        if built:
            subprocess.run(["docker", "rmi", "--force", *built], capture_output=True)

    def cache_keys(self) -> list[str]:
        path = self.store / "actions-cache" / "index.json"
        return [e["key"] for e in json.loads(path.read_text())] if path.exists() else []

    def _edit_state(self, edit: Any) -> None:
        path = self.store / "github.json"
        everything = json.loads(path.read_text()) if path.exists() else {}
        edit(everything.setdefault(self.repository, {}))
        path.write_text(json.dumps(everything, indent=1, sort_keys=True))

    # ------------------------------------------------------------ payloads

    def repository_object(self) -> dict[str, Any]:
        owner, name = self.repository.split("/")
        return {
            "id": 1,
            "name": name,
            "full_name": self.repository,
            "owner": {"login": owner, "type": "Organization"},
            "private": False,
            "default_branch": self.default_branch,
            "html_url": f"https://github.com/{self.repository}",
            "clone_url": f"https://github.com/{self.repository}.git",
        }

    def schedule_payload(self, cron: str) -> dict[str, Any]:
        # GitHub sends the cron string and nothing else: no repository, no ref, no sender.
        return {"schedule": cron}

    def dispatch_payload(self, workflow: str, inputs: dict[str, str], ref: str | None = None) -> dict[str, Any]:
        return {
            "inputs": inputs,
            "ref": ref or f"refs/heads/{self.default_branch}",
            "repository": self.repository_object(),
            "sender": {"login": "maintainer", "type": "User"},
            "workflow": f".github/workflows/{workflow}",
        }

    def pull_request_payload(self, number: int, action: str = "opened") -> dict[str, Any]:
        pull = next(p for p in self.pulls() if p["number"] == number)
        side = {
            "head": (pull["headRefName"], pull["headRefOid"]),
            "base": (pull["baseRefName"], pull["baseRefOid"]),
        }
        return {
            "action": action,
            "number": number,
            "pull_request": {
                "number": number,
                "state": pull["state"].lower(),
                "title": pull["title"],
                "body": pull["body"],
                "user": {"login": pull["author"]["login"]},
                "labels": pull["labels"],
                "merged": False,
                "draft": False,
                **{
                    key: {
                        "ref": ref,
                        "sha": sha,
                        "label": f"{self.repository.split('/')[0]}:{ref}",
                        "repo": self.repository_object(),
                    }
                    for key, (ref, sha) in side.items()
                },
            },
            "repository": self.repository_object(),
            "sender": {"login": pull["author"]["login"]},
        }

    def push_payload(self, ref: str, before: str, after: str) -> dict[str, Any]:
        return {
            "ref": ref,
            "before": before,
            "after": after,
            "base_ref": None,
            "created": before == ZERO,
            "deleted": after == ZERO,
            "forced": False,
            "compare": f"https://github.com/{self.repository}/compare/{before[:12]}...{after[:12]}",
            "commits": [],
            "head_commit": {"id": after, "message": self.origin_git("log", "-1", "--format=%B", after).strip()},
            "pusher": {"name": "maintainer"},
            "repository": {**self.repository_object(), "master_branch": self.default_branch},
            "sender": {"login": "maintainer", "type": "User"},
        }

    # ------------------------------------------------------------ what GitHub starts

    def _changed_files(self, base: str, head: str) -> list[str]:
        if base == ZERO:
            return self.origin_git("ls-tree", "-r", "--name-only", head).split()
        return self.origin_git("diff", "--name-only", f"{base}...{head}").split()

    def workflows_at(self, sha: str) -> dict[str, dict[str, Any]]:
        names = self.origin_git("ls-tree", "--name-only", f"{sha}:.github/workflows").split()
        return {
            name: yaml.safe_load(self.origin_git("show", f"{sha}:.github/workflows/{name}"))
            for name in sorted(names)
            if name.endswith((".yml", ".yaml"))
        }

    def triggered(self, event: str, payload: dict[str, Any], sha: str) -> list[str]:
        """The workflow files at SHA that EVENT starts on GitHub."""
        started = []
        for name, document in self.workflows_at(sha).items():
            triggers = workflow_triggers(document)
            if event not in triggers:
                continue
            spec = triggers[event] or {}
            if event == "push":
                ref = payload["ref"]
                kind, short = (
                    ("tags", ref.removeprefix("refs/tags/"))
                    if ref.startswith("refs/tags/")
                    else ("branches", ref.removeprefix("refs/heads/"))
                )
                other = "branches" if kind == "tags" else "tags"
                if (kind not in spec and f"{kind}-ignore" not in spec) and (other in spec or f"{other}-ignore" in spec):
                    continue  # only the other kind of ref is filtered in
                if not _filter([short], spec.get(kind), spec.get(f"{kind}-ignore")):
                    continue
                if ("paths" in spec or "paths-ignore" in spec) and kind == "branches":
                    changed = self._changed_files(payload["before"], payload["after"])
                    if not _filter(changed, spec.get("paths"), spec.get("paths-ignore")):
                        continue
            elif event == "pull_request":
                types = spec.get("types", ["opened", "synchronize", "reopened"])
                if payload["action"] not in types:
                    continue
                base = payload["pull_request"]["base"]["ref"]
                if not _filter([base], spec.get("branches"), spec.get("branches-ignore")):
                    continue
                if "paths" in spec or "paths-ignore" in spec:
                    changed = self._changed_files(
                        payload["pull_request"]["base"]["sha"], payload["pull_request"]["head"]["sha"]
                    )
                    if not _filter(changed, spec.get("paths"), spec.get("paths-ignore")):
                        continue
            started.append(name)
        return started

    def schedule(self, workflow: str) -> WorkflowRun:
        """The workflow's scheduled run: the default branch's latest commit and its workflow file."""
        sha = self.sha(f"refs/heads/{self.default_branch}")
        document = self.workflows_at(sha)[workflow]
        [cron] = [entry["cron"] for entry in workflow_triggers(document)["schedule"]]
        return self.run(workflow, "schedule", self.schedule_payload(cron), sha, f"refs/heads/{self.default_branch}")

    def dispatch(self, workflow: str, inputs: dict[str, str]) -> WorkflowRun:
        ref = f"refs/heads/{self.default_branch}"
        return self.run(workflow, "workflow_dispatch", self.dispatch_payload(workflow, inputs), self.sha(ref), ref)

    def run_dispatches(self) -> list[WorkflowRun]:
        """The workflow_dispatch runs asked for (`gh workflow run`) since the last call, as GitHub
        starts them: each at its branch's tip, with the workflow file of that commit (one without
        a workflow_dispatch trigger is refused). GITHUB_TOKEN may ask: GitHub's documented exception."""
        asked: list[dict[str, Any]] = []

        def take(state: dict[str, Any]) -> None:
            asked.extend(state.get("dispatches", []))
            state["dispatches"] = []

        self._edit_state(take)
        runs = []
        for entry in asked:
            ref = f"refs/heads/{entry['ref']}"
            sha = self.sha(ref)
            document = self.workflows_at(sha)[entry["workflow"]]
            assert "workflow_dispatch" in workflow_triggers(document), f"{entry['workflow']} has no workflow_dispatch"
            payload = self.dispatch_payload(entry["workflow"], entry["inputs"], ref)
            runs.append(self.run(entry["workflow"], "workflow_dispatch", payload, sha, ref))
        return runs

    def on_pull_request(self, number: int, action: str = "opened") -> list[WorkflowRun]:
        """What opening (or ACTION on) pull request NUMBER starts: nothing when a GITHUB_TOKEN made it."""
        pull = next(p for p in self.pulls() if p["number"] == number)
        if pull["events"][-1]["by"] == "app/github-actions":
            return []  # GitHub starts no workflow for an event made with GITHUB_TOKEN
        payload = self.pull_request_payload(number, action)
        sha = pull["mergeCommitOid"]
        return [
            self.run(name, "pull_request", payload, sha, f"refs/pull/{number}/merge")
            for name in self.triggered("pull_request", payload, sha)
        ]

    def merge_pull(self, number: int) -> list[WorkflowRun]:
        """Merge pull request NUMBER as the button does (a merge commit on the base branch), then
        start what the push starts."""
        pull = next(p for p in self.pulls() if p["number"] == number)
        base_ref = f"refs/heads/{pull['baseRefName']}"
        before = self.sha(base_ref)
        work = self.clone(base_ref, self.root / "merge")
        self._git("fetch", "-q", "origin", f"refs/pull/{number}/head", cwd=work)
        self._git(
            "merge",
            "-q",
            "--no-ff",
            "-m",
            f"Merge pull request #{number} from {pull['headRefName']}",
            "FETCH_HEAD",
            cwd=work,
        )
        self._git("push", "-q", "origin", f"HEAD:{base_ref}", cwd=work)
        after = self.sha(base_ref)

        def merged(state: dict[str, Any]) -> None:
            for p in state["pulls"]:
                if p["number"] == number:
                    p["state"] = "MERGED"
                    p["events"].append({"action": "closed", "merged": True, "by": "maintainer"})

        self._edit_state(merged)
        return self.on_push(base_ref, before, after)

    def on_push(self, ref: str, before: str, after: str) -> list[WorkflowRun]:
        payload = self.push_payload(ref, before, after)
        return [self.run(name, "push", payload, after, ref) for name in self.triggered("push", payload, after)]

    # ------------------------------------------------------------ act

    def _local_repositories(self, texts: Iterable[str]) -> list[str]:
        """--local-repository OWNER/REPO@REF=DIR for every remote action the texts use."""
        mapping = {}
        for text in texts:
            for uses in uses_of(text):
                name, _, ref = uses.partition("@")
                owner_repo = "/".join(name.split("/")[:2])
                if owner_repo in self.published_actions:
                    mapping[f"{owner_repo}@{ref}"] = self.published_actions[owner_repo]
                    continue
                standin = STANDINS / owner_repo
                if not (STANDINS / name / "action.yml").is_file():
                    raise AssertionError(
                        f"no rehearsal stand-in for {uses} (add tests/journeys/actions/{name}/action.yml)"
                    )
                mapping[f"{owner_repo}@{ref}"] = standin
        return [f"{key}={value}" for key, value in sorted(mapping.items())]

    def action_texts(self, view: Path) -> list[str]:
        """The workflow files and every action.yml they reach: the repository's own and the published ones."""
        texts = [p.read_text() for p in sorted((view / ".github" / "workflows").glob("*.y*ml"))]
        texts += [p.read_text() for p in sorted(view.rglob("action.y*ml")) if ".git" not in p.parts]
        for checkout in self.published_actions.values():
            texts += [(checkout / name).read_text() for name in ("action.yml",) if (checkout / name).exists()]
        return texts

    def run(self, workflow: str, event: str, payload: dict[str, Any], sha: str, ref: str) -> WorkflowRun:
        """One workflow run, as GitHub starts it for EVENT at SHA on REF."""
        self.run_count += 1
        run_id = self.run_count
        run_dir = self.root / "runs" / f"{run_id}-{workflow.split('.')[0]}-{event}"
        view = run_dir / "view"
        # What GitHub reads the workflow from: the commit, checked out as its branch when on one
        # (act takes github.ref for a schedule from the branch checked out there).
        self._git("clone", "-q", "--no-checkout", str(self.origin), str(view))
        if ref.startswith("refs/heads/"):
            self._git("checkout", "-q", "-B", ref.removeprefix("refs/heads/"), sha, cwd=view)
        else:
            self._git("checkout", "-q", "--detach", sha, cwd=view)
        event_file = run_dir / "event.json"
        event_file.write_text(json.dumps(payload, indent=1))
        command = [
            shutil.which("act") or str(Path(sys.executable).parent / "act"),
            event,
            "-W",
            str(view / ".github" / "workflows" / workflow),
            "-C",
            str(view),
            "-e",
            str(event_file),
            "--json",
            "--no-skip-checkout",
            # One job at a time: act 0.2.89 reads and writes its --local-repository map from
            # parallel jobs without a lock, and Go ends the process on "concurrent map read and
            # map write" (nektos/act#6055, not merged). Needs still order the jobs as GitHub does.
            "--concurrent-jobs",
            "1",
            "--no-cache-server",
            "--action-offline-mode",
            "--action-cache-path",
            str(self.root / "act-cache"),
            "--env-file",
            os.devnull,
            "--var-file",
            os.devnull,
            "--secret-file",
            os.devnull,
            "--input-file",
            os.devnull,
            "--env",
            f"GITHUB_REPOSITORY={self.repository}",
            "--env",
            f"GITHUB_REPOSITORY_OWNER={self.repository.split('/')[0]}",
            "--env",
            f"GITHUB_RUN_ID={run_id}",
            "--env",
            f"GITHUB_RUN_NUMBER={run_id}",
            "--env",
            "GITHUB_RUN_ATTEMPT=1",
            "--env",
            f"GITHUB_SHA={sha}",
            "-s",
            f"GITHUB_TOKEN={GITHUB_TOKEN}",
        ]
        for label in RUNNER_LABELS:
            command += ["-P", f"{label}=-self-hosted"]
        for name, value in sorted(self.secrets.items()):
            command += ["-s", f"{name}={value}"]
        for name, value in sorted(self.variables.items()):
            command += ["--var", f"{name}={value}"]
        for mapping in self._local_repositories(self.action_texts(view)):
            command += ["--local-repository", mapping]
        env = {
            "PATH": os.pathsep.join(
                [str(self.bin), "/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"]
            ),
            "HOME": str(self.home),
            "LANG": "C.UTF-8",
            "JOURNEY_PYTHON": sys.executable,
            "JOURNEY_BASE_PYTHON": str(
                Path(sys.base_prefix) / "bin" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
            ),
            "JOURNEY_HOST_SITE": os.pathsep.join(host_site_packages()),
            "JOURNEY_STANDINS": str(STANDINS),
            "JOURNEY_STORE": str(self.store),
            "JOURNEY_GITHUB": str(self.git_root),
            "JOURNEY_GITHUB_TOKEN": GITHUB_TOKEN,
            "JOURNEY_WORKFLOW": str(view / ".github" / "workflows" / workflow),  # its jobs' permissions
            "JOURNEY_DEFAULT_BRANCH": self.default_branch,
        }
        if os.environ.get("DOCKER_HOST"):
            env["DOCKER_HOST"] = os.environ["DOCKER_HOST"]
        proc = subprocess.run(command, cwd=view, env=env, capture_output=True, text=True, timeout=ACT_TIMEOUT_S)
        (run_dir / "act.log").write_text(proc.stdout + proc.stderr)
        entries = []
        for line in proc.stdout.splitlines():
            try:
                entries.append(json.loads(line))
            except json.JSONDecodeError:
                continue
        jobs = [
            Job(e["jobID"], e.get("job", ""), e.get("matrix") or {}, e["jobResult"])
            for e in entries
            if "jobResult" in e
        ]
        steps = [e for e in entries if e.get("level") != "debug"]
        defined = list(
            (yaml.safe_load((view / ".github" / "workflows" / workflow).read_text()) or {}).get("jobs") or {}
        )
        return WorkflowRun(workflow, event, run_id, proc.returncode, jobs, steps, proc.stdout + proc.stderr, defined)


def write_files(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
