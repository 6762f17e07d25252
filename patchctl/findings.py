"""Findings: what `lint` and `matrix check` report, printable for people and for GitHub."""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Finding:
    file: str
    line: int
    rule: str
    message: str
    subject: str = ""  # what the finding is about (a patch, a row); allowlists match on it

    def format(self) -> str:
        return f"{self.file}:{self.line}: {self.rule}: {self.message}"

    def annotation(self) -> str:
        """A GitHub Actions workflow command; the message is escaped as the runner expects."""
        message = self.message.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
        file = self.file.replace("%", "%25").replace(",", "%2C").replace(":", "%3A")
        return f"::error file={file},line={self.line},title={self.rule}::{message}"


def under_github_actions() -> bool:
    return os.environ.get("GITHUB_ACTIONS") == "true"
