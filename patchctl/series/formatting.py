"""Formatting commits as patches, asked of git once for a whole range: the `git format-patch`
settings export pins (whatever the user's or the repository's git config says), and `Formatted`,
which asks git for a range's subjects, paths, messages and patches in one call each instead of a
process per commit.
"""

from __future__ import annotations

import re
from pathlib import Path

from .. import git

FORMAT_PATCH_CONFIG = [
    "-c",
    "diff.noprefix=false",
    "-c",
    "diff.mnemonicPrefix=false",
    "-c",
    "diff.relative=false",
    "-c",
    "diff.renames=false",
    "-c",
    "diff.algorithm=myers",
    "-c",
    "diff.indentHeuristic=true",
    "-c",
    "diff.context=3",
    "-c",
    "diff.interHunkContext=0",
    "-c",
    "diff.suppressBlankEmpty=false",
    "-c",
    "diff.orderFile=/dev/null",
    "-c",
    "core.quotePath=true",
    "-c",
    "core.abbrev=12",
    "-c",
    "format.signature=",
    "-c",
    "diff.statGraphWidth=0",
    "-c",
    "diff.statNameWidth=0",
    "-c",
    "format.numbered=false",
    "-c",
    "format.coverLetter=false",
    "-c",
    "format.thread=false",
    "-c",
    "format.signOff=false",
    "-c",
    "format.useAutoBase=false",
    "-c",
    "format.forceInBodyFrom=false",
    "-c",
    "i18n.commitEncoding=UTF-8",
    "-c",
    "i18n.logOutputEncoding=UTF-8",
]
FORMAT_PATCH_ARGS = [
    "format-patch",
    "-1",
    "--stdout",
    "--zero-commit",
    "--no-signature",
    "--full-index",
    "--no-renames",
    "--diff-algorithm=myers",
    "--no-stat",
    "--subject-prefix=PATCH",
    "--no-numbered",
    "--no-attach",
    "--no-thread",
    "--binary",
    "--no-color",
    "--no-add-header",
    "--no-to",
    "--no-cc",
]


# A mail's first line as format-patch writes it without --zero-commit: the commit it is of.
_FROM_LINE_RE = re.compile(rb"^From (?P<commit>[0-9a-f]{40}(?:[0-9a-f]{24})?) Mon Sep 17 00:00:00 2001\n", re.MULTILINE)
_HEADER_RE = re.compile(r"(?P<commit>[0-9a-f]{40}(?:[0-9a-f]{24})?)\x01(?P<subject>.*)", re.DOTALL)


