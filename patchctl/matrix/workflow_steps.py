"""What a workflow's `run:` step calls, read as the runner would run it, or not at all.

`matrix check` judges the files a step calls (MX802) only where it can read the step: it
knows the runner's operating system, the shell the script runs under and the directory it
runs in, and where an earlier `actions/checkout` put this repository in the workspace (its
root, or its `path:`). Everything else (an expression it cannot evaluate, `cmd` or `python`
scripts, a custom shell, no checkout, a checkout of another repository or another ref over
it) is left alone: a finding must mean the call fails.

    runs-on        a label, a list of labels, `{group, labels}`, or `${{ matrix.KEY }}`
                   (the values `strategy.matrix` gives KEY, `include:` entries too)
    shell          the step's `shell:`, else `defaults.run.shell` of the job, then of the
                   workflow, else the runner's default: pwsh on Windows, bash elsewhere;
                   a custom `PROGRAM ... {0}` is read by its program
    directory      `working-directory:`, else `defaults.run.working-directory` (job, workflow)

A script is read by its shell's rules: for bash and sh, the first word of each simple command
(after `;`, `&&`, `||`, `|`, `&`, `(`, a newline, `then`, `do`, ...), with here-documents,
continuation lines, comments, assignments and `sudo`/`env`/`exec` prefixes taken off; for
PowerShell, the first word of each statement and what `&` or `.` calls, where `.\\a\\b`
is `./a/b` and `./x` also finds `x.ps1`. Reading stops at the first `cd` (or `pushd`,
`Set-Location`, ...): what follows runs somewhere else. On Windows a command also finds
`x.exe`, `x.cmd`, `x.bat`, `x.com` and `x.ps1`, and names match whatever their case (macOS too).
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

from ..confined import Refused, Root
from ..records import dataclass

LINUX, MACOS, WINDOWS = "linux", "macos", "windows"
ANY_SYSTEM = frozenset({LINUX, MACOS, WINDOWS})
# The shells whose scripts are read; any other (cmd, python, a custom program) is not judged.
SH_SHELLS = ("bash", "sh")
POWERSHELLS = ("pwsh", "powershell")
# What Windows tries after a command name without its extension (PATHEXT, and PowerShell's .ps1).
WINDOWS_EXTENSIONS = (".exe", ".com", ".bat", ".cmd", ".ps1")
# A word that names a file in the repository: relative, with a directory part (`.ci/run`,
# `scripts/x.sh`, `./x`); no variable, glob, home or absolute path.
REPOSITORY_PATH = re.compile(r"^(?:\./)?[A-Za-z0-9._+-]+(?:/[A-Za-z0-9._+-]+)+$|^\./[A-Za-z0-9._+-]+$")
EXPRESSION = re.compile(r"\$\{\{.*?\}\}", re.DOTALL)
MATRIX_EXPRESSION = re.compile(r"^\$\{\{\s*matrix\.([A-Za-z0-9_-]+)\s*\}\}$")
WORKSPACE_PREFIX = re.compile(r"^\$\{\{\s*github\.workspace\s*\}\}(?:/|$)")

# bash: words that start a compound command or precede a command; what follows them.
SH_BEFORE_COMMAND = {"if", "then", "else", "elif", "do", "while", "until", "!", "{", "time", "}"}
SH_NOT_COMMAND = {"for", "case", "select", "function", "[[", "((", "esac", "fi", "done", "in", "]]", "))"}
SH_PREFIXES = {"sudo", "exec", "nohup", "command", "env", "builtin", "nice", "stdbuf"}
CHANGES_DIRECTORY = {"cd", "pushd", "popd", "chdir", "set-location", "sl", "push-location", "pop-location"}
HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_-]*)\1")
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\[[^]]*\])?\+?=")
PS_KEYWORDS = {
    "if", "elseif", "else", "foreach", "for", "while", "do", "until", "switch", "try", "catch", "finally",
    "function", "filter", "param", "return", "throw", "exit", "break", "continue", "trap", "begin",
    "process", "end", "class", "enum", "using", "data",
}  # fmt: skip


@dataclass(frozen=True)
class StepView:
    """One step of a job, and how it runs: on which systems, under which shell there, in which
    directory, and where this repository is checked out in the workspace when it does."""

    keypath: tuple
    step: dict
    shells: dict[str, str]  # system -> shell program (bash, sh, pwsh, powershell, cmd, python, ...)
    directory: str | None  # workspace-relative; None: not known here
    checkout: str | None  # where this repository is in the workspace ('.': its root); None: not there
    before: str  # the text of the job's earlier steps: what they may have made

    @property
    def script(self) -> str:
        return str(self.step.get("run", ""))

    @property
    def readable(self) -> bool:
        """Its script can be judged: known directory, this repository checked out, shells read here."""
        return (
            self.checkout is not None
            and self.directory is not None
            and all(shell in SH_SHELLS + POWERSHELLS for shell in self.shells.values())
        )

    def repository_path(self, workspace_path: str) -> str | None:
        """The repository path of a workspace-relative path; None: outside this repository's checkout."""
        path = posixpath.normpath(workspace_path)
        if self.checkout is None or path.startswith("../") or path == "..":
            return None
        if self.checkout == ".":
            return path
        prefix = self.checkout.rstrip("/") + "/"
        return path[len(prefix) :] if path.startswith(prefix) else None


