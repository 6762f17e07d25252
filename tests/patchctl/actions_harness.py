"""Run the `run:` steps of a GitHub Actions workflow job or composite action locally, the way a runner does.

    harness = Harness(workspace=project, github={"event_name": "pull_request"}, tmp=tmp_path)
    job = harness.run_job(REPO / ".github/workflows/ci.yml", "patchctl", matrix={})
    assert job.steps["lint"].outcome == "success"

What it does, as GitHub documents it for hosted runners:
- every `run:` step is a fresh script run with its `shell:` (bash: `bash --noprofile --norc -eo pipefail
  {0}`, sh: `sh -e {0}`) in `working-directory:` (or `defaults.run`), relative to GITHUB_WORKSPACE;
- the environment is the base environment, plus the runner's variables (CI, GITHUB_ACTIONS,
  GITHUB_WORKSPACE, GITHUB_EVENT_NAME, GITHUB_REF, GITHUB_SHA, GITHUB_REPOSITORY, GITHUB_JOB,
  GITHUB_RUN_ID, GITHUB_RUN_ATTEMPT, RUNNER_OS, RUNNER_TEMP, RUNNER_ARCH), plus the workflow's,
  the job's and the step's `env:` with `${{ }}` substituted; GITHUB_OUTPUT, GITHUB_ENV, GITHUB_PATH and
  GITHUB_STEP_SUMMARY are fresh files per step, read back into `steps.ID.outputs`, later steps'
  environment, PATH, and the job's summary (`name=value` and `name<<DELIM` forms);
- `if:` is evaluated (implicit `success()`; `always()`, `failure()`, `cancelled()`), and
  `continue-on-error:` is honoured; `steps.ID.outcome`/`conclusion` are kept;
- `uses: ./PATH` (a local composite action) is expanded: its inputs (with defaults), its steps
  with `github.action_path` and GITHUB_ACTION_PATH, its `outputs:`. A composite action's inputs
  reach its steps only through `${{ inputs.x }}` (the runner sets no INPUT_* variable for them);
- a remote action named in `local_actions` (`{"OWNER/patchctl@SHA": checkout}`, like act's
  `--local-repository`) is expanded from that directory the same way;
- a step named in `leave_out` (by name or id: a call to GitHub's API, the test suite itself) is
  recorded as left out, with the test's reason, and not run;
- `uses:` of a remote action is not run: it is recorded with its evaluated `with:`, and a
  handler given for it (`remote={"actions/cache/restore": fn}`) may return its outputs.

Expressions: literals (strings, numbers, true/false/null), context paths (`inputs.x`, `matrix.z`,
`steps.id.outputs.y`, `env.X`, `github.event_name`, `runner.os`, `secrets.X`, `vars.X`, `job.status`,
`strategy.job-index`, `a['b']`), `!`, `==`, `!=`, `<`, `>`, `<=`, `>=`, `&&`, `||`, parentheses and the
functions `always`, `success`, `failure`, `cancelled`, `contains`, `startsWith`, `endsWith`, `format`,
`join`, `toJSON`, `fromJSON`, `hashFiles` (a fixed digest of the matched files). Anything else is an
error, so a test never passes on an expression the harness only pretended to understand.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

SHELLS = {
    "bash": ["bash", "--noprofile", "--norc", "-eo", "pipefail"],
    "sh": ["sh", "-e"],
}


class ExpressionError(ValueError):
    pass


# ------------------------------------------------------------------ expressions

TOKEN = re.compile(
    r"\s*(?:(?P<string>'(?:[^']|'')*')|(?P<number>-?[0-9]+(?:\.[0-9]+)?)"
    r"|(?P<op>==|!=|<=|>=|&&|\|\||[!<>()\[\],.])|(?P<name>[A-Za-z_][A-Za-z0-9_-]*|\*))"
)


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    text = text.strip()
    while pos < len(text):
        match = TOKEN.match(text, pos)
        if not match or match.end() == pos:
            raise ExpressionError(f"cannot parse expression {text!r} at {text[pos:]!r}")
        kind = match.lastgroup or ""
        out.append((kind, match.group(kind)))
        pos = match.end()
    return out


def _loose_equal(a: Any, b: Any) -> bool:
    if isinstance(a, str) and isinstance(b, str):
        return a.lower() == b.lower()
    if type(a) is type(b) or a is None or b is None:
        return a == b
    return _number(a) == _number(b)


def _number(value: Any) -> float:
    if value is None or value == "":
        return 0.0
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")


def to_string(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (dict, list)):
        return json.dumps(value, indent=2)
    return str(value)


class _Parser:
    def __init__(self, text: str, context: Mapping[str, Any], functions: Mapping[str, Callable[..., Any]]) -> None:
        self.text = text
        self.tokens = _tokens(text)
        self.pos = 0
        self.context = context
        self.functions = functions

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self, value: str | None = None) -> tuple[str, str]:
        token = self.peek()
        if token is None or (value is not None and token[1] != value):
            raise ExpressionError(f"expected {value or 'more'} in {self.text!r}")
        self.pos += 1
        return token

    def parse(self) -> Any:
        value = self.or_()
        if self.peek() is not None:
            raise ExpressionError(f"unexpected {self.peek()[1]!r} in {self.text!r}")
        return value

    def or_(self) -> Any:
        value = self.and_()
        while self.peek() == ("op", "||"):
            self.take()
            right = self.and_()
            value = value if value else right
        return value

    def and_(self) -> Any:
        value = self.compare()
        while self.peek() == ("op", "&&"):
            self.take()
            right = self.compare()
            value = right if value else value
        return value

    def compare(self) -> Any:
        value = self.unary()
        while self.peek() in (("op", "=="), ("op", "!="), ("op", "<"), ("op", ">"), ("op", "<="), ("op", ">=")):
            op = self.take()[1]
            right = self.unary()
            if op == "==":
                value = _loose_equal(value, right)
            elif op == "!=":
                value = not _loose_equal(value, right)
            else:
                a, b = _number(value), _number(right)
                value = {"<": a < b, ">": a > b, "<=": a <= b, ">=": a >= b}[op]
        return value

    def unary(self) -> Any:
        if self.peek() == ("op", "!"):
            self.take()
            return not self.unary()
        return self.postfix(self.primary())

    def primary(self) -> Any:
        kind, value = self.take()
        if kind == "string":
            return value[1:-1].replace("''", "'")
        if kind == "number":
            return float(value) if "." in value else int(value)
        if value == "(":
            inner = self.or_()
            self.take(")")
            return inner
        if kind != "name":
            raise ExpressionError(f"unexpected {value!r} in {self.text!r}")
        if value in ("true", "false"):
            return value == "true"
        if value == "null":
            return None
        if self.peek() == ("op", "("):
            self.take()
            args = []
            while self.peek() != ("op", ")"):
                args.append(self.or_())
                if self.peek() == ("op", ","):
                    self.take()
            self.take(")")
            function = self.functions.get(value.lower())
            if function is None:
                raise ExpressionError(f"unknown function {value}() in {self.text!r}")
            return function(*args)
        if value not in self.context:
            raise ExpressionError(f"unknown context {value!r} in {self.text!r}")
        return self.context[value]

    def postfix(self, value: Any) -> Any:
        while self.peek() in (("op", "."), ("op", "[")):
            if self.take()[1] == ".":
                key = self.take()[1]
                self_key: Any = key
            else:
                self_key = self.or_()
                self.take("]")
            value = _index(value, self_key)
        return value


def _index(value: Any, key: Any) -> Any:
    if isinstance(value, dict):
        if key in value:
            return value[key]
        lowered = {str(k).lower(): v for k, v in value.items()}
        return lowered.get(str(key).lower())
    if isinstance(value, list) and isinstance(key, (int, float)):
        index = int(key)
        return value[index] if 0 <= index < len(value) else None
    return None


# ------------------------------------------------------------------ results


@dataclass
class StepResult:
    id: str
    name: str
    kind: str  # "run", "local-action", "remote-action", "skipped" (its if: was false), "left-out" (by the test)
    outcome: str  # success, failure, skipped
    conclusion: str
    outputs: dict[str, str] = field(default_factory=dict)
    returncode: int | None = None
    stdout: str = ""
    stderr: str = ""
    uses: str = ""
    with_: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    children: list[StepResult] = field(default_factory=list)


@dataclass
class JobResult:
    steps: dict[str, StepResult]  # by id, then by name for steps without an id
    order: list[StepResult]
    status: str
    summary: str
    env: dict[str, str]
    outputs: dict[str, str] = field(default_factory=dict)

    def all_steps(self) -> list[StepResult]:
        flat: list[StepResult] = []
        for step in self.order:
            flat.append(step)
            flat.extend(step.children)
        return flat

    def run_steps(self) -> list[StepResult]:
        return [s for s in self.all_steps() if s.kind == "run"]


RemoteHandler = Callable[[dict[str, str], dict[str, str]], dict[str, str] | None]


def read_file_commands(path: Path) -> dict[str, str]:
    """`name=value` and `name<<DELIM ... DELIM` lines of a GITHUB_OUTPUT/GITHUB_ENV file."""
    values: dict[str, str] = {}
    lines = path.read_text().splitlines() if path.exists() else []
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        if not line.strip():
            continue
        heredoc = re.match(r"^([^=<]+)<<(.+)$", line)
        if heredoc and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = heredoc.group(1), heredoc.group(2)
            body = []
            while index < len(lines) and lines[index] != delimiter:
                body.append(lines[index])
                index += 1
            if index >= len(lines):
                raise ExpressionError(f"{path.name}: {name}<<{delimiter} is never closed")
            index += 1
            values[name] = "\n".join(body)
        elif "=" in line:
            name, value = line.split("=", 1)
            values[name] = value
        else:
            raise ExpressionError(f"{path.name}: invalid line {line!r}")
    return values


# ------------------------------------------------------------------ the runner


class Harness:
    def __init__(
        self,
        workspace: Path,
        tmp: Path,
        *,
        github: Mapping[str, Any] | None = None,
        runner_os: str = "Linux",
        base_env: Mapping[str, str] | None = None,
        secrets: Mapping[str, str] | None = None,
        vars: Mapping[str, str] | None = None,
        remote: Mapping[str, RemoteHandler] | None = None,
        leave_out: Mapping[str, str] | None = None,
        local_actions: Mapping[str, Path] | None = None,
        timeout: float = 600,
    ) -> None:
        self.workspace = Path(workspace)
        self.tmp = Path(tmp)
        self.runner_temp = self.tmp / "runner-temp"
        self.runner_temp.mkdir(parents=True, exist_ok=True)
        self.github: dict[str, Any] = {
            "event_name": "push",
            "ref": "refs/heads/main",
            "sha": "0" * 40,
            "repository": "owner/repo",
            "repository_owner": "owner",
            "run_id": "1",
            "run_attempt": "1",
            "token": "",
            "event": {},
            **(github or {}),
        }
        self.github["workspace"] = str(self.workspace)
        self.runner = {"os": runner_os, "arch": "X64", "temp": str(self.runner_temp), "name": "harness"}
        self.base_env = dict(os.environ if base_env is None else base_env)
        self.secrets = dict(secrets or {})
        self.vars = dict(vars or {})
        self.remote = dict(remote or {})
        self.leave_out = dict(leave_out or {})  # step name or id -> why the test leaves it out
        self.local_actions = {k: Path(v) for k, v in (local_actions or {}).items()}  # uses: -> checkout
        self.timeout = timeout
        self._counter = 0

    # -- expressions

    def _functions(self, status: Callable[[], str]) -> dict[str, Callable[..., Any]]:
        def hash_files(*patterns: str) -> str:
            digest = hashlib.sha256()
            matched = False
            for pattern in patterns:
                for path in sorted(self.workspace.glob(pattern)):
                    if path.is_file():
                        matched = True
                        digest.update(hashlib.sha256(path.read_bytes()).digest())
            return digest.hexdigest() if matched else ""

        def fmt(template: str, *args: Any) -> str:
            return re.sub(r"\{(\d+)\}", lambda m: to_string(args[int(m.group(1))]), to_string(template))

        def contains(haystack: Any, needle: Any) -> bool:
            if isinstance(haystack, list):
                return any(_loose_equal(item, needle) for item in haystack)
            return to_string(needle).lower() in to_string(haystack).lower()

        return {
            "always": lambda: True,
            "success": lambda: status() == "success",
            "failure": lambda: status() == "failure",
            "cancelled": lambda: False,
            "contains": contains,
            "startswith": lambda a, b: to_string(a).lower().startswith(to_string(b).lower()),
            "endswith": lambda a, b: to_string(a).lower().endswith(to_string(b).lower()),
            "format": fmt,
            "join": lambda items, sep=",": (
                to_string(sep).join(to_string(i) for i in items) if isinstance(items, list) else to_string(items)
            ),
            "tojson": lambda value: json.dumps(value, indent=2),
            "fromjson": lambda value: json.loads(to_string(value)),
            "hashfiles": hash_files,
        }

    def evaluate(self, expression: str, context: Mapping[str, Any], status: Callable[[], str]) -> Any:
        return _Parser(expression, context, self._functions(status)).parse()

    def substitute(self, value: Any, context: Mapping[str, Any], status: Callable[[], str]) -> Any:
        """VALUE with every `${{ }}` replaced; a string that is one expression keeps its type."""
        if isinstance(value, dict):
            return {k: self.substitute(v, context, status) for k, v in value.items()}
        if isinstance(value, list):
            return [self.substitute(v, context, status) for v in value]
        if not isinstance(value, str):
            return value
        whole = re.fullmatch(r"\s*\$\{\{((?:(?!\}\}).)*)\}\}\s*", value, re.S)
        if whole:
            return self.evaluate(whole.group(1), context, status)
        return re.sub(
            r"\$\{\{(.*?)\}\}", lambda m: to_string(self.evaluate(m.group(1), context, status)), value, flags=re.S
        )

    def condition(self, value: Any, context: Mapping[str, Any], status: Callable[[], str]) -> bool:
        if value is None:
            return status() == "success"
        if isinstance(value, bool):
            return value
        text = str(value).strip()
        whole = re.fullmatch(r"\$\{\{((?:(?!\}\}).)*)\}\}", text, re.S)
        expression = whole.group(1) if whole else text
        if not re.search(r"\b(always|success|failure|cancelled)\s*\(", expression):
            expression = f"success() && ({expression})"
        return bool(self.evaluate(expression, context, status))

    # -- jobs and actions

    def run_job(
        self,
        workflow: Path,
        job_id: str,
        *,
        matrix: Mapping[str, Any] | None = None,
        inputs: Mapping[str, Any] | None = None,
        strategy: Mapping[str, Any] | None = None,
        needs: Mapping[str, Any] | None = None,
    ) -> JobResult:
        document = yaml.safe_load(Path(workflow).read_text())
        job = document["jobs"][job_id]
        state = _State(status="success")
        github = {**self.github, "job": job_id, "workflow": document.get("name", "")}
        context: dict[str, Any] = {
            "github": github,
            "runner": self.runner,
            "matrix": dict(matrix or {}),
            "inputs": dict(inputs or {}),
            "secrets": self.secrets,
            "vars": self.vars,
            "strategy": {"job-index": 0, "job-total": 1, "fail-fast": True, **(strategy or {})},
            "job": {"status": "success"},
            "steps": {},
            "env": {},
            "needs": dict(needs or {}),  # {job: {"outputs": {...}, "result": ...}}, as the jobs before it left them
        }
        env: dict[str, str] = {}
        for layer in (document.get("env") or {}, job.get("env") or {}):
            context["env"] = env
            env.update({k: to_string(self.substitute(v, context, state.get)) for k, v in layer.items()})
        defaults = ((document.get("defaults") or {}).get("run") or {}) | ((job.get("defaults") or {}).get("run") or {})
        extra: dict[str, str] = {"GITHUB_JOB": job_id}
        order = self._run_steps(job["steps"], context, env, defaults, state, extra, action_path=None, composite=False)
        outputs = {k: to_string(self.substitute(v, context, state.get)) for k, v in (job.get("outputs") or {}).items()}
        return JobResult(
            steps={s.id: s for s in order},
            order=order,
            status=state.status,
            summary=state.summary,
            env=env,
            outputs=outputs,
        )

    def run_action(
        self, action_dir: Path, inputs: Mapping[str, Any] | None = None, *, env: Mapping[str, str] | None = None
    ) -> JobResult:
        """ACTION_DIR's action.yml as the only step of a job."""
        state = _State(status="success")
        context: dict[str, Any] = {
            "github": {**self.github, "job": "action"},
            "runner": self.runner,
            "matrix": {},
            "secrets": self.secrets,
            "vars": self.vars,
            "strategy": {"job-index": 0, "job-total": 1},
            "job": {"status": "success"},
            "steps": {},
            "env": dict(env or {}),
            "inputs": {},
        }
        job_env = dict(env or {})
        step = self._run_local_action(
            {"id": "action", "uses": str(action_dir), "with": dict(inputs or {})},
            "action",
            Path(action_dir),
            context,
            job_env,
            state,
            {"GITHUB_JOB": "action"},
        )
        if step.outcome == "failure":
            state.status = "failure"
        return JobResult(
            steps={"action": step},
            order=[step],
            status=state.status,
            summary=state.summary,
            env=job_env,
            outputs=step.outputs,
        )

    def _run_steps(
        self,
        steps: list[dict[str, Any]],
        context: dict[str, Any],
        env: dict[str, str],
        defaults: Mapping[str, Any],
        state: _State,
        extra: dict[str, str],
        *,
        action_path: Path | None,
        composite: bool,
    ) -> list[StepResult]:
        results: list[StepResult] = []
        for index, spec in enumerate(steps):
            step_id = str(spec.get("id") or f"__{index}")
            name = str(spec.get("name") or spec.get("id") or spec.get("uses") or spec.get("run", "").split("\n")[0])
            context["env"] = env
            context["job"] = {"status": state.status}
            if not self.condition(spec.get("if"), context, state.get):
                result = StepResult(step_id, name, "skipped", "skipped", "skipped")
            elif name in self.leave_out or step_id in self.leave_out:
                result = StepResult(step_id, name, "left-out", "success", "success")
            elif "run" in spec:
                result = self._run_script(spec, step_id, name, context, env, defaults, state, extra, composite)
            elif str(spec.get("uses", "")).startswith("./"):
                where = self.workspace / spec["uses"]
                result = self._run_local_action(spec, step_id, where, context, env, state, extra)
            elif str(spec.get("uses", "")) in self.local_actions:
                where = self.local_actions[str(spec["uses"])]
                result = self._run_local_action(spec, step_id, where, context, env, state, extra)
            else:
                result = self._run_remote(spec, step_id, name, context, state)
            if result.outcome == "failure" and not spec.get("continue-on-error"):
                state.status = "failure"
            elif result.outcome == "failure":
                result.conclusion = "success"
            context["steps"][step_id] = {
                "outputs": result.outputs,
                "outcome": result.outcome,
                "conclusion": result.conclusion,
            }
            results.append(result)
        return results

    def _run_script(
        self,
        spec: dict[str, Any],
        step_id: str,
        name: str,
        context: dict[str, Any],
        env: dict[str, str],
        defaults: Mapping[str, Any],
        state: _State,
        extra: dict[str, str],
        composite: bool,
    ) -> StepResult:
        shell = spec.get("shell") or defaults.get("shell")
        if shell is None:
            if composite:
                raise ExpressionError(f"composite step {name!r} has no shell: (required)")
            shell = "bash"
        if shell not in SHELLS:
            raise ExpressionError(f"step {name!r}: shell {shell!r} is not supported by the harness")
        step_env = {k: to_string(self.substitute(v, context, state.get)) for k, v in (spec.get("env") or {}).items()}
        script = to_string(self.substitute(spec["run"], context, state.get))
        directory = spec.get("working-directory") or defaults.get("working-directory") or "."
        cwd = self.workspace / to_string(self.substitute(directory, context, state.get))
        self._counter += 1
        files = self.tmp / "files" / f"{self._counter:03d}"
        files.mkdir(parents=True)
        paths = {n: files / n.lower() for n in ("GITHUB_OUTPUT", "GITHUB_ENV", "GITHUB_PATH", "GITHUB_STEP_SUMMARY")}
        for path in paths.values():
            path.write_text("")
        script_file = files / "script.sh"
        script_file.write_text(script)
        full_env = {
            **self.base_env,
            **self._runner_env(),
            **extra,
            **env,
            **step_env,
            **{k: str(v) for k, v in paths.items()},
        }
        if state.path:
            full_env["PATH"] = os.pathsep.join([*reversed(state.path), full_env.get("PATH", "")])
        try:
            done = subprocess.run(
                [*SHELLS[shell], str(script_file)],
                cwd=cwd,
                env=full_env,
                capture_output=True,
                text=True,
                timeout=self.timeout,
            )
        except FileNotFoundError as exc:  # no such working directory
            raise ExpressionError(f"step {name!r}: {exc}") from exc
        outputs = read_file_commands(paths["GITHUB_OUTPUT"])
        env.update(read_file_commands(paths["GITHUB_ENV"]))
        state.path.extend(line for line in paths["GITHUB_PATH"].read_text().splitlines() if line)
        state.summary += paths["GITHUB_STEP_SUMMARY"].read_text()
        outcome = "success" if done.returncode == 0 else "failure"
        return StepResult(
            step_id,
            name,
            "run",
            outcome,
            outcome,
            outputs,
            done.returncode,
            done.stdout,
            done.stderr,
            env=step_env,
        )

    def _runner_env(self) -> dict[str, str]:
        github = self.github
        return {
            "CI": "true",
            "GITHUB_ACTIONS": "true",
            "GITHUB_WORKSPACE": str(self.workspace),
            "GITHUB_EVENT_NAME": to_string(github["event_name"]),
            "GITHUB_REF": to_string(github["ref"]),
            "GITHUB_SHA": to_string(github["sha"]),
            "GITHUB_REPOSITORY": to_string(github["repository"]),
            "GITHUB_RUN_ID": to_string(github["run_id"]),
            "GITHUB_RUN_ATTEMPT": to_string(github["run_attempt"]),
            "RUNNER_OS": self.runner["os"],
            "RUNNER_ARCH": self.runner["arch"],
            "RUNNER_TEMP": str(self.runner_temp),
            "HOME": self.base_env.get("HOME", str(self.tmp / "home")),
        }

    def _run_local_action(
        self,
        spec: dict[str, Any],
        step_id: str,
        where: Path,
        context: dict[str, Any],
        env: dict[str, str],
        state: _State,
        extra: dict[str, str],
    ) -> StepResult:
        action = yaml.safe_load((where / "action.yml").read_text())
        if action["runs"]["using"] != "composite":
            raise ExpressionError(f"{where}: only composite local actions are supported")
        given = {k: self.substitute(v, context, state.get) for k, v in (spec.get("with") or {}).items()}
        unknown = set(given) - set(action.get("inputs") or {})
        if unknown:
            raise ExpressionError(f"{where}/action.yml: unexpected input(s) {sorted(unknown)}")
        inputs = {
            name: to_string(given[name]) if name in given else to_string(meta.get("default", ""))
            for name, meta in (action.get("inputs") or {}).items()
        }
        step_env = {k: to_string(self.substitute(v, context, state.get)) for k, v in (spec.get("env") or {}).items()}
        inner = {
            **context,
            "inputs": inputs,
            "steps": {},
            "github": {**context["github"], "action_path": str(where)},
        }
        inner_env = {**env, **step_env}
        inner_extra = {**extra, "GITHUB_ACTION_PATH": str(where)}
        inner_state = _State(status=state.status, path=state.path)
        children = self._run_steps(
            action["runs"]["steps"], inner, inner_env, {}, inner_state, inner_extra, action_path=where, composite=True
        )
        state.summary += inner_state.summary
        for key in set(inner_env) - set(env) - set(step_env):
            env[key] = inner_env[key]  # GITHUB_ENV writes outlive the action
        outputs = {
            k: to_string(self.substitute(v.get("value", ""), inner, inner_state.get))
            for k, v in (action.get("outputs") or {}).items()
        }
        failed = any(c.outcome == "failure" and c.conclusion == "failure" for c in children)
        outcome = "failure" if failed else "success"
        return StepResult(
            step_id,
            str(spec.get("name") or step_id),
            "local-action",
            outcome,
            outcome,
            outputs,
            uses=str(spec["uses"]),
            with_={k: to_string(v) for k, v in given.items()},
            children=children,
        )

    def _run_remote(
        self, spec: dict[str, Any], step_id: str, name: str, context: dict[str, Any], state: _State
    ) -> StepResult:
        uses = str(spec["uses"])
        action = uses.split("@", 1)[0]
        given = {k: to_string(self.substitute(v, context, state.get)) for k, v in (spec.get("with") or {}).items()}
        handler = self.remote.get(action)
        outputs = dict(handler(given, dict(context["env"])) or {}) if handler else {}
        return StepResult(step_id, name, "remote-action", "success", "success", outputs, uses=uses, with_=given)


