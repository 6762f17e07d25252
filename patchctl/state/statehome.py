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
`.git` at ROOT or above, a directory or a `gitdir:` file, never above a directory that
`GIT_CEILING_DIRECTORIES` names. Earlier versions kept this state in `.patchctl/` in the work
tree; `patchctl.state.recovery` moves what it finds there, once.

State is kept only where the user running patchctl owns it, by git's own rule against "dubious
ownership": the work tree holding that `.git`, the `.git` file, the git directory, and every
directory of the state that exists (`GITDIR/patchctl/...`, or the user state directory's
`patchctl/...`) must belong to the current user (under sudo, to `SUDO_UID`), unless git's
`safe.directory` (system or global config, as git reads it) names the work tree or is `*`.
Otherwise another user who can write to a parent directory (a shared `/tmp`) could plant a
journal there that recovery would carry out: one line (exit 3) names the directory and how to
allow it, and nothing is read.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..confined import Refused, Root
from ..confined.regular import NotRegular, TooLarge, kind_of, read_regular
from ..errors import EnvironmentFailure
from ..output.escape import shell_command, shell_word

STATE_NAME = "patchctl"
PROJECTS = "projects"
_GITFILE_MAX = 4096


def home(root: Path) -> Path:
    """The directory of ROOT's journal, lock and pin-sync states (it may not exist yet), once
    it and the repository holding it are found to be the user's own (exit 3 otherwise)."""
    anchor, prefix = _locate(root)
    return anchor.joinpath(*prefix)


def state_root(root: Path) -> Root:
    """`home(ROOT)` as a `confined.Root`: every path below it is reached from the git directory
    (or the user state directory) at every call, no link followed on the way."""
    anchor, prefix = _locate(root)
    return Root(anchor, "the state directory", prefix=prefix)


def root_for(root: Path, path: Path) -> Root:
    """The `Root` PATH is reached through: the state directory of the repository at ROOT when PATH
    is in it, else the repository (the `.patchctl/` of earlier versions), else PATH's own
    directory (an apply marker, in the cache)."""
    state = state_root(root)
    for where in (state, Root(root)):
        try:
            where.parts(path)
            return where
        except Refused:
            continue
    return Root(Path(path).parent, "the cache")


def _locate(root: Path) -> tuple[Path, tuple[str, ...]]:
    """(the directory the state is reached from, the components of the state directory below
    it), its ownership checked."""
    root = Path(root).resolve()
    found = _git_dir_above(root)
    if found is None:
        import platformdirs  # (it imports tempfile and shutil: only outside a git repository)

        top = Path(platformdirs.user_state_dir(STATE_NAME))
        prefix = (top.name, PROJECTS, _key(str(root), root.name))
        _check_owned_below(top.parent, top.parent.joinpath(*prefix), None)
        return top.parent, prefix
    git_dir, relative, work_tree, git_file = found
    prefix = (STATE_NAME,) if relative == "" else (STATE_NAME, PROJECTS, _key(relative, Path(relative).name))
    for path in (work_tree, git_file, git_dir):
        if path is not None:
            _check_owned(path, work_tree)
    _check_owned_below(git_dir, git_dir.joinpath(*prefix), work_tree)
    return git_dir, prefix


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
    anchor, prefix = _locate(root)
    state = anchor.joinpath(*prefix)
    check_directory(root, state, "state directory")
    try:
        if kind_of(anchor) is None:  # a fresh HOME has no ~/.local/state yet: made as XDG says, 0700
            existing = next(folder for folder in anchor.parents if kind_of(folder) is not None)
            with Root(existing, "the user state directory").directory(
                anchor.relative_to(existing), "write", create=True
            ) as made:
                os.fchmod(made.fd, 0o700)
        Root(anchor, "the state directory", prefix=prefix).mkdirs("")
    except Refused as exc:
        raise EnvironmentFailure(str(exc)) from None
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
    import hashlib  # (OpenSSL's: only for a project below its repository's top, or outside one)

    readable = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip(".-")[:40] or "root"
    return f"{readable}-{hashlib.sha256(text.encode('utf-8', 'surrogateescape')).hexdigest()[:16]}"


