"""Run git isolated from the machine it runs on, and hardened against the repositories it runs in.

Every git call goes through `run`. The user's global and system config never apply (a
user's `diff.algorithm`, `core.autocrlf` or `apply.whitespace` would change what patchctl
writes and accepts), the identity and dates are fixed, and git never discovers a parent
repository above the directory it is pointed at: `git apply` inside a parent repository
otherwise resolves paths against that parent and silently skips the patch.

And no repository's own config makes git run anything (docs/security.md, "git runs only
on our own repositories"): every call turns hooks, `core.fsmonitor`, pagers, editors,
credential helpers, ask-pass programs, `core.sshCommand`, `core.gitProxy` and signing off
from git's command line or environment, which outrank every config file; refuses a bare
repository it was not pointed at (`safe.bareRepository=explicit`: a bare repository
committed as plain files in a checkout is never entered by accident); speaks only the
protocols patchctl fetches over. In a repository that is not the cache's own (a mirror or a
worktree of one, whose config patchctl wrote: `own_bare_repositories_in`), the filter, diff
and merge drivers and the external diff its config defines run nothing, and nothing is
fetched lazily.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import stat
from pathlib import Path

from .errors import GitError
from .paths import cache_location
from .patterns import lazy
from .records import dataclass

# A 3-way merge that leaves a conflict writes zdiff3 markers: ours, then the base (`|||||||`),
# then theirs, so that a maintainer sees what the patch was written against. Passed with
# `git -c` to the commands that merge, never read from a user's config.
CONFLICT_STYLE = ["-c", "merge.conflictStyle=zdiff3"]

IDENTITY_NAME = "patchctl"
IDENTITY_EMAIL = "patchctl@localhost"
# A fixed timestamp keeps commits that patchctl makes itself reproducible.
FIXED_DATE = "1700000000 +0000"
ZERO_OID = "0" * 40

# Transport settings the user may legitimately need (proxies, ssh keys); everything else
# GIT_* is dropped so that a stray GIT_DIR or GIT_WORK_TREE cannot redirect patchctl.
_KEPT_GIT_VARS = {
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_ASKPASS",
    "GIT_SSL_CAINFO",
    "GIT_SSL_NO_VERIFY",
    "GIT_PROXY_COMMAND",
}

# The protocols patchctl fetches over: matrix.yaml's upstream URL schemes
# (project.upstream_checks.ALLOWED_SCHEMES; git+ssh and ssh+git are git's "ssh"). Never `ext::`,
# `fd::` or a remote helper, whatever a config's `url.*.insteadOf` or a promisor remote says.
ALLOWED_PROTOCOLS = ("file", "git", "http", "https", "ssh")
# What a local repository that input names is fetched over: file:// alone.
LOCAL_PROTOCOLS = ("file",)

# Config from git's command line outranks every config file (a repository's own included):
# what a repository's config could make git run, turned off for every call. Hooks, fsmonitor
# and signing run programs; an empty credential helper list and ask-pass run none.
HARDENED = [
    "--no-pager",
    *("-c", "core.hooksPath=/dev/null"),
    *("-c", "core.fsmonitor=false"),
    *("-c", "safe.bareRepository=explicit"),
    *("-c", "credential.helper="),
    *("-c", "core.askPass="),
    *("-c", "commit.gpgSign=false"),
    *("-c", "tag.gpgSign=false"),
    *("-c", "log.showSignature=false"),
    *("-c", "core.autocrlf=false"),
    *("-c", "core.safecrlf=false"),
    *("-c", "advice.detachedHead=false"),
]

# Directories whose entries are bare repositories patchctl made: see `own_bare_repositories_in`.
# Those of the cache (`paths.cache_location`) always are: the store's mirrors and the sdist repositories.
_OWN_BARE_PARENTS: set[str] = set()
CACHE_BARE_PARENTS = ("mirrors", "sdist-repos")


def own_bare_repositories_in(directory: Path | str) -> None:
    """Say that the entries of DIRECTORY are bare repositories patchctl made itself. git runs
    in one of them with its git directory named (`safe.bareRepository=explicit` refuses every
    bare repository git would otherwise find by itself), and with lazy fetches allowed there
    and in their worktrees: a blobless mirror fetches a blob when something reads it, from
    the remote patchctl configured."""
    _OWN_BARE_PARENTS.add(os.path.realpath(directory))


def _own_bare(cwd: str) -> bool:
    """Whether CWD (a real path) is one of patchctl's own bare repositories."""
    parent = os.path.dirname(cwd)
    return parent in _OWN_BARE_PARENTS or parent in _cache_bare_parents(str(cache_location()))


