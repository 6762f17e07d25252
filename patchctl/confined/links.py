"""Symlinks in a tree, judged by where they resolve, through every chain of links in it.

Read alone, each link of `s1 -> d0/d1/d2/../../..` with `d0 -> .`, `d0/d1 -> .`, `d0/d1/d2 -> .`
stays inside the tree; together, `s1` leads three levels above it. So every link of a tree is
resolved the way the kernel would resolve it, component by component, following the tree's
other links (at most `MAX_HOPS` of them, the kernel's own bound). A component that is not a
link is taken as a directory, whether or not it exists yet: a link that would leave the tree
once a patch creates that directory is judged now.

A link leaves the tree when its resolution climbs above the root or its target is absolute (or
names a drive or a backslash, which some file systems read as a separator); it is refused too
when it leads into `.git` (in any spelling git refuses) or into a loop.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from .. import git
from ..errors import EnvironmentFailure
from ..records import dataclass
from .names import is_dotgit

MAX_HOPS = 40  # Linux's MAXSYMLINKS
SYMLINK_MODE = "120000"


@dataclass(frozen=True)
class BadLink:
    """A link of the tree and why it is refused ("outside", "into .git", "loop")."""

    path: str
    target: str
    why: str
    through: str | None = None  # the first other link its resolution followed
    through_target: str = ""

    def describe(self) -> str:
        what = {
            "outside": "a symlink pointing outside the tree",
            "dotgit": "a symlink into .git",
            "loop": "a symlink loop",
        }[self.why]
        via = f" (through {self.through!r} -> {self.through_target!r})" if self.through else ""
        return f"{what}: {self.path!r} -> {self.target!r}{via}"


def _resolve(links: Mapping[str, str], path: str) -> BadLink | None:
    """Follow the link PATH through LINKS; the reason it is refused, or None."""
    target = links[path]
    resolved = path.split("/")[:-1]
    pending = list(reversed(target.split("/")))
    hops = 0
    through: tuple[str, str] | None = None
    while pending:
        part = pending.pop()
        if part in ("", "."):
            continue
        if part == "..":
            if not resolved:
                return _bad(path, target, "outside", through)
            resolved.pop()
            continue
        if is_dotgit(part):
            return _bad(path, target, "dotgit", through)
        candidate = "/".join((*resolved, part))
        if candidate in links:
            hops += 1
            if hops > MAX_HOPS:
                return _bad(path, target, "loop", through)
            next_target = links[candidate]
            if candidate != path and through is None:
                through = (candidate, next_target)
            if _absolute(next_target):
                return _bad(path, target, "outside", through)
            pending.extend(reversed(next_target.split("/")))
            continue
        resolved.append(part)
    return None


def _absolute(target: str) -> bool:
    return target.startswith("/") or re.match(r"^[A-Za-z]:", target) is not None or "\\" in target


def _bad(path: str, target: str, why: str, through: tuple[str, str] | None) -> BadLink:
    return BadLink(path, target, why, through[0] if through else None, through[1] if through else "")


def bad_links(links: Mapping[str, str]) -> list[BadLink]:
    """Every link of LINKS (tree path -> target) that leaves the tree, leads into .git or loops,
    sorted by path."""
    found = []
    for path in sorted(links):
        target = links[path]
        if not target or "\0" in target or _absolute(target):
            found.append(BadLink(path, target, "outside"))
        elif (bad := _resolve(links, path)) is not None:
            found.append(bad)
    return found


def new_bad_link(before: Mapping[str, str], after: Mapping[str, str]) -> BadLink | None:
    """The first link AFTER refuses that BEFORE (the same tree one step earlier) did not: what a
    change made bad, not what the tree already held."""
    old = {(bad.path, bad.target) for bad in bad_links(before)} if before else set()
    return next((bad for bad in bad_links(after) if (bad.path, bad.target) not in old), None)


def link_dirs(links: Iterable[str]) -> set[str]:
    """Every directory that holds one of LINKS (tree paths), at any depth."""
    return {path.rsplit("/", depth)[0] for path in links for depth in range(1, path.count("/") + 1)}


# ---------------------------------------------------------------- the links of a git index or tree


def index_links(repo: Path, env: dict[str, str] | None = None, cache: dict[str, str] | None = None) -> dict[str, str]:
    """path -> target of every symlink in REPO's index (ENV may name a private index). CACHE
    (blob id -> target) saves reading a blob twice."""
    raw = git.run(["ls-files", "-s", "-z"], repo, env=env).stdout
    entries = []
    for entry in raw.split("\0"):
        meta, _, path = entry.partition("\t")
        fields = meta.split(" ")
        if len(fields) == 3 and fields[0] == SYMLINK_MODE and fields[2] == "0":
            entries.append((path, fields[1]))
    return _targets(repo, entries, cache)


def tree_links(repo: Path, treeish: str, cache: dict[str, str] | None = None) -> dict[str, str]:
    """path -> target of every symlink in TREEISH (a commit or tree of REPO)."""
    raw = git.run(["ls-tree", "-r", "-z", "--full-tree", treeish], repo).stdout
    entries = []
    for entry in raw.split("\0"):
        meta, _, path = entry.partition("\t")
        fields = meta.split(" ")
        if len(fields) == 3 and fields[0] == SYMLINK_MODE:
            entries.append((path, fields[2]))
    return _targets(repo, entries, cache)


def _targets(repo: Path, entries: list[tuple[str, str]], cache: dict[str, str] | None) -> dict[str, str]:
    cache = {} if cache is None else cache
    wanted = sorted({blob for _, blob in entries if blob not in cache})
    if wanted:
        out = git.run(["cat-file", "--batch"], repo, input="".join(f"{b}\n" for b in wanted).encode(), binary=True)
        data, at = out.stdout, 0
        while at < len(data):
            header_end = data.index(b"\n", at)
            sha, kind, *size_field = data[at:header_end].decode().split()
            if kind != "blob" or len(size_field) != 1:
                raise EnvironmentFailure(f"git cannot read the symlink blob {sha} in {repo} ({kind})")
            size = size_field[0]
            start = header_end + 1
            cache[sha] = data[start : start + int(size)].decode("utf-8", errors="surrogateescape")
            at = start + int(size) + 1
    return {path: cache[blob] for path, blob in entries}
