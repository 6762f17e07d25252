"""The MX8xx rules: what the workflows under `.github/workflows` reference exists.

    MX801  a local action (`uses: ./PATH`) or reusable workflow has its file in the repository
    MX802  a `run:` script calls only repository files that exist (e.g. `.ci/run`)
    MX803  a workflow runs patchctl on series and upstreams that matrix.yaml has
    MX804  the patchctl action the workflows call is one github.com can have (action_source.py)

Every workflow is read, the rendered ones and the project's own alike, and judged only where
patchctl can read it (workflow_steps.py): a step on a runner, under a shell or in a directory
it cannot know, or in a job that has not checked this repository out, is left alone. A missing
file is also left alone where something else may make it: a path git ignores (a build's
output), one an earlier step names (downloaded, built, unpacked), one with a generator beside it
(`configure` from `configure.ac`, `X` from `X.in`).
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

from .. import git
from ..confined import Refused, Root
from ..errors import ConfigError
from ..output.findings import Finding
from ..project import yamlloc
from ..project.config import Config
from ..records import dataclass
from .action_source import installed_clone, split_action, unpublished
from .actions import SELF_ACTION
from .model import BuildMatrix
from .workflow_steps import REPOSITORY_PATH, StepView, commands, found, inside, steps

WORKFLOWS_DIR = ".github/workflows"
# patchctl commands whose positional arguments name series, and those whose first names an upstream.
SERIES_COMMANDS = ("apply", "export", "gate", "lint", "vendor")
UPSTREAM_COMMANDS = ("pin-sync", "canary")
# What a missing file may be made from by an earlier step (autoconf, automake, templates).
GENERATOR_SUFFIXES = (".in", ".ac", ".am")


@dataclass
class WorkflowTally:
    """What the MX8xx rules read: a green check says how much it judged."""

    files: int = 0  # workflow files read
    run_steps: int = 0  # `run:` steps in them
    read: int = 0  # those whose script was judged (runner, shell, directory and checkout known)
    references: int = 0  # repository files looked up: scripts called, local actions, reusable workflows

    def summary(self) -> str:
        read = f"{self.read} of {self.run_steps} run step(s) read"
        return f"{self.files} workflow(s), {read}, {self.references} reference(s) to repository files checked"


def workflow_files(root: Path) -> list[Path]:
    """The workflow files of the repository at ROOT: regular files reached through no link."""
    where, directory = Root(root), root / WORKFLOWS_DIR
    try:
        names = where.listdir(directory) or []
        return [
            directory / n
            for n in names
            if n.endswith((".yml", ".yaml")) and where.kind(directory / n) == "regular file"
        ]
    except Refused:
        return []


# ---------------------------------------------------------------- MX801: local actions


def local_action_missing(root: Path, view: StepView) -> str | None:
    """The `uses: ./PATH` of a step whose action.yml the repository lacks, or None."""
    uses = str(view.step.get("uses", "")).strip()
    if not uses.startswith("./"):
        return None
    relative = view.repository_path(uses[2:] or ".")
    if relative is None:
        return None  # not in this repository's checkout: another one put it there
    target = inside(root, relative) if relative != "." else root
    if target is not None and any((target / n).is_file() for n in ("action.yml", "action.yaml")):
        return None
    return uses


def reusable_workflow_missing(root: Path, job: object) -> str | None:
    """A job's `uses: ./.github/workflows/X.yml` that the repository lacks, or None."""
    uses = str(job.get("uses", "")).strip() if isinstance(job, dict) else ""
    if not uses.startswith("./"):
        return None
    target = inside(root, uses[2:].split("@", 1)[0])
    return None if target is not None and target.is_file() else uses


# ---------------------------------------------------------------- MX802: scripts