class Formatted:
    """What export (`exporter._format_commit`, `_in_style`) asks git of each commit of BASE..HEAD (its subject
    and paths; its patch with some format-patch options), asked once for the whole range: a
    `git log` and a `git format-patch` per set of options, instead of a process per commit.
    Where the output does not split into exactly one answer per commit, the caller asks
    commit by commit, as before (None)."""

    def __init__(self, tree: Path, base: str, config: tuple[str, ...] | list[str] = ()):
        self.tree, self.base = tree, base
        self.config = list(config) if config else FORMAT_PATCH_CONFIG  # `git -c` settings format-patch runs with
        self._listing: dict[str, tuple[str, list[str]]] | None = None
        self._messages: dict[str, str] | None = None
        self._patches: dict[tuple[str, ...], dict[str, bytes] | None] = {}
        self._wanted: dict[tuple[str, ...], list[str]] = {}  # options -> the only commits to format with them

    def want(self, args: list[str], commit: str) -> None:
        """Format with ARGS only the commits named so (before the first `patch` with ARGS), not
        the whole range."""
        self._wanted.setdefault(tuple(args), []).append(commit)

    def listing(self, commit: str) -> tuple[str, list[str]] | None:
        if self._listing is None:
            self._listing = self._read_listing() or {}
        return self._listing.get(commit)

    def _read_listing(self) -> dict[str, tuple[str, list[str]]] | None:
        # -z: per commit a NUL, "<commit>\x01<subject>", a NUL, then its paths (the first after a
        # newline), each NUL-ended.
        out = git.run(
            ["log", "-z", "--format=%x00%H%x01%s", "--name-only", "--no-renames", f"{self.base}..HEAD"],
            self.tree,
            check=False,
        )
        if not out.ok:
            return None
        tokens = out.stdout.split("\0")
        listing: dict[str, tuple[str, list[str]]] = {}
        at = 0
        while at < len(tokens) - 1:
            header = _HEADER_RE.fullmatch(tokens[at + 1]) if tokens[at] == "" else None
            if header is None or header["commit"] in listing:
                return None
            at += 2
            paths: list[str] = []
            while at < len(tokens) and tokens[at] != "":
                paths.append(tokens[at] if paths else tokens[at].removeprefix("\n"))
                at += 1
            listing[header["commit"]] = (header["subject"], paths)
        return listing

    def message(self, commit: str) -> str | None:
        """COMMIT's message as git holds it (all commits of the range asked in one `git log`)."""
        if self._messages is None:
            out = git.run(["log", "-z", "--format=%H%x01%B", f"{self.base}..HEAD"], self.tree, check=False)
            found = (_HEADER_RE.fullmatch(token) for token in out.stdout.split("\0")) if out.ok else iter(())
            self._messages = {m["commit"]: m["subject"] for m in found if m is not None}
        return self._messages.get(commit)

    def patch(self, commit: str, args: list[str]) -> bytes | None:
        """What `git format-patch ARGS COMMIT` (ARGS holding -1 and --stdout) prints for COMMIT."""
        key = tuple(args)
        if key not in self._patches:
            self._patches[key] = self._format_range(args, self._wanted.get(key))
        patches = self._patches[key]
        return patches.get(commit) if patches is not None else None

    def _format_range(self, args: list[str], commits: list[str] | None = None) -> dict[str, bytes] | None:
        # The range's mails (or those of COMMITS alone, --no-walk) name their commits (the zero id
        # is written back after the split), and git puts a blank line between two mails of one
        # --stdout: each mail is then byte for byte the one `-1` prints.
        zero = "--zero-commit" in args
        ranged = [arg for arg in args if arg not in ("-1", "--zero-commit")]
        revisions = ["--no-walk", *commits] if commits else [f"{self.base}..HEAD"]
        out = git.run([*self.config, *ranged, *revisions], self.tree, check=False, binary=True)
        if not out.ok:
            return None
        text: bytes = out.stdout  # type: ignore[assignment]
        starts = list(_FROM_LINE_RE.finditer(text))
        if text and (not starts or starts[0].start() != 0):
            return None
        expected = set(commits) if commits else None
        patches: dict[str, bytes] = {}
        for number, start in enumerate(starts):
            last = number == len(starts) - 1
            mail = text[start.start() : len(text) if last else starts[number + 1].start()]
            if not last:
                if not mail.endswith(b"\n\n"):
                    return None
                mail = mail[:-1]
            commit = start["commit"].decode()
            # (a message may hold a line like a mail's first: a commit of the range, or no split)
            if commit in patches or commit not in (expected if expected is not None else self._range()):
                return None
            if zero:
                mail = b"From " + b"0" * len(commit) + mail[5 + len(commit) :]
            patches[commit] = mail
        return patches

    def _range(self) -> set[str]:
        if self._listing is None:
            self._listing = self._read_listing() or {}
        return set(self._listing)


def format_patch(
    tree: Path, commit: str, dropped: list[str], args: list[str], config: tuple[str, ...] | list[str] = ()
) -> bytes:
    settings = list(config) if config else FORMAT_PATCH_CONFIG
    return git.run([*settings, *args, commit, *pathspec_without(dropped)], tree, binary=True).stdout


def pathspec_without(dropped: list[str]) -> list[str]:
    """The pathspec that leaves DROPPED (excluded paths) out, or none."""
    return ["--", "."] + [f":(exclude,literal){p}" for p in dropped] if dropped else []
