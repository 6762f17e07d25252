"""The commits a series becomes: each patch's message, author and dates, written by `git
commit-tree`, by `git commit` in a work tree, or by one `git fast-import` for many at once
(the same commits, byte for byte)."""

from __future__ import annotations

import datetime
import os
import re
import threading
from pathlib import Path

from .. import git
from ..patterns import lazy
from .patchset import PatchFile

_RFC2822_DATE_RE = lazy(r"^(?:[A-Z][a-z]{2}, )?\d{1,2} [A-Z][a-z]{2} \d{4} \d\d:\d\d(?::\d\d)? [+-]\d{4}$")


def commit_message(patch: PatchFile) -> str:
    """The patch's subject (or the title its file name gives) and its description."""
    description = patch.message.description
    return patch.title + ("\n\n" + description if description else "") + "\n"


def _commit_env(patch: PatchFile) -> dict[str, str]:
    # The patch's own date when it has one (export then writes it back unchanged); the commit
    # date stays fixed so that commit ids depend on the patches alone.
    author_date = patch.message.date if _RFC2822_DATE_RE.match(patch.message.date) else git.FIXED_DATE
    env = {"GIT_AUTHOR_DATE": author_date, "GIT_COMMITTER_DATE": git.FIXED_DATE}
    # A name git cannot take through the environment (NUL, control characters) falls back to ours.
    author = patch.message.author
    if (m := re.match(r"^(?P<name>.*?)\s*<(?P<email>[^>]*)>$", author)) and not re.search(r"[\x00-\x1f]", author):
        env.update(GIT_AUTHOR_NAME=m["name"] or git.IDENTITY_NAME, GIT_AUTHOR_EMAIL=m["email"])
    return env


def commit_tree(repo: Path, tree: str, parent: str, patch: PatchFile) -> str:
    return git.run(
        ["commit-tree", tree, "-p", parent, "-F", "-"], repo, input=commit_message(patch), env=_commit_env(patch)
    ).stdout.strip()


# `git commit` as `commit_tree` commits, in one process with the tree and the ref update: the
# message verbatim (an empty one too), a tree like its parent's too, and nothing of the
# repository's own around it (no hook, no signing, no automatic gc or maintenance).
_COMMIT_AS_COMMIT_TREE = [
    "-c",
    "core.abbrev=no",  # the summary line names the new commit in full: no rev-parse after it
    "-c",
    f"core.hooksPath={os.devnull}",
    "-c",
    "commit.gpgSign=false",
    "-c",
    "gc.auto=0",
    "-c",
    "maintenance.auto=false",
    "commit",
    "--no-status",
    "--no-verify",
    "--allow-empty",
    "--allow-empty-message",
    "--cleanup=verbatim",
    "--no-signoff",
    "--no-gpg-sign",
    "-F",
    "-",
]


def commit_worktree(tree: Path, patch: PatchFile, *, stage_tracked: bool = False) -> str:
    """Commit TREE's index on its HEAD as PATCH: the commit `commit_tree` makes of it. With
    STAGE_TRACKED, every change to a tracked file is staged first (`git commit --all`)."""
    args = [*_COMMIT_AS_COMMIT_TREE, "--all"] if stage_tracked else _COMMIT_AS_COMMIT_TREE
    done = git.run(args, tree, input=commit_message(patch), env=_commit_env(patch))
    summary = _COMMIT_SUMMARY_RE.match(done.stdout)
    return summary["commit"] if summary else git.rev_parse(tree, "HEAD")


# The first line `git commit` prints in a detached tree (the sync trees): `[detached HEAD 0123…] subject`.
_COMMIT_SUMMARY_RE = lazy(r"\[detached HEAD (?P<commit>[0-9a-f]{40}(?:[0-9a-f]{24})?)\] ")


def commit_trees(repo: Path, base: str, trees: list[tuple[str, PatchFile]]) -> str:
    """Commit each (tree, patch) of TREES on the one before, the first on BASE, as `commit_tree`
    does; the last commit (BASE when none). One `git fast-import` makes them all where it
    writes the very commits `commit_tree` would: each message valid UTF-8 (which commit-tree
    would otherwise rewrite), each author name and e-mail free of what git strips from an
    identity; the dates go through git's own parser in both. Else a commit-tree a patch."""
    if not trees:
        return base
    if all(fast_importable(patch) for _, patch in trees):
        head = fast_import_commits(repo, base, [([b'M 040000 %s ""' % tree.encode()], patch) for tree, patch in trees])
        if head is not None:
            return head
    head = base
    for tree, patch in trees:
        head = commit_tree(repo, tree, head, patch)
    return head


# What git strips from the ends of an identity's name and e-mail (ident.c's crud()), and the
# characters it drops inside them.
_IDENT_CRUD = frozenset(".,:;<>\"\\'")


_IDENT_DROPPED = frozenset("<>\n")


def _plain_ident(value: str) -> bool:
    return (
        value != ""
        and not any(ch in _IDENT_DROPPED or ch == "\0" for ch in value)
        and all(ch not in _IDENT_CRUD and ord(ch) > 32 for ch in (value[0], value[-1]))
    )


