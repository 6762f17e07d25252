"""A user at a shell in a downstream repository, for the journey tests.

`User` runs command lines the way a person types them (`bash -c`, from the directory they
stand in) with the real `patchctl` executable of this checkout first on PATH, a home of
their own and a git identity, and returns what was printed (`Seen`). `advice_in` collects
every command patchctl printed as advice: patchctl writes each one between backticks, ready
to paste (`patchctl pin-sync up --continue`, `git -C TREE add -- FILE`); `User.follow` pastes
one of them verbatim.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

from patchctl import git
from patchctl.adopt.layout import Layout
from patchctl.adopt.plan import pre_commit_snippet
from tests.patchctl.conftest import Project, make_patch
from tests.patchctl.tools import installed_tool

REPO = Path(__file__).resolve().parents[2]
# A command in backticks that starts with one of these is advice to paste.
ADVICE_COMMANDS = ("patchctl", "git", "cd", "rm")
# What the user's editor writes when git opens it (`git commit -a`, `git commit --amend`): the
# subject kept (or a new one), then a description, as a careful person writes a commit message.
EDITOR = """#!/bin/sh
subject=$(grep -v '^#' "$1" | sed -n '/./{p;q;}')
[ -n "$subject" ] || subject="Edit made in the tree"
printf '%s\\n\\n%s\\n' "$subject" "Written in the editor: why the change is needed." > "$1"
"""


@dataclass(frozen=True)
class Seen:
    """What a command line printed, and how it exited."""

    command: str
    exit_code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    @property
    def advice(self) -> list[str]:
        return advice_in(self.output)

    def __str__(self) -> str:
        return f"$ {self.command}\n[exit {self.exit_code}]\n{self.stdout}{self.stderr}"


def advice_in(text: str) -> list[str]:
    """Every command TEXT offers to paste, in order, each once."""
    found: list[str] = []
    for span in re.findall(r"`([^`\n]+)`", text):
        words = span.split()
        if words and words[0] in ADVICE_COMMANDS and span not in found:
            found.append(span)
    return found


class User:
    """Someone working in the downstream repository ROOT, at a bash prompt in ROOT."""

    def __init__(self, root: Path, home: Path):
        self.root = root
        self.home = home
        bin_dir = home / "bin"
        bin_dir.mkdir(parents=True, exist_ok=True)
        shim = bin_dir / "patchctl"  # this checkout's patchctl, as `pip install -e .` puts it on PATH
        shim.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m patchctl "$@"\n')
        shim.chmod(0o755)
        editor = bin_dir / "editor"
        editor.write_text(EDITOR)
        editor.chmod(0o755)
        # pre-commit comes with the test extra, beside the interpreter running the tests.
        tools = Path(installed_tool("pre-commit")).parent
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "PRE_COMMIT"))}
        env.update(
            PATH=os.pathsep.join([str(bin_dir), str(tools), env.get("PATH", "")]),
            PYTHONPATH=str(REPO),
            HOME=str(home),
            XDG_CONFIG_HOME=str(home / ".config"),
            GIT_CONFIG_NOSYSTEM="1",
            GIT_AUTHOR_NAME="Dana Developer",
            GIT_AUTHOR_EMAIL="dana@example.invalid",
            GIT_COMMITTER_NAME="Dana Developer",
            GIT_COMMITTER_EMAIL="dana@example.invalid",
            GIT_EDITOR=str(editor),
            GIT_SEQUENCE_EDITOR=":",
            PRE_COMMIT_HOME=str(home / ".cache" / "pre-commit"),
            PRE_COMMIT_COLOR="never",
            NO_COLOR="1",
        )
        self.env = env

    def run(self, command: str, *, cwd: Path | None = None) -> Seen:
        proc = subprocess.run(
            ["bash", "-c", command],
            cwd=cwd or self.root,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        return Seen(command, proc.returncode, proc.stdout, proc.stderr)

    def ok(self, command: str, *, cwd: Path | None = None) -> Seen:
        seen = self.run(command, cwd=cwd)
        assert seen.exit_code == 0, str(seen)
        return seen

    def fails(self, command: str, exit_code: int, *, cwd: Path | None = None) -> Seen:
        seen = self.run(command, cwd=cwd)
        assert seen.exit_code == exit_code, str(seen)
        assert "Traceback" not in seen.output, str(seen)
        return seen

    def advice(self, seen: Seen, containing: str) -> str:
        """The one command SEEN offered that is CONTAINING, or else that contains it."""
        if containing in seen.advice:
            return containing
        matching = [command for command in seen.advice if containing in command]
        assert len(matching) == 1, f"advice with {containing!r}: {matching}\n{seen}"
        return matching[0]

    def follow(self, seen: Seen, containing: str, *, exit_code: int = 0) -> Seen:
        """Paste the command SEEN offered that contains CONTAINING, as printed."""
        command = self.advice(seen, containing)
        result = self.run(command)
        assert result.exit_code == exit_code, f"advice did not work as printed:\n{result}\nprinted in:\n{seen}"
        return result

    def edit(self, path: Path, old: str, new: str) -> None:
        text = path.read_text()
        assert old in text, f"{old!r} not in {path}"
        path.write_text(text.replace(old, new, 1))


def downstream(
    path: Path, upstream, pin: str, *, patches: dict[str, str] | None = None, extra_yaml: str = ""
) -> Project:
    """A downstream repository as a user keeps it: matrix.yaml, its series, a .gitignore that
    ignores `.patchctl/`, and the pre-commit config `patchctl init` writes; all committed."""
    project = Project(path, upstream, pin, extra_yaml=extra_yaml)
    for name, text in (patches or {}).items():
        project.add_patch(name, text)
    (path / ".gitignore").write_text(".patchctl/\n")
    layout = Layout(
        "up", str(upstream.path), pin, project.series_name, f"patches/{project.series_name}", "format-patch"
    )
    (path / ".pre-commit-config.yaml").write_text(pre_commit_snippet(layout))
    git.commit_all(path, "Start the downstream project")
    return project


def tune_main_patch(upstream, base: str) -> str:
    """A described patch on src/main.c line 5 (far from line 20, which the pin-sync drifts use)."""
    main_c = git.run(["show", f"{base}:src/main.c"], upstream.path).stdout
    return make_patch(
        upstream,
        base,
        {"src/main.c": main_c.replace("main 5\n", "main five\n")},
        "Tune main",
        "The fifth line is spelled out so that readers find it.",
    )


def pre_commit_hooks(project: Project) -> list[str]:
    """The ids of the hooks in the project's .pre-commit-config.yaml."""
    config = yaml.safe_load((project.path / ".pre-commit-config.yaml").read_text())
    return [hook["id"] for repo in config["repos"] for hook in repo["hooks"]]


def hook_results(seen: Seen) -> dict[str, str]:
    """Each hook pre-commit ran, and what it reported: Passed, Failed, Skipped (on stdout when
    `pre-commit run` runs, on stderr when git's hook does)."""
    found = re.findall(r"^(\S.*?)\.{3,}.*?(Passed|Failed|Skipped)$", seen.output, re.MULTILINE)
    return dict(found)


def passed_hooks(seen: Seen) -> list[str]:
    """The hook names pre-commit reported as Passed."""
    return [name for name, result in hook_results(seen).items() if result == "Passed"]
