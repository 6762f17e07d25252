"""What an upstream repository advertises, asked without cloning it: its default branch (where
its HEAD points), its branches and its tags (each as the commit it names). `git ls-remote`, once
per URL and process; a local path is asked the same way.
"""

from __future__ import annotations

from dataclasses import field
from pathlib import Path

from .. import git
from ..errors import GitError
from ..records import dataclass
from .store import Store

_LISTED: dict[str, Refs] = {}


@dataclass(frozen=True)
class Refs:
    head: str | None  # the branch HEAD points at, when the server says
    branches: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)  # tag -> the commit it names (annotated tags peeled)


def refs(url: str, base: Path) -> Refs:
    """The refs the upstream at URL (a local path relative to BASE) advertises; GitError when
    it cannot be reached."""
    source = Store.resolve_source(url, base)
    if source not in _LISTED:
        result = git.run(["ls-remote", "--symref", "--", source], base, check=False)
        if not result.ok:
            raise GitError(f"cannot list {url}: {git.explain(result.stderr)}")
        _LISTED[source] = _parse(result.stdout)
    return _LISTED[source]


def _parse(listing: str) -> Refs:
    head, branches, tags, peeled = None, {}, {}, {}
    for line in listing.splitlines():
        value, _, name = line.partition("\t")
        if value.startswith("ref: ") and name == "HEAD":
            head = value.removeprefix("ref: ").removeprefix("refs/heads/")
        elif name.startswith("refs/heads/"):
            branches[name.removeprefix("refs/heads/")] = value
        elif name.startswith("refs/tags/") and name.endswith("^{}"):
            peeled[name.removeprefix("refs/tags/").removesuffix("^{}")] = value
        elif name.startswith("refs/tags/"):
            tags[name.removeprefix("refs/tags/")] = value
    return Refs(head, branches, {**tags, **peeled})


def default_branch(found: Refs) -> str | None:
    """The upstream's default branch: where its HEAD points, else its only `main` or `master`."""
    if found.head:
        return found.head
    usual = [name for name in ("main", "master") if name in found.branches]
    return usual[0] if len(usual) == 1 else None