def _text(value: Any) -> str:
    if isinstance(value, dict):
        return " ".join(f"{k} {_text(v)}" for k, v in value.items())
    if isinstance(value, list):
        return " ".join(_text(v) for v in value)
    return "" if value is None else str(value)


# ---------------------------------------------------------------- the runner


def label_system(label: str) -> str | None:
    text = label.lower()
    if "windows" in text:
        return WINDOWS
    if re.search(r"macos|osx|darwin|\bmac\b", text):
        return MACOS
    if re.search(r"ubuntu|linux|debian", text):
        return LINUX
    return None


def _labels_system(labels: Any) -> frozenset[str]:
    """The system a set of labels asks for; every system when none says (self-hosted, a group)."""
    if isinstance(labels, dict):
        labels = labels.get("labels", [])
    labels = labels if isinstance(labels, list) else [labels]
    found = {label_system(str(label)) for label in labels if isinstance(label, str)} - {None}
    return frozenset(found) if len(found) == 1 else ANY_SYSTEM  # type: ignore[arg-type]


def matrix_values(job: dict, key: str) -> list[Any] | None:
    """Every value `strategy.matrix` gives KEY (its list and `include:` entries); None: not known."""
    strategy = job.get("strategy")
    matrix = strategy.get("matrix") if isinstance(strategy, dict) else None
    if not isinstance(matrix, dict):
        return None
    values = []
    if key in matrix:
        listed = matrix[key]
        if not isinstance(listed, list):
            return None
        values += listed
    include = matrix.get("include", [])
    for entry in include if isinstance(include, list) else []:
        if isinstance(entry, dict) and key in entry:
            values.append(entry[key])
    return values or None


def runner_systems(job: dict) -> frozenset[str]:
    runs_on = job.get("runs-on")
    if job.get("container"):
        return frozenset({LINUX})  # the steps run in a Linux container
    if isinstance(runs_on, str) and "${{" in runs_on:
        match = MATRIX_EXPRESSION.match(runs_on.strip())
        values = matrix_values(job, match.group(1)) if match else None
        if values is None or any("${{" in _text(v) for v in values):
            return ANY_SYSTEM
        return frozenset().union(*(_labels_system(v) for v in values))
    return _labels_system(runs_on)


# ---------------------------------------------------------------- a step's shell and directory


def shell_program(shell: Any) -> str:
    """`bash`, `pwsh`, `cmd`, ... for a `shell:` value; a custom `PROGRAM ARGS {0}` by its program."""
    text = str(shell).strip()
    if "${{" in text or not text:
        return "unknown"
    program = text.split()[0].replace("\\", "/").rsplit("/", 1)[-1].lower().removesuffix(".exe")
    return program


def _default(where: dict, key: str) -> Any:
    defaults = where.get("defaults")
    run = defaults.get("run") if isinstance(defaults, dict) else None
    return run.get(key) if isinstance(run, dict) else None


