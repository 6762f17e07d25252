"""Where patchctl keeps a repository's state: in its git directory, where no checkout can plant it.

    GITDIR/patchctl/journal.json              the journal of an interrupted all-or-nothing write
    GITDIR/patchctl/lock                      the per-project lock of writing commands
    GITDIR/patchctl/sync/UPSTREAM/state.json  a stopped pin-sync's state (`--continue`)

GITDIR is the git directory of the work tree that holds matrix.yaml (`git rev-parse
--absolute-git-dir`: `.git`, or `.git/worktrees/NAME` in a linked worktree, whose files are
its own), as git keeps its own rebase state in `.git/rebase-merge`. Git never checks a `.git`
component out, so a repository cannot come with a journal that recovery would then carry out.
A matrix.yaml in a subdirectory of the repository keeps its state in
`GITDIR/patchctl/projects/DIR-HASH`. A project in a plain directory (no git repository at or
above it) keeps it in the user's state directory (`$XDG_STATE_HOME/patchctl/projects/DIR-HASH`,
by default `~/.local/state`), keyed by the directory's real path.

The repository is found as git finds it, by file reads only (no git process): the nearest
`.git` at ROOT or above, a directory or a `gitdir:` file. Earlier versions kept this state in
`.patchctl/` in the work tree; `patchctl.state.recovery` moves what it finds there, once.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import platformdirs

from ..confined.regular import NotRegular, TooLarge, kind_of, read_regular
from ..errors import EnvironmentFailure
from ..output.escape import shell_word

STATE_NAME = "patchctl"
PROJECTS = "projects"
_GITFILE_MAX = 4096


def home(root: Path) -> Path:
    """The directory of ROOT's journal, lock and pin-sync states (it may not exist yet)."""
    root = Path(root).resolve()
    found = _git_dir_above(root)
    if found is None:
        base = Path(platformdirs.user_state_dir(STATE_NAME)) / PROJECTS
        return base / _key(str(root), root.name)
    git_dir, prefix = found
    base = git_dir / STATE_NAME
    return base if prefix == "" else base / PROJECTS / _key(prefix, Path(prefix).name)


def work_tree(root: Path) -> tuple[Path, str]:
    """(the top of the work tree holding ROOT, ROOT relative to it: '' at the top); (ROOT, '')
    when ROOT is in no git repository."""
    root = Path(root).resolve()
    for folder in (root, *root.parents):
        if kind_of(folder / ".git") is not None:
            prefix = root.relative_to(folder).as_posix()
            return folder, "" if prefix == "." else prefix
    return root, ""


def ensure(root: Path) -> Path:
    """`home(ROOT)`, created. Anything but a directory on the way (a file, a symlink) is one line, exit 3."""
    state = home(root)
    check_directory(root, state, "state directory")
    state.mkdir(parents=True, exist_ok=True)
    return state


def check_directory(root: Path, path: Path, what: str) -> None:
    """Refuse (one line, exit 3) when PATH exists as anything but a directory, by lstat: a symlink too."""
    kind = kind_of(path)
    if kind is not None and kind != "directory":
        raise EnvironmentFailure(
            f"{display(root, path)} is a {kind}, not the {what} patchctl keeps there; "
            f"remove it (`rm {shell_word(path)}`)"
        )


def display(root: Path, path: Path) -> str:
    """PATH relative to ROOT when it is inside (`.git/patchctl/lock`), else as it is."""
    try:
        return str(Path(path).relative_to(Path(root).resolve()))
    except ValueError:
        try:
            return str(Path(path).relative_to(root))
        except ValueError:
            return str(path)


def _key(text: str, name: str) -> str:
    """A directory name for TEXT: readable (NAME) and unique (a hash of TEXT)."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip(".-")[:40] or "root"
    return f"{readable}-{hashlib.sha256(text.encode('utf-8', 'surrogateescape')).hexdigest()[:16]}"


def _git_dir_above(root: Path) -> tuple[Path, str] | None:
    """(the git directory of the work tree holding ROOT, ROOT relative to that tree), or None."""
    for folder in (root, *root.parents):
        dot_git = folder / ".git"
        kind = kind_of(dot_git)
        if kind is None:
            continue
        prefix = root.relative_to(folder).as_posix()
        prefix = "" if prefix == "." else prefix
        if kind == "regular file":
            return _read_gitfile(root, dot_git), prefix
        if kind == "directory" or (kind == "symlink" and dot_git.is_dir()):
            return dot_git.resolve(), prefix
        raise EnvironmentFailure(f"{dot_git} is a {kind}: neither a git directory nor a gitdir file")
    return None


def _read_gitfile(root: Path, dot_git: Path) -> Path:
    """The git directory a `.git` file (`gitdir: PATH`, a linked worktree or a submodule) names."""
    try:
        text = (read_regular(dot_git, _GITFILE_MAX) or b"").decode("utf-8")
    except (NotRegular, TooLarge, OSError, UnicodeDecodeError):
        text = ""
    if not text.startswith("gitdir:") or "\0" in text:
        raise EnvironmentFailure(f"{dot_git}: not a gitdir file (`gitdir: PATH`); cannot tell where its state goes")
    target = Path(text[len("gitdir:") :].strip())
    git_dir = (dot_git.parent / target).resolve() if not target.is_absolute() else target.resolve()
    if not git_dir.is_dir():
        raise EnvironmentFailure(f"{dot_git}: names {git_dir}, which is not a directory")
    return git_dir
