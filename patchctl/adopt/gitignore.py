"""`.patchctl/` out of git, and the files `init` writes in: the repository's own `.gitignore`,
as git reads it (`git check-ignore`).

`.patchctl/` (patchctl's trees, each a git work tree, and its logs) gets a line in the
`.gitignore` at the top of the work tree, unless git already ignores it there: the line goes
after the file's last line, a missing final newline put first, in the file's own line ending;
an entry that is there already is never written twice. A conda-forge feedstock's `.gitignore`
ignores every file at its root (`*`) and un-ignores every directory (`!/**/`): `.patchctl/`
is then not ignored (`git add -A` would take each tree as an embedded repository) and gets its
line, while `matrix.yaml`, `templates/` and the pre-commit config would be left out of `git add
-A`: `hidden` names them, with the rule that hides them, so that init can say how to add them.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from .. import git
from ..confined import Refused, Root
from ..errors import UsageError
from ..records import dataclass

ENTRY = ".patchctl/"
GITIGNORE = ".gitignore"
MAX_GITIGNORE_BYTES = 1024 * 1024


@dataclass(frozen=True)
class Hidden:
    path: str  # relative to the top of the work tree
    rule: str  # SOURCE:LINE (`PATTERN`)


def patchctl_entry(top: Path) -> bytes | None:
    """The new bytes of TOP/.gitignore with `.patchctl/` in it, or None when git ignores it
    already. Asked before init writes anything: a `.gitignore` or `.patchctl` that is a link or
    no regular file stops init in one line (UsageError) with nothing written."""
    try:
        return _with_entry(top)
    except Refused as exc:
        raise UsageError(f"{exc}: init adds `{ENTRY}` there") from None


def _with_entry(top: Path) -> bytes | None:
    if Root(top).kind(GITIGNORE) == "directory":  # (Root.read_bytes does not refuse one in one line)
        raise Refused(f"refusing to read {GITIGNORE}: it is a directory, not a regular file")
    old = Root(top).read_bytes(GITIGNORE, MAX_GITIGNORE_BYTES) or b""
    Root(top).check_replaceable(GITIGNORE, "write")
    if _in_git(top):
        # git applies a rule for directories (`!/**/`) only to a directory it sees: made first
        # (apply makes it anyway), so that check-ignore answers for the directory it will be.
        Root(top).mkdirs(ENTRY.rstrip("/"))
        if git.run(["check-ignore", "--quiet", "--", ENTRY], top, check=False).returncode == 0:
            return None
    elif any(line.strip() in (b".patchctl", b".patchctl/", b"/.patchctl", b"/.patchctl/") for line in old.splitlines()):
        return None  # no git to ask: the line is there
    newline = b"\r\n" if b"\r\n" in old else b"\n"
    if old and not old.endswith(b"\n"):
        old += newline
    return old + ENTRY.encode() + newline


def settle(top: Path, prefix: str, written: list[str], shown_root: str, entry: bytes | None) -> tuple[str, str]:
    """After init wrote WRITTEN (relative to the directory SHOWN_ROOT, which is PREFIX in the
    work tree TOP): ENTRY (`patchctl_entry`'s) written to TOP/.gitignore (after the journaled
    files, as it may lie above their directory), and a warning naming the written files the
    ignore rules hide, with the command that adds them. ('', '') when there is nothing to say."""
    added = ""
    if entry is not None:
        Root(top).write_bytes(GITIGNORE, entry)
        added = f"added {ENTRY} to {top / GITIGNORE}"
    found = hidden(top, [f"{prefix}/{path}" if prefix else path for path in written])
    if not found:
        return added, ""
    paths = [h.path[len(prefix) + 1 :] if prefix else h.path for h in found]
    rules = ", ".join(sorted({h.rule for h in found}))
    command = shlex.join(["git", "-C", shown_root, "add", "-f", "--", *paths])
    return added, (
        f"{len(found)} file(s) init wrote are ignored by {rules}: `git add -A` leaves them out; add them once "
        f"(git then tracks them): `{command}`"
    )


def hidden(top: Path, paths: list[str]) -> list[Hidden]:
    """Which of PATHS (relative to TOP) the repository's ignore rules hide from `git add -A`."""
    if not paths or not _in_git(top):
        return []
    result = git.run(["check-ignore", "--verbose", "--", *paths], top, check=False)
    found = []
    for line in result.stdout.splitlines():
        rule, _, path = line.partition("\t")
        source, _, pattern = rule.partition(":")
        line_number, _, pattern = pattern.partition(":")
        if path and not pattern.startswith("!"):
            found.append(Hidden(path, f"{source}:{line_number} (`{pattern}`)"))
    return found


def _in_git(top: Path) -> bool:
    return (top / ".git").exists()