def _directory(value: Any) -> str | None:
    """A repository-relative directory for a `working-directory:` value; None: not known here."""
    if value is None:
        return "."
    text = WORKSPACE_PREFIX.sub("", str(value).strip()) or "."
    if "${{" in text or text.startswith(("/", "~")) or re.match(r"^[A-Za-z]:", text):
        return None
    return text.replace("\\", "/")


def _checkout(step: dict) -> tuple[str, bool] | None:
    """(the workspace-relative path a checkout step fills, whether with this repository's tree);
    None: not a checkout. Another repository, or a literal ref (gh-pages, a release), is another tree."""
    if not str(step.get("uses", "")).startswith("actions/checkout@"):
        return None
    with_ = step.get("with") if isinstance(step.get("with"), dict) else {}
    path = _directory(with_.get("path"))
    repository = str(with_.get("repository", "") or "").strip()
    ref = str(with_.get("ref", "") or "").strip()
    same_tree = repository in ("", "${{ github.repository }}") and (not ref or "${{" in ref)
    return (posixpath.normpath(path) if path is not None else "?"), same_tree


def _after_checkout(current: str | None, filled: str, same_tree: bool) -> str | None:
    """Where this repository is after a checkout fills FILLED ('?': somewhere not known)."""
    if same_tree and filled != "?":
        return filled
    if filled == "?" or current is None:
        return None if filled == "?" and current is not None else current
    inside_filled = filled == "." or current == filled or current.startswith(filled.rstrip("/") + "/")
    return None if inside_filled else current  # the other tree replaced it, or lies beside it


def steps(workflow: Any) -> Iterator[StepView]:
    """Every step of every job of a workflow document, with how it runs."""
    jobs = workflow.get("jobs") if isinstance(workflow, dict) else None
    for job_id, job in jobs.items() if isinstance(jobs, dict) else ():
        if not isinstance(job, dict) or not isinstance(job.get("steps"), list):
            continue
        systems = runner_systems(job)
        checkout: str | None = None
        before: list[str] = []
        for index, step in enumerate(job["steps"]):
            if not isinstance(step, dict):
                continue
            filled = _checkout(step)
            if filled is not None:
                checkout = _after_checkout(checkout, *filled)
            shell = step.get("shell") or _default(job, "shell") or _default(workflow, "shell")
            shells = {
                system: shell_program(shell) if shell else ("pwsh" if system == WINDOWS else "bash")
                for system in systems
            }
            directory = step.get("working-directory")
            if directory is None:
                directory = _default(job, "working-directory") or _default(workflow, "working-directory")
            yield StepView(
                ("jobs", job_id, "steps", index), step, shells, _directory(directory), checkout, " ".join(before)
            )
            before.append(_text(step.get("run")) + " " + _text(step.get("with")))


# ---------------------------------------------------------------- the commands a script runs


def _without_heredocs(script: str) -> str:
    lines, out, ending = script.split("\n"), [], []
    for line in lines:
        if ending:
            if line.strip() == ending[0]:
                ending.pop(0)
            continue
        out.append(line)
        if "<<" in line and "<<<" not in line:
            ending += [m.group(2) for m in HEREDOC.finditer(line)]
    return "\n".join(out)


def sh_commands(script: str) -> list[str]:
    """The literal words a bash or sh script runs as commands (see the module's docstring)."""
    text = EXPRESSION.sub("$EXPRESSION", script)
    text = _without_heredocs(text)
    text = "\n".join(line for line in text.split("\n") if not line.lstrip().startswith("#"))
    text = text.replace("\\\n", " ")
    lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|()<>\n")
    lexer.whitespace = " \t\r"
    lexer.commenters = ""  # full-line comments are gone; a `#` inside a word is not one
    try:
        tokens = list(lexer)
    except ValueError:  # an unbalanced quote: not a script read here
        return []
    commands, expecting, skip_next, depth = [], True, False, 0
    for i, token in enumerate(tokens):
        if token and all(c in ";&|()<>\n" for c in token):
            if set(token) <= {"<", ">", "&"} and token not in ("&", "&&"):
                skip_next = True  # a redirection's target follows
                continue
            if token.startswith("(") and i and tokens[i - 1].endswith("="):
                depth += 1  # an array assignment `a=(x y)`: its words are values
                continue
            if depth and ")" in token:
                depth -= 1
            expecting = depth == 0
            continue
        if skip_next or depth:
            skip_next = False
            continue
        if not expecting:
            continue
        if token in SH_BEFORE_COMMAND or ASSIGNMENT.match(token) or token.startswith("-"):
            continue
        if token in SH_PREFIXES:
            continue  # `sudo ./x`, `env A=1 ./x`: the command follows
        expecting = False
        if token not in SH_NOT_COMMAND:
            commands.append(token)
    return commands


