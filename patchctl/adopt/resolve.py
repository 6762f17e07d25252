"""What `init` asks the upstream itself: the commit a tag or an abbreviated commit names, and
the default branch. Tags and branches come from `git ls-remote` (no clone); an abbreviated
commit id needs the objects, so the upstream is mirrored into patchctl's cache (where `apply`
and `lint` find it next). An upstream that cannot answer stops `init` in one line: it never
writes a pin that does not load.
"""

from __future__ import annotations

from pathlib import Path

from .. import git
from ..errors import EnvironmentFailure, GitError, UsageError
from ..upstream import remote
from ..upstream.store import RevisionNotFound, Store

FULL_LENGTH = 40


def commit_of(url: str, revision: str, root: Path, where: str) -> str:
    """The full commit id REVISION (a tag, a branch, or a commit id, whole or abbreviated) names
    in the upstream at URL. WHERE (FILE:LINE, or an option) says where REVISION was read."""
    if git.is_full_sha(revision):
        return revision
    try:
        found = remote.refs(url, root)
    except GitError as exc:
        raise EnvironmentFailure(
            f"{where}: {revision!r} is not a full commit id, and the upstream {url} cannot be asked which commit it "
            f"names ({exc}): give --pin SHA"
        ) from None
    tag, branch = revision.removeprefix("refs/tags/"), revision.removeprefix("refs/heads/")
    named = found.tags.get(tag) or found.branches.get(branch)
    if named:
        return named
    if all(c in "0123456789abcdef" for c in revision) and 7 <= len(revision) < FULL_LENGTH:
        store = Store()
        try:
            mirror = store.mirror(url, base=root)
            return store.resolve(mirror, revision)
        except RevisionNotFound:
            pass
        except GitError as exc:
            raise EnvironmentFailure(
                f"{where}: cannot fetch {url} to expand {revision!r} ({exc}): give --pin SHA"
            ) from None
    raise UsageError(f"{where}: {revision!r} is neither a tag, a branch nor a commit of {url}: give --pin SHA")


def default_branch(url: str, root: Path) -> tuple[str | None, str]:
    """(the upstream's default branch, or None; a note when it could not be told)."""
    try:
        found = remote.refs(url, root)
    except GitError as exc:
        return None, f"branch: cannot ask {url} for its default branch ({exc})"
    branch = remote.default_branch(found)
    return branch, "" if branch else f"branch: {url} does not say which branch its HEAD is"