def fast_importable(patch: PatchFile) -> bool:
    env = _commit_env(patch)
    name, email = env.get("GIT_AUTHOR_NAME", git.IDENTITY_NAME), env.get("GIT_AUTHOR_EMAIL", git.IDENTITY_EMAIL)
    try:
        message = commit_message(patch).encode("utf-8", "surrogateescape").decode("utf-8")
    except UnicodeError:
        return False
    # commit-tree rewrites what is not UTF-8 to it (as Latin-1), and U+FFFE and U+FFFF with it.
    plain_message = not any(ch in message for ch in "\0\ufffe\uffff")
    return _plain_ident(name) and _plain_ident(email) and plain_message and _plain_date(env["GIT_AUTHOR_DATE"])


_WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


_DATE_PARTS_RE = lazy(
    r"^(?:(?P<weekday>\w{3}), )?(?P<day>\d{1,2}) (?P<month>\w{3}) (?P<year>\d{4}) "
    r"(?P<hour>\d\d):(?P<minute>\d\d)(?::(?P<second>\d\d))? [+-](?P<zone_hour>\d\d)(?P<zone_minute>\d\d)$"
)


def _plain_date(date: str) -> bool:
    """A date git's parser surely takes (fast-import would stop at one it refuses, leaving a
    crash report in the repository): ours, or an RFC 2822 date that names a real moment
    between 1970 and 2099 and an offset under 24 hours."""
    if date == git.FIXED_DATE:
        return True
    parts = _DATE_PARTS_RE.match(date)
    if parts is None or parts["month"] not in _MONTHS or parts["weekday"] not in (None, *_WEEKDAYS):
        return False
    try:
        datetime.datetime(
            int(parts["year"]),
            _MONTHS.index(parts["month"]) + 1,
            int(parts["day"]),
            int(parts["hour"]),
            int(parts["minute"]),
            int(parts["second"] or 0),
        )
    except ValueError:
        return False
    return 1970 <= int(parts["year"]) <= 2099 and int(parts["zone_hour"]) < 24 and int(parts["zone_minute"]) < 60


def fast_import_commits(
    repo: Path, base: str, commits: list[tuple[list[bytes], PatchFile]], last_tree: str | None = None
) -> str | None:
    """COMMITS (per patch: the fast-import file commands that make its tree from its parent's)
    made in one `git fast-import` (see `commit_trees`); the last commit. None when git refused
    the stream (a date it cannot parse: commit-tree then says so) or, given LAST_TREE, when the
    last commit's tree is not that one."""
    made = fast_import_each(repo, base, commits, last_tree)
    return made[-1] if made else None


def fast_import_each(
    repo: Path, base: str, commits: list[tuple[list[bytes], PatchFile]], last_tree: str | None = None
) -> list[str] | None:
    """`fast_import_commits`, every commit made (in order), not only the last."""
    # A ref of this thread's own: a range-diff may import on another thread of the process meanwhile.
    ref = f"refs/patchctl-seed/{os.getpid()}-{threading.get_ident()}"
    stream = bytearray()
    for number, (files, patch) in enumerate(commits, 1):
        env = _commit_env(patch)
        author = (
            f"{env.get('GIT_AUTHOR_NAME', git.IDENTITY_NAME)} <{env.get('GIT_AUTHOR_EMAIL', git.IDENTITY_EMAIL)}> "
            f"{env['GIT_AUTHOR_DATE']}"
        )
        message = commit_message(patch).encode("utf-8")
        stream += (
            f"commit {ref}\nmark :{number}\nauthor {author}\n"
            f"committer {git.IDENTITY_NAME} <{git.IDENTITY_EMAIL}> {env['GIT_COMMITTER_DATE']}\n"
            f"data {len(message)}\n"
        ).encode("utf-8", "surrogateescape")
        stream += message + f"\nfrom {base if number == 1 else f':{number - 1}'}\n".encode()
        stream += b"".join(line + b"\n" for line in files) + b"\n"
    last = len(commits)
    marks = "".join(f"get-mark :{number}\n" for number in range(1, last + 1))
    stream += f'ls :{last} ""\n{marks}reset {ref}\nfrom {git.ZERO_OID}\n\ndone\n'.encode()
    # --date-format=rfc2822 hands each date to git's parse_date, as GIT_AUTHOR_DATE is handed to it.
    # The objects are written as they come, with no delta (pack.depth=0) and light compression:
    # deltas against each path's previous blob and zlib's default level took 0.7 s of a real bump's
    # first command on llama.cpp's large sources (0.3 s this way), for a somewhat smaller cache.
    done = git.run(
        ["-c", "pack.depth=0", "-c", "core.compression=1", "fast-import", "--quiet", "--done", "--force",
         "--date-format=rfc2822"],
        repo, input=bytes(stream), check=False,
    )  # fmt: skip
    listed, *made = done.stdout.strip().split("\n")
    tree = listed.split("\t")[0].split(" ")[-1]
    if not done.ok or len(made) != last or not all(re.fullmatch(r"[0-9a-f]{40}(?:[0-9a-f]{24})?", c) for c in made):
        return None
    if last_tree is not None and tree != last_tree:
        return None
    return made