@functools.lru_cache(maxsize=8)
def _cache_bare_parents(cache: str) -> tuple[str, ...]:
    """The directories of the cache at CACHE whose entries are patchctl's bare repositories, as real paths."""
    real = os.path.realpath(cache)
    return tuple(os.path.join(real, name) for name in CACHE_BARE_PARENTS)


def _worktree_of_own_bare(cwd: str) -> bool:
    """Whether CWD is a worktree of one of patchctl's own bare repositories: its `.git` is a
    file (never a link, never read past 4 KiB) naming `<own bare>/worktrees/<id>`."""
    try:
        fd = os.open(os.path.join(cwd, ".git"), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        text = os.read(fd, 4096).decode("utf-8", "replace")
    finally:
        os.close(fd)
    if not text.startswith("gitdir: "):
        return False
    admin = os.path.normpath(os.path.join(cwd, text[len("gitdir: ") :].strip()))
    worktrees = os.path.dirname(admin)
    return os.path.basename(worktrees) == "worktrees" and _own_bare(os.path.dirname(worktrees))


# A repository's config may define diff, merge and filter drivers under any name, which its
# `.gitattributes` (committed: data) then names, and an external diff: each one it defines is
# set from the environment, which outranks it, to run nothing of the repository's: no filter,
# text as it is, an external diff or a merge driver that fails (an error; patchctl never asks
# for a patch or a merge in a repository that is not its own). A remote's `uploadpack` cannot be
# outranked (git keeps the first it reads): patchctl never fetches in such a repository, and
# nothing is fetched there lazily (GIT_NO_LAZY_FETCH below).
_DRIVER_KEYS = r"^(diff\.external|(filter|diff|merge)\..+\.(clean|smudge|process|required|textconv|command|driver))$"
_NEUTRAL_DRIVER = {
    "external": "false",
    "clean": "",
    "smudge": "",
    "process": "",
    "required": "false",
    "textconv": "cat",
    "command": "false",
    "driver": "false",
}
# (real path of a directory, the state of its .git/config) -> its neutral driver settings
_DRIVERS: dict[tuple[str, tuple[int, ...] | None], dict[str, str]] = {}


def _neutral_drivers(where: str, env: dict[str, str]) -> dict[str, str]:
    """The driver settings of the repository at WHERE (not one of patchctl's own), each made
    neutral; asked of git (`git config` runs nothing) once per directory and process, and again
    when its `.git/config` changed."""
    try:
        config = os.stat(os.path.join(where, ".git", "config"))
        key: tuple[str, tuple[int, ...] | None] = (where, (config.st_ino, config.st_size, config.st_mtime_ns))
    except OSError:
        key = (where, None)
    if key not in _DRIVERS:
        import subprocess

        try:
            listed = subprocess.run(
                ["git", *HARDENED, "config", "-z", "--get-regexp", _DRIVER_KEYS],
                cwd=where,
                env=env,
                capture_output=True,
            ).stdout.decode("utf-8", "surrogateescape")
        except OSError:
            listed = ""  # git itself fails the same way in `run`, which says so
        names = [entry.split("\n", 1)[0] for entry in listed.split("\0") if entry]
        _DRIVERS[key] = {name: _NEUTRAL_DRIVER[name.rsplit(".", 1)[1]] for name in names}
    return _DRIVERS[key]


def isolated_env(
    cwd: Path | None = None, extra: dict[str, str] | None = None, protocols: tuple[str, ...] = ALLOWED_PROTOCOLS
) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") or k in _KEPT_GIT_VARS}
    env.update(
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_CONFIG_NOSYSTEM="1",
        GIT_AUTHOR_NAME=IDENTITY_NAME,
        GIT_AUTHOR_EMAIL=IDENTITY_EMAIL,
        GIT_COMMITTER_NAME=IDENTITY_NAME,
        GIT_COMMITTER_EMAIL=IDENTITY_EMAIL,
        GIT_TERMINAL_PROMPT="0",
        GIT_ALLOW_PROTOCOL=":".join(protocols),
        GIT_EDITOR=":",
        GIT_SEQUENCE_EDITOR=":",
        GIT_PAGER="cat",
        LC_ALL="C",
        LANG="C",
    )
    # core.sshCommand outranks GIT_SSH, and the first core.gitProxy read (the repository's, before
    # the command line's) wins: the environment outranks both. The user's own settings are kept.
    if "GIT_SSH_COMMAND" not in env:
        env["GIT_SSH_COMMAND"] = shlex.quote(env["GIT_SSH"]) if env.get("GIT_SSH") else "ssh"
    env.setdefault("GIT_PROXY_COMMAND", "")
    if cwd is not None:
        where = os.path.realpath(cwd)  # Path.resolve's, quicker
        env["GIT_CEILING_DIRECTORIES"] = os.path.dirname(where)
        if _own_bare(where):
            env["GIT_DIR"] = where
        elif not _worktree_of_own_bare(where):
            # A repository whose config patchctl did not write may declare itself a partial clone
            # of a "promisor" whose upload-pack is a shell command: nothing is fetched there.
            env["GIT_NO_LAZY_FETCH"] = "1"
            # Keys and values by the environment (git 2.31+): a driver's name may hold `=` or a dot.
            drivers = _neutral_drivers(where, env)
            env["GIT_CONFIG_COUNT"] = str(len(drivers))
            for number, (key, value) in enumerate(drivers.items()):
                env[f"GIT_CONFIG_KEY_{number}"], env[f"GIT_CONFIG_VALUE_{number}"] = key, value
    else:
        env["GIT_NO_LAZY_FETCH"] = "1"
    if extra:
        env.update(extra)
    return env


@dataclass(frozen=True)
class GitResult:
    returncode: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def run(
    args: list[str],
    cwd: Path | str,
    *,
    check: bool = True,
    input: str | bytes | None = None,
    env: dict[str, str] | None = None,
    binary: bool = False,
    protocols: tuple[str, ...] = ALLOWED_PROTOCOLS,
) -> GitResult:
    """Run `git ARGS` in CWD, hardened (HARDENED; PROTOCOLS the only ones git may speak);
    raise GitError with git's first error line when CHECK and it fails."""
    import subprocess  # (here: a command that runs no git, lint --no-apply or --help, never imports it)

    cwd = Path(cwd)
    cmd = ["git", *HARDENED, *args]
    try:
        proc = subprocess.run(
            cmd,
            cwd=cwd,
            # Text read from patches keeps undecodable bytes as surrogates: write them back as they were.
            input=input if input is None or isinstance(input, bytes) else input.encode("utf-8", "surrogateescape"),
            capture_output=True,
            env=isolated_env(cwd, env, protocols),
        )
    except FileNotFoundError as exc:
        # subprocess reports a missing working directory with the same exception as a missing git.
        if not cwd.is_dir():
            raise GitError(f"git {args[0]}: directory {cwd} does not exist (removed while patchctl ran?)") from exc
        raise GitError("git is not installed or not on PATH") from exc
    except NotADirectoryError as exc:  # a file (or a link to one) where the working directory belongs
        raise GitError(f"git {args[0]}: {cwd} is not a directory") from exc
    stdout = proc.stdout if binary else proc.stdout.decode("utf-8", errors="surrogateescape")
    stderr = proc.stderr.decode("utf-8", errors="replace")
    result = GitResult(proc.returncode, stdout, stderr)  # type: ignore[arg-type]
    if check and not result.ok:
        raise GitError(f"git {args[0]} failed in {cwd}: {explain(stderr) or f'exit {proc.returncode}'}")
    return result


# Answers that cannot change while patchctl runs, by (directory, arguments): see `run_fixed`.
_FIXED: dict[tuple[str, tuple[str, ...]], GitResult] = {}


def run_fixed(args: list[str], cwd: Path | str, *, commits: tuple[str, ...]) -> GitResult:
    """`run(ARGS, CWD, check=False)` for a question about COMMITS alone (a log between two of
    them), whose answer is fixed once they are named by full id: asked once per process, so
    that a `pin-sync --wait` asks it once for all its rounds. A failure is never kept."""
    if not all(is_full_sha(commit) for commit in commits):
        return run(args, cwd, check=False)
    key = (str(cwd), tuple(args))
    if key not in _FIXED:
        result = run(args, cwd, check=False)
        if not result.ok:
            return result
        _FIXED[key] = result
    return _FIXED[key]


def fixed_answer(args: list[str], cwd: Path | str) -> str | None:
    """What `run_fixed(ARGS, CWD)` was answered in this process (its output), if it was asked."""
    kept = _FIXED.get((str(cwd), tuple(args)))
    return None if kept is None else kept.stdout


def take_fixed_answer(args: list[str], cwd: Path | str, stdout: str) -> None:
    """Take STDOUT as git's answer to `run_fixed(ARGS, CWD)` for the rest of this process: one an
    earlier process was given and kept (a stopped pin-sync keeps those of its range)."""
    _FIXED[(str(cwd), tuple(args))] = GitResult(0, stdout, "")


# What git's own words usually mean for a patchctl user: (pattern in git's stderr, the cause).
_CAUSES = (
    (
        lazy(r"failed to unpack tree object|bad object|not a tree object|unknown revision|invalid reference"),
        "a commit that is not in the upstream: check the pin in matrix.yaml, --rev or --base",
    ),
    (lazy(r"could not resolve host|unable to access|connection refused|timed out", re.I), "the network"),
    (
        lazy(r"authentication failed|could not read username|terminal prompts disabled", re.I),
        "the upstream asks for credentials (patchctl never prompts): use a public URL, a mirror "
        "(--upstream-url) or a credential helper",
    ),
    (lazy(r"repository .* not found|does not appear to be a git repository", re.I), "a wrong upstream URL"),
    (lazy(r"no space left on device", re.I), "the disk is full"),
    (lazy(r"permission denied", re.I), "no permission to write there"),
    (
        lazy(r"\.lock'?: file exists|unable to create .*\.lock", re.I),
        "another git process holds a lock there, or a killed one left its .lock file: remove it if none runs",
    ),
)


def explain(stderr: str) -> str:
    """Git's first error line, led by what it usually means for a user when that is known."""
    line = first_line(stderr)
    for pattern, cause in _CAUSES:
        if pattern.search(stderr):
            return f"{cause} (git: {line})"
    return line


def z_list(repo: Path, *args: str) -> list[str]:
    """The entries of `git ARGS -z` in REPO (paths, names): NUL-separated, so that a name
    holding a space, a line break or a quote is one entry, unquoted."""
    return [entry for entry in run([*args, "-z"], repo).stdout.split("\0") if entry]


def first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def rev_parse(repo: Path, rev: str) -> str:
    """Resolve REV to a full commit id, or raise GitError naming it."""
    result = run(["rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}"], repo, check=False)
    if not result.ok:
        raise GitError(f"unknown revision {rev!r} in {repo}")
    return result.stdout.strip()


def is_full_sha(text: str) -> bool:
    return len(text) == 40 and all(c in "0123456789abcdef" for c in text)


def init_repo(path: Path, *, bare: bool = False) -> None:
    path.mkdir(parents=True, exist_ok=True)
    run(["init", "-q", *(["--bare"] if bare else []), "-b", "main", "."], path)


def commit_all(repo: Path, message: str, *, date: str = FIXED_DATE) -> str:
    """Stage everything in REPO's work tree and commit it with a fixed identity and DATE."""
    run(["add", "-A"], repo)
    run(
        ["commit", "-q", "--allow-empty", "--no-verify", "-m", message],
        repo,
        env={"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date},
    )
    return rev_parse(repo, "HEAD")


# Paths (a patch's, an upstream's) reach git's command line only while they are short: a hostile
# patch may name a path of any length (4,201 characters killed `canary` with "argument list too
# long"). Past these bounds a caller sends them on stdin (`log`/`rev-list --stdin`, paths after a
# `--` line) or reads a whole listing and picks them out (`ls-tree`, `ls-files`).
MAX_PATH_ARG_BYTES = 4096  # PATH_MAX: no longer path names a file
MAX_PATH_ARGS_BYTES = 32 * 1024


def paths_fit_argv(paths: list[str]) -> bool:
    """Whether PATHS may go on git's command line: each short, all together short, one a line."""
    sizes = [len(p.encode("utf-8", "surrogateescape")) for p in paths]
    return all(size <= MAX_PATH_ARG_BYTES for size in sizes) and sum(sizes) <= MAX_PATH_ARGS_BYTES


def stdin_revisions_and_paths(revisions: list[str], paths: list[str]) -> str:
    """The stdin of `git log --stdin` / `git rev-list --stdin`: REVISIONS, a `--` line, then PATHS
    one a line (a path holding a line break cannot be said so: it names no file git lists there)."""
    return "".join(f"{r}\n" for r in revisions) + "--\n" + "".join(f"{p}\n" for p in paths if "\n" not in p)