class MadeElsewhere:
    """Whether a missing file may be made by something else than the repository: a rule of its
    .gitignore files names it (a build's output), or a generator sits beside it. An ignore rule
    that also matches files git tracks (conda-forge's `*`, then files added anyway) says nothing."""

    def __init__(self, root: Path):
        self.root = root
        inside = git.run(["rev-parse", "--is-inside-work-tree"], root, check=False).stdout.strip() == "true"
        self.is_work_tree = inside
        self.rules_of_tracked: set[str] | None = None
        self.verdicts: dict[str, bool] = {}

    def _rule(self, paths: list[str]) -> list[str]:
        """The ignore rule (`source:line`) that matches each of PATHS ('' where none does)."""
        listed = git.run(
            ["check-ignore", "--no-index", "--verbose", "--non-matching", "--stdin", "-z"],
            self.root,
            check=False,
            input="".join(p + "\0" for p in paths),
        )
        fields = listed.stdout.split("\0")
        # --verbose -z: source, line, pattern, path for each path, in order.
        return [f"{fields[i]}:{fields[i + 1]}" if fields[i] else "" for i in range(0, len(fields) - 3, 4)]

    def _ignored(self, relative: str) -> bool:
        if not self.is_work_tree:
            return False
        [rule] = self._rule([relative]) or [""]
        if not rule:
            return False
        if self.rules_of_tracked is None:
            tracked = git.run(["ls-files", "-z", "--cached", "--ignored", "--exclude-standard"], self.root, check=False)
            names = [n for n in tracked.stdout.split("\0") if n]
            self.rules_of_tracked = set(self._rule(names)) if names else set()
        return rule not in self.rules_of_tracked

    def __call__(self, relative: str) -> bool:
        if relative not in self.verdicts:
            path = self.root / relative
            generators = [path.with_name(path.name + suffix) for suffix in GENERATOR_SUFFIXES]
            if path.name == "configure":
                generators += [path.with_name("configure.ac"), path.with_name("configure.in")]
            self.verdicts[relative] = any(g.is_file() for g in generators) or self._ignored(relative)
        return self.verdicts[relative]


def _named_elsewhere(word: str, view: StepView, calls: int) -> bool:
    """An earlier step of the job names WORD's path, or the script does besides its CALLS: something
    may make it (downloaded, built, unpacked) or test for it (`[ -x tools/opt.sh ] && tools/opt.sh`)."""
    bare = re.escape(word.removeprefix("./"))
    named = re.compile(rf"(?<![\w./-])(?:\./)?{bare}(?![\w-])")
    return named.search(view.before) is not None or len(named.findall(view.script)) > calls


def missing_scripts(
    root: Path, view: StepView, made_elsewhere: MadeElsewhere, tally: WorkflowTally | None = None
) -> list[str]:
    """The repository files the step's script calls that do not exist on any system it runs on."""
    tally = tally if tally is not None else WorkflowTally()
    if "run" not in view.step:
        return []
    tally.run_steps += 1
    if not view.readable or not view.script.strip():
        return []
    tally.read += 1
    per_system = []
    for system, shell in view.shells.items():
        missing = []
        called = commands(view.script, shell)
        for word in called:
            if not REPOSITORY_PATH.match(word):
                continue
            relative = view.repository_path(posixpath.join(view.directory or ".", word))
            path = inside(root, relative) if relative else None
            if path is None:
                continue
            tally.references += 1
            if found(path, system, shell):
                continue
            if made_elsewhere(relative) or _named_elsewhere(word, view, called.count(word)):
                continue
            missing.append(word)
        per_system.append(missing)
    # A finding only where the call fails on every system the step runs on.
    return [word for word in dict.fromkeys(per_system[0]) if all(word in other for other in per_system[1:])]


# ---------------------------------------------------------------- MX803: series and upstreams


def _patchctl_words(step: dict, patchctl_uses: set[str]) -> list[list[str]]:
    """The patchctl command lines STEP runs: through the action (`command` + `args`) or in its script."""
    lines = []
    with_ = step.get("with") if isinstance(step.get("with"), dict) else {}
    if str(step.get("uses", "")).strip() in patchctl_uses and with_.get("command"):
        # An expression (`${{ matrix.upstream }}`) stands for one word that is not known here.
        text = re.sub(r"\$\{\{.*?\}\}", "$EXPRESSION", f"{with_.get('command', '')} {with_.get('args', '')}")
        lines.append(text.split())
    for line in str(step.get("run", "")).splitlines():
        words = line.split()
        if words[:1] == ["patchctl"]:
            lines.append(words[1:])
    return lines


def _positional(words: list[str]) -> tuple[str, list[str]]:
    """(command, the literal positional words before the first option); expressions and variables are left out."""
    command, rest = (words[0], words[1:]) if words else ("", [])
    if command == "matrix":
        return "matrix", []
    names = []
    for word in rest:
        if word.startswith("-"):
            break
        if "$" not in word and '"' not in word and "'" not in word:
            names.append(word)
    return command, names


