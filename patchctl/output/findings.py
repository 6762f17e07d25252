"""Findings: what `lint` and `matrix check` report, printable for people and for GitHub."""

from __future__ import annotations

import os
from pathlib import Path

from ..records import dataclass


@dataclass(frozen=True, order=True)
class Finding:
    file: str
    line: int
    rule: str
    message: str
    subject: str = ""  # what the finding is about (a patch, a row); allowlists match on it

    def format(self) -> str:
        return f"{self.file}:{self.line}: {self.rule}: {self.message}"

    def annotation(self, bases: tuple[Path, ...] = ()) -> str:
        """A GitHub Actions workflow command; the message is escaped as the runner expects.
        GitHub places it by a path from the repository root: the finding's file is taken
        relative to the first of BASES that holds it (the directory of matrix.yaml, `-C`)."""
        from .escape import workflow_command

        return workflow_command(
            "error", self.message, file=repository_path(self.file, bases), line=self.line, title=self.rule
        )


def repository_path(file: str, bases: tuple[Path, ...]) -> str:
    """FILE (relative to one of BASES) relative to the root of the git repository holding
    it, which is where GitHub's annotations start from; FILE unchanged when there is none."""
    candidates = [Path(file)] if Path(file).is_absolute() else [base / file for base in bases]
    for path in candidates:
        if not path.exists():
            continue
        path = path.resolve()
        for folder in path.parents:
            if (folder / ".git").exists():
                return path.relative_to(folder).as_posix()
        break
    return file


def under_github_actions() -> bool:
    return os.environ.get("GITHUB_ACTIONS") == "true"
