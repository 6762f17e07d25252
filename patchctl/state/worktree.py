"""Everything patchctl keeps under `.patchctl/` in a repository's work tree, and the apply marker.

    .patchctl/trees/SERIES                  the tree `apply` makes (and `export`, `gate` read)
    .patchctl/sync/UPSTREAM/SERIES          a pin-sync's replay worktree
    .patchctl/sync/UPSTREAM/gate-SERIES     a pin-sync's clean tree for the gates
    .patchctl/gates/SERIES                  logs of `patchctl gate`
    .patchctl/logs/pin-sync/UPSTREAM/SERIES logs of a pin-sync's builds and gates
    .patchctl/logs/canary/UPSTREAM          logs of a canary's compiles (without --work-dir)

(With matrix.yaml in a subdirectory DIR of its repository, `.patchctl/` above is
`.patchctl/projects/DIR` at the top of the work tree: see `state_dir`.) These are the trees a
user edits and the logs a user reads. The state that recovery acts on
(the journal, the lock, a stopped pin-sync's `state.json`) lives in the repository's git
directory, where no checkout can plant it (`patchctl.state.statehome`).

The marker is a file in an applied tree's git directory: the upstream rev, the digest of
the ordered patches and the commit `apply` made. `apply` trusts a tree only when its
marker matches; `gate` refuses a tree without one.
"""

from __future__ import annotations

import os
import re
import shlex
import stat
from dataclasses import asdict
from pathlib import Path

from .. import git
from ..confined import Refused, Root, TooLarge
from ..confined.regular import file_kind, kind_of
from ..errors import EnvironmentFailure, GitError
from ..records import dataclass
from . import statehome

STATE_DIR = ".patchctl"
PROJECTS_DIR = "projects"  # `.patchctl/projects/DIR`: the trees of a matrix.yaml in the subdirectory DIR
MAX_STATE_BYTES = 16 * 1024 * 1024  # journals, markers and sync states are a few KiB
MARKER_NAME = "patchctl-applied.json"
MARKER_VERSION = 1
SYNC_STATE_NAME = "state.json"


def state_dir(root: Path) -> Path:
    """`.patchctl/` in the work tree of the repository at ROOT (matrix.yaml's directory): its
    trees and logs. A matrix.yaml in a subdirectory DIR of its repository (a feedstock's
    `recipe/`) keeps them in `.patchctl/projects/DIR` at the top of the work tree, out of DIR,
    which a downstream's build may copy whole (conda-build copies the recipe's directory)."""
    top, prefix = statehome.work_tree(root)
    return root / STATE_DIR if not prefix else top / STATE_DIR / PROJECTS_DIR / prefix


def state_owner(root: Path) -> Path:
    """The directory `.patchctl/` is in: ROOT, or the top of its work tree (`state_dir`)."""
    top, prefix = statehome.work_tree(root)
    return root if not prefix else top


def applied_tree(root: Path, series: str) -> Path:
    return state_dir(root) / "trees" / series


def sync_root(root: Path, upstream: str) -> Path:
    return state_dir(root) / "sync" / upstream


def sync_tree(root: Path, upstream: str, series: str) -> Path:
    return sync_root(root, upstream) / series


def sync_gate_tree(root: Path, upstream: str, series: str) -> Path:
    return sync_root(root, upstream) / f"gate-{series}"


def sync_state_file(root: Path, upstream: str) -> Path:
    """A stopped pin-sync's state, in the git directory (its trees stay in `.patchctl/sync/`)."""
    return sync_states(root) / upstream / SYNC_STATE_NAME


def sync_states(root: Path) -> Path:
    return statehome.home(root) / "sync"


def syncs_in_progress(root: Path) -> list[str]:
    """The upstreams with a stopped pin-sync (a state file), sorted."""
    base = sync_states(root)
    statehome.check_directory(root, base, "directory of pin-sync states")
    state = statehome.state_root(root)
    return [name for name in state.listdir("sync") or [] if state.lstat(f"sync/{name}/{SYNC_STATE_NAME}") is not None]


def gate_logs(root: Path, series: str) -> Path:
    return state_dir(root) / "gates" / series


def sync_logs(root: Path, upstream: str, series: str) -> Path:
    return state_dir(root) / "logs" / "pin-sync" / upstream / series


def canary_logs(root: Path, upstream: str) -> Path:
    return state_dir(root) / "logs" / "canary" / upstream


def reached_through(path: Path) -> Root:
    """The `Root` patchctl reaches PATH through: for a path under a repository's `.patchctl/` (a
    tree, a log) that repository, so that no link on the way from it is followed; for anything
    else (a tree or log directory the user named) the nearest directory above PATH that exists,
    the user's choice."""
    path = Path(path)
    for parent in path.parents:
        if parent.name == STATE_DIR:
            return Root(parent.parent)
    existing = next((p for p in path.parents if os.path.isdir(p)), Path(path.anchor))  # what is made goes below
    return Root(existing, "the directory")


def tree_root(tree: Path, label: str) -> Root:
    """TREE as a `Root`: for patchctl's own tree under a repository's `.patchctl/`, reached from
    the repository at every call (a directory on the way swapped for a link redirects nothing);
    for a tree the user named, from the tree itself."""
    tree = Path(tree)
    for parent in tree.parents:
        if parent.name == STATE_DIR:
            return Root(parent.parent, label, prefix=tree.relative_to(parent.parent).parts)
    return Root(tree, label)