def unknown_names(step: dict, patchctl_uses: set[str], config: Config) -> list[tuple[str, str, str, set[str]]]:
    """(command, name, what, known) for every series or upstream a patchctl call names that config lacks."""
    found_names = []
    for words in _patchctl_words(step, patchctl_uses):
        command, names = _positional(words)
        if command in SERIES_COMMANDS:
            known, what = set(config.series), "series"
        elif command in UPSTREAM_COMMANDS:
            known, what, names = set(config.upstreams), "upstream", names[:1]
        else:
            continue
        found_names += [(command, name, what, known) for name in names if name not in known]
    return found_names


# ---------------------------------------------------------------- MX804: the published action


def is_patchctl_action(uses: str, configured: str | None) -> bool:
    parts = split_action(uses)
    if parts is None:
        return False
    configured_parts = split_action(configured) if configured else None
    return parts[1].split("/")[1] == "patchctl" or (configured_parts is not None and parts[1] == configured_parts[1])


def unpublished_action(matrix: BuildMatrix, clone: Path | None) -> list[Finding]:
    """MX804 on matrix.yaml's `workflows: action:`."""
    action = matrix.workflows.action
    problem = unpublished(action, clone) if action else None
    if problem is None:
        return []
    return [
        Finding(
            matrix.matrix_file, matrix.workflows.action_line, "MX804", f"workflows: action: {action}: {problem}", action
        )
    ]


# ---------------------------------------------------------------- all of them


def workflow_references(
    matrix: BuildMatrix, config: Config | None, clone: Path | None = None, tally: WorkflowTally | None = None
) -> list[Finding]:
    """MX801-MX804 over every workflow of the repository, and matrix.yaml's `workflows: action:`.
    CLONE: the git clone patchctl runs from (default: the installed one), for MX804; TALLY counts
    what was read."""
    root = matrix.root
    if root is None:
        return []
    tally = tally if tally is not None else WorkflowTally()
    clone = clone if clone is not None else installed_clone()
    configured = matrix.workflows.action
    findings = unpublished_action(matrix, clone)
    patchctl_uses = {SELF_ACTION} | ({configured} if configured else set())
    made_elsewhere = MadeElsewhere(root)
    judged: dict[str, str | None] = {configured: None} if configured else {}  # reported on matrix.yaml
    for path in workflow_files(root):
        display = f"{WORKFLOWS_DIR}/{path.name}"
        try:
            doc = yamlloc.load(path)
        except ConfigError:
            continue  # not a workflow patchctl can read: actionlint's business
        jobs = doc.data.get("jobs") if isinstance(doc.data, dict) else None
        if not isinstance(jobs, dict):
            continue
        tally.files += 1
        for job_id, job in jobs.items():
            tally.references += str(job.get("uses", "")).startswith("./") if isinstance(job, dict) else 0
            uses = reusable_workflow_missing(root, job)
            if uses:
                line = doc.line_of(("jobs", job_id, "uses"))
                findings.append(
                    Finding(display, line, "MX801", f"`uses: {uses}`: the repository has no such workflow", uses)
                )
        for view in steps(doc.data):
            line = doc.line_of(view.keypath)
            uses = str(view.step.get("uses", "")).strip()
            missing_action = local_action_missing(root, view)
            tally.references += uses.startswith("./") and view.repository_path(uses[2:] or ".") is not None
            if missing_action:
                message = f"`uses: {uses}`: the repository has no {uses.rstrip('/')}/action.yml"
                findings.append(Finding(display, line, "MX801", message, uses))
            for script in missing_scripts(root, view, made_elsewhere, tally):
                message = f"runs {script}, which the repository does not have"
                findings.append(Finding(display, line, "MX802", message, script))
            if config is not None:
                for command, name, what, known in unknown_names(view.step, patchctl_uses, config):
                    message = (
                        f"`patchctl {command} {name}`: matrix.yaml has no {what} {name!r} "
                        f"(it has: {', '.join(sorted(known)) or 'none'})"
                    )
                    findings.append(Finding(display, line, "MX803", message, f"{what}/{name}"))
            if is_patchctl_action(uses, configured) and uses not in judged:
                judged[uses] = unpublished(uses, clone)
                if judged[uses]:
                    findings.append(Finding(display, line, "MX804", f"`uses: {uses}`: {judged[uses]}", uses))
    return findings