def ps_commands(script: str) -> list[str]:
    """The literal words a PowerShell script runs as commands: each statement's first word, and
    what `&` or `.` calls."""
    text = EXPRESSION.sub("$EXPRESSION", script)
    text = re.sub(r"@(['\"])\n.*?\n\1@", "", text, flags=re.DOTALL)  # here-strings
    text = re.sub(r"`\r?\n", " ", text)  # a backtick continues the line
    # Inside a quoted string, `;`, `|`, `{`, `}` and `&` separate nothing.
    text = re.sub(r"'[^'\n]*'|\"[^\"\n]*\"", lambda m: re.sub(r"[;|{}&]", "_", m.group(0)), text)
    commands = []
    for statement in re.split(r"\n|;|&&|\|\||\||\{|\}", text):
        words = re.findall(r"'[^']*'|\"[^\"]*\"|[^\s]+", statement.strip())
        while words and words[0] in ("&", "."):
            words = words[1:]
        if not words or words[0].lower() in PS_KEYWORDS or words[0].startswith(("#", "$", "(", "[", "-", "@")):
            continue
        commands.append(words[0].strip("'\"").replace("\\", "/"))
    return commands


def commands(script: str, shell: str) -> list[str]:
    """The commands SHELL runs from SCRIPT, up to the first change of directory (`cd`, `pushd`,
    `Set-Location`...): after it, a relative path is relative to somewhere not followed here."""
    found = sh_commands(script) if shell in SH_SHELLS else ps_commands(script)
    moves = [i for i, word in enumerate(found) if word.lower() in CHANGES_DIRECTORY]
    return found[: moves[0]] if moves else found


# ---------------------------------------------------------------- does it exist


def inside(root: Path, name: str) -> Path | None:
    """ROOT/NAME when NAME is a relative path that stays inside ROOT, else None."""
    relative = PurePosixPath(name.replace("\\", "/"))
    if not name or relative.is_absolute() or ".." in relative.parts:
        return None
    path = root / relative
    return path if path.resolve().is_relative_to(root.resolve()) else None  # no symlink out of it


def found(path: Path, system: str, shell: str) -> bool:
    """PATH exists as the system's shell would look it up (extensions, case)."""
    extensions = [""]
    if shell in POWERSHELLS:
        extensions.append(".ps1")
    if system == WINDOWS:
        extensions += WINDOWS_EXTENSIONS
    if system == LINUX:
        return any(Path(f"{path}{ext}").exists() for ext in extensions)
    parent = _casefolded(path.parent)
    if parent is None:
        return False
    names = {name.lower() for name in _names(parent)}
    return any((path.name + ext).lower() in names for ext in extensions)


def _casefolded(path: Path) -> Path | None:
    """The directory PATH names on a file system that ignores case (macOS's, Windows'), or None."""
    if path.is_dir():
        return path
    parent = _casefolded(path.parent) if path.parent != path else None
    if parent is None:
        return None
    match = [parent / n for n in _names(parent) if n.lower() == path.name.lower() and (parent / n).is_dir()]
    return match[0] if match else None


def _names(directory: Path) -> list[str]:
    """The names in DIRECTORY (listed through `confined.Root`), [] when it cannot be listed."""
    try:
        return Root(directory, "the directory").listdir("") or []
    except (Refused, OSError):
        return []