def _git_dir_above(root: Path) -> tuple[Path, str, Path, Path | None] | None:
    """(the git directory of the work tree holding ROOT, ROOT relative to that tree, the work
    tree, its `.git` file when it has one), or None. Like git, the search never goes up into a
    directory GIT_CEILING_DIRECTORIES names."""
    ceilings = ceiling_directories()
    for folder in (root, *root.parents):
        if folder != root and folder in ceilings:
            break
        dot_git = folder / ".git"
        kind = kind_of(dot_git)
        if kind is None:
            continue
        prefix = root.relative_to(folder).as_posix()
        prefix = "" if prefix == "." else prefix
        if kind == "regular file":
            _check_owned(dot_git, folder)  # before it is read
            return _read_gitfile(root, dot_git), prefix, folder, dot_git
        if kind == "directory" or (kind == "symlink" and dot_git.is_dir()):
            return dot_git.resolve(), prefix, folder, None
        raise EnvironmentFailure(f"{dot_git} is a {kind}: neither a git directory nor a gitdir file")
    return None


def ceiling_directories() -> set[Path]:
    """The directories of $GIT_CEILING_DIRECTORIES (absolute entries; as git does, those after
    an empty entry are taken as written, the others with their links resolved)."""
    found: set[Path] = set()
    resolve = True
    for entry in os.environ.get("GIT_CEILING_DIRECTORIES", "").split(":"):
        if not entry:
            resolve = False
            continue
        if os.path.isabs(entry):
            found.add(Path(os.path.realpath(entry)) if resolve else Path(os.path.normpath(entry)))
    return found


# ---------------------------------------------------------------- ownership (git's "dubious ownership")


def current_uid() -> int:
    """The user whose state this is: the effective uid, or under sudo (root) the one sudo names."""
    uid = os.geteuid()
    if uid == 0 and (sudo := os.environ.get("SUDO_UID", "")).isdigit():
        return int(sudo)
    return uid


def _owned(info: os.stat_result) -> bool:
    return info.st_uid == current_uid() or (info.st_uid == 0 and os.geteuid() == 0)


def _check_owned(path: Path, work_tree: Path | None) -> None:
    """Refuse (exit 3) when PATH exists and belongs to someone else (by lstat: a link's own owner)."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise EnvironmentFailure(
            f"cannot tell who owns {path} ({exc.strerror}); patchctl keeps no state there"
        ) from None
    if _owned(info) or (work_tree is not None and _safe_directory(work_tree)):
        return
    raise EnvironmentFailure(_dubious(path, info.st_uid, work_tree))


def _check_owned_below(top: Path, state: Path, work_tree: Path | None) -> None:
    """`_check_owned` for TOP and every directory from it down to STATE that exists."""
    _check_owned(top, work_tree)
    for part in state.relative_to(top).parts:
        top = top / part
        _check_owned(top, work_tree)


def _dubious(path: Path, uid: int, work_tree: Path | None) -> str:
    whose = f"uid {uid}, not you (uid {current_uid()})"
    if work_tree is None:
        return (
            f"refusing to keep state in {path}: it belongs to {whose}; use a state directory of your own "
            f"(XDG_STATE_HOME) or `chown` it"
        )
    allow = shell_command(["git", "config", "--global", "--add", "safe.directory", str(work_tree)])
    ceiling = shell_word(f"GIT_CEILING_DIRECTORIES={work_tree}")
    return (
        f"refusing to keep state in {path}: it belongs to {whose}, and git calls that repository's ownership "
        f"dubious; if you trust it, `{allow}`; if it is not your project's repository, stop the search above "
        f"your project with `export {ceiling}`"
    )


_SAFE: dict[str, bool] = {}


def _safe_directory(work_tree: Path) -> bool:
    """Whether git's safe.directory (system and global config, as git reads them) trusts WORK_TREE."""
    key = str(work_tree)
    if key not in _SAFE:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") or k.startswith("GIT_CONFIG")}
        import subprocess

        try:
            listed = subprocess.run(
                ["git", "config", "--get-all", "safe.directory"],
                cwd="/",
                env=env,
                capture_output=True,
                text=True,
                check=False,
            ).stdout.splitlines()
        except OSError:
            listed = []
        trusted = False
        for value in listed:  # as git reads the list: an empty value resets it
            value = value.strip()
            if value == "":
                trusted = False
            elif (
                value == "*"
                or os.path.realpath(value.removesuffix("/*")) == os.path.realpath(key)
                or (value.endswith("/*") and os.path.realpath(key).startswith(os.path.realpath(value[:-2]) + "/"))
            ):
                trusted = True
        _SAFE[key] = trusted
    return _SAFE[key]


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