def log_name(name: str) -> str:
    """NAME made safe for a log file name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name)


def read_state(root: Path, path: Path, what: str, where: Root | None = None) -> bytes | None:
    """The bytes of patchctl's own state file PATH (WHAT names it: "journal", "lock", ...), or
    None when there is none. Anything there that patchctl did not write (a directory, a FIFO, a
    symlink, a device, a huge file) is refused in one line that says what to remove (exit 3)."""
    try:
        where = where or statehome.root_for(root, path)
        info = where.lstat(path)
        if info is None:
            return None
        if not stat.S_ISREG(info.st_mode):
            raise EnvironmentFailure(unexpected_state(root, path, what, file_kind(info.st_mode)))
        return where.read_bytes(path, MAX_STATE_BYTES)
    except TooLarge:
        raise EnvironmentFailure(
            f"{display(root, path)}: larger than {MAX_STATE_BYTES // (1024 * 1024)} MiB, not the {what} patchctl "
            f"writes there; remove it (`{shlex.join(['rm', str(path)])}`)"
        ) from None
    except Refused as exc:  # a link on the way, or swapped in since the lstat
        raise EnvironmentFailure(f"{exc}; not the {what} patchctl writes there") from None
    except OSError as exc:
        raise EnvironmentFailure(f"{display(root, path)}: cannot read the {what}: {exc.strerror}") from None


def check_state_path(root: Path, path: Path, what: str, expected: str = "regular file", follow: bool = False) -> None:
    """Refuse (one line, exit 3) when PATH exists as something other than EXPECTED (by lstat;
    FOLLOW: what a symlink leads to, for directories that may be symlinks inside the repository)."""
    kind = kind_of(path)
    if follow and kind == "symlink":
        try:
            kind = file_kind(os.stat(path).st_mode)
        except OSError:
            kind = "dangling symlink"
    if kind is not None and kind != expected:
        raise EnvironmentFailure(unexpected_state(root, path, what, kind))


def unexpected_state(root: Path, path: Path, what: str, kind: str) -> str:
    remove = shlex.join(["rm", "-r", str(path)] if kind == "directory" else ["rm", str(path)])
    return f"{display(root, path)} is a {kind}, not the {what} patchctl writes there; remove it (`{remove}`)"


def display(root: Path, path: Path) -> str:
    """PATH relative to ROOT when it is inside, as messages show it."""
    try:
        return str(Path(path).relative_to(root))
    except ValueError:
        return str(path)


# ---------------------------------------------------------------- the apply marker


@dataclass
class Marker:
    series: list[str]
    upstream: str
    rev: str
    digest: str
    head: str
    patches: list[str]
    version: int = MARKER_VERSION
    updating: str = ""  # the commit an in-place update is checking out; empty once it is done
    # HEAD is the user's own commits, found to be exactly the series (by `export`, or by `apply`
    # re-recording a tree whose commits were exported): not a tree apply made and nobody touched.
    exported: bool = False

    def matches(self, series: list[str], rev: str, digest: str) -> bool:
        current = self.version == MARKER_VERSION and not self.updating
        return current and self.series == series and self.rev == rev and self.digest == digest


def git_dir(tree: Path) -> Path | None:
    """The git directory of the work tree TREE, or None when TREE is not one."""
    if not (tree / ".git").exists():
        return None
    found = git.run(["rev-parse", "--absolute-git-dir"], tree, check=False)
    return Path(found.stdout.strip()) if found.ok else None


def common_dir(tree: Path) -> Path | None:
    """The repository (for a worktree of the cache, the mirror) whose objects TREE uses, or None."""
    found = git.run(["rev-parse", "--path-format=absolute", "--git-common-dir"], tree, check=False)
    return Path(found.stdout.strip()) if found.ok else None


def read_marker(tree: Path) -> Marker | None:
    gitdir = git_dir(tree)
    if gitdir is None:
        return None
    data = read_state(tree, gitdir / MARKER_NAME, "apply marker", Root(gitdir, "the tree's git directory"))
    if data is None:
        return None
    import json  # (here: a read-only command reads no marker; start-up)

    try:
        marker = Marker(**json.loads(data))
    except (ValueError, TypeError, RecursionError):
        return None
    return marker if _marker_ok(marker) else None


def _marker_ok(marker: Marker) -> bool:
    """Whether MARKER holds what `write_marker` writes: commits as full ids (a value git could read
    as an option is never trusted), names and digests as such."""
    return (
        all(isinstance(v, str) and git.is_full_sha(v) for v in (marker.rev, marker.head))
        and (marker.updating == "" or (isinstance(marker.updating, str) and git.is_full_sha(marker.updating)))
        and isinstance(marker.digest, str)
        and re.fullmatch(r"[0-9a-f]{64}", marker.digest) is not None
        and all(isinstance(v, list) and all(isinstance(n, str) for n in v) for v in (marker.series, marker.patches))
        and isinstance(marker.upstream, str)
        and isinstance(marker.version, int)
    )


def write_marker(tree: Path, marker: Marker) -> None:
    gitdir = git_dir(tree)
    if gitdir is None:
        raise GitError(f"{tree} is not a git work tree")
    import json

    data = (json.dumps(asdict(marker), indent=2, sort_keys=True) + "\n").encode()
    Root(gitdir, "the tree's git directory").write_bytes(MARKER_NAME, data)