@dataclass
class _State:
    status: str
    summary: str = ""
    path: list[str] = field(default_factory=list)

    def get(self) -> str:
        return self.status


def run_steps_of(document_path: Path) -> list[str]:
    """Every `run:` script of a workflow (all jobs) or action, in file order: what a test must cover."""
    document = yaml.safe_load(Path(document_path).read_text())
    if "runs" in document:
        steps = document["runs"].get("steps") or []
    else:
        steps = [s for job in document["jobs"].values() for s in job.get("steps") or []]
    return [s["run"] for s in steps if "run" in s]


class FakeActionsCache:
    """actions/cache/restore and actions/cache/save as GitHub documents them, on local directories.

    An entry is immutable once saved; restore takes the exact `key`, else the newest entry whose
    key starts with each `restore-keys` line in turn. `saved` lists every save, in order.
    """

    def __init__(self, store: Path) -> None:
        self.store = Path(store)
        self.store.mkdir(parents=True, exist_ok=True)
        self.entries: list[str] = []
        self.saved: list[str] = []

    def handlers(self) -> dict[str, RemoteHandler]:
        return {"actions/cache/restore": self.restore, "actions/cache/save": self.save}

    def _dir(self, key: str) -> Path:
        return self.store / hashlib.sha256(key.encode()).hexdigest()[:16]

    def restore(self, given: dict[str, str], env: dict[str, str]) -> dict[str, str]:
        key = given["key"]
        matched = key if key in self.entries else ""
        if not matched:
            for prefix in [line.strip() for line in given.get("restore-keys", "").splitlines() if line.strip()]:
                candidates = [k for k in self.entries if k.startswith(prefix)]
                if candidates:
                    matched = candidates[-1]
                    break
        if matched:
            target = Path(given["path"].strip())
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(self._dir(matched), target, symlinks=True)
        return {"cache-hit": "true" if matched == key else "false", "cache-matched-key": matched}

    def save(self, given: dict[str, str], env: dict[str, str]) -> dict[str, str]:
        key = given["key"]
        if key in self.entries:
            return {}  # the real action warns and saves nothing
        shutil.copytree(Path(given["path"].strip()), self._dir(key), symlinks=True)
        self.entries.append(key)
        self.saved.append(key)
        return {}
