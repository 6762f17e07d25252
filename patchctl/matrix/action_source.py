"""Where a downstream's workflows get patchctl: a commit of patchctl's action that github.com has.

`uses: OWNER/REPO@COMMIT` fails every job at "Set up job" when github.com has no such
repository or commit. Whether it has one cannot be known offline in general; what can:

- a placeholder owner (`OWNER`, `example`, `your-org`, ...) or the null commit is never published;
- pip's record of a `git+https://github.com/OWNER/REPO@...` install names a commit github.com served;
- in the git clone patchctl runs from (an editable install), a commit that a remote-tracking
  branch of a github.com remote holds is published there, and one that the clone holds while none
  of those branches does was only ever made locally (as far as this clone knows).

Anything else (a commit this clone does not hold, a clone with no github.com remote) is
not judged. `init` writes an action only where it knows github.com has it, and says which.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from .. import git
from ..confined import Refused, Root
from ..errors import ConfigError, UsageError
from ..records import dataclass
from .actions import ACTION_NAME, COMMIT_SHA, SELF_ACTION

# patchctl's home on github.com when the installed metadata does not say (pyproject.toml's
# [project.urls] Source is the one to keep in step with it).
HOME = "patchctl/patchctl"
# Owners that stand for "fill this in": never a real publisher of the action.
PLACEHOLDER_OWNERS = frozenset(
    {
        "owner", "example", "examples", "your-org", "your-name", "your-username", "your-user", "yourorg",
        "yourname", "yourusername", "username", "user", "org", "organization", "my-org", "myorg", "me",
        "someone", "somebody", "changeme", "placeholder", "todo", "xxx",
    }
)  # fmt: skip
GITHUB_URL = re.compile(
    r"^(?:git\+)?(?:https?://(?:[^@/]+@)?|ssh://git@|git://|git@)github\.com[/:]([^/]+/[^/]+?)(?:\.git)?/?$"
)
ACTION_REF = re.compile(r"^([A-Za-z0-9][A-Za-z0-9-]*)/([A-Za-z0-9._-]+)(/[A-Za-z0-9._/-]+)?@(.+)$")


def github_repository(url: str) -> str | None:
    """OWNER/REPO of a github.com URL (https, ssh or scp form, with or without .git); None otherwise."""
    match = GITHUB_URL.match(url.strip())
    return match.group(1) if match else None


def home_repository() -> str:
    """patchctl's repository on github.com, as its installed metadata's Source URL names it."""
    import importlib.metadata  # asked by init and by a refused action only: off every command's start-up

    try:
        urls = importlib.metadata.metadata("patchctl").get_all("Project-URL") or []
    except importlib.metadata.PackageNotFoundError:
        urls = []
    for entry in urls:
        label, _, url = entry.partition(",")
        found = github_repository(url) if label.strip().lower() == "source" else None
        if found and found.split("/")[0].lower() not in PLACEHOLDER_OWNERS:
            return found
    return HOME


def is_patchctl_repository(root: Path) -> bool:
    """ROOT is patchctl's own repository: its action.yml is patchctl's, beside patchctl's pyproject.toml."""
    where = Root(root)
    try:
        action = yaml.safe_load((where.read_bytes("action.yml", 1024 * 1024) or b"").decode("utf-8"))
        project = (where.read_bytes("pyproject.toml", 1024 * 1024) or b"").decode("utf-8")
    except (OSError, Refused, UnicodeDecodeError, yaml.YAMLError):  # a link, a FIFO: not patchctl's own
        return False
    own_action = isinstance(action, dict) and action.get("name") == "patchctl" and "runs" in action
    return own_action and re.search(r'^name\s*=\s*"patchctl"\s*$', project, re.MULTILINE) is not None


def patchctl_action(root: Path, configured: str | None) -> str:
    """The `uses:` of patchctl's action in ROOT's rendered workflows: matrix.yaml's `workflows: action:`
    (refused where no workflow could fetch it, as MX804 says), else `./` in patchctl's own repository.
    Anywhere else it must be set: there is no `./` to call."""
    if configured is not None:
        problem = unpublished(configured, installed_clone())
        if problem:  # no workflow could fetch it: every job would fail at "Set up job"
            raise ConfigError(f"matrix.yaml: workflows: action: {configured}: {problem}")
        return configured
    if is_patchctl_repository(root):
        return SELF_ACTION
    raise ConfigError(
        f"matrix.yaml: workflows: action: not set, and this repository has no action.yml of patchctl's to call "
        f"as {SELF_ACTION}: set it to {home_repository()}@COMMIT (or your fork's), a commit that github.com has "
        "(`patchctl init --action` writes it)"
    )


def installed_clone() -> Path | None:
    """The git checkout patchctl runs from (an editable install), or None (a wheel, an sdist)."""
    checkout = Path(__file__).resolve().parents[2]
    return checkout if is_patchctl_repository(checkout) else None


def pip_vcs_record() -> tuple[str, str] | None:
    """(url, commit) of pip's record of a git install of patchctl (PEP 610), or None."""
    import importlib.metadata

    try:
        record = json.loads(importlib.metadata.distribution("patchctl").read_text("direct_url.json") or "{}")
    except (importlib.metadata.PackageNotFoundError, json.JSONDecodeError):
        return None
    vcs = record.get("vcs_info") if isinstance(record, dict) else None
    if isinstance(vcs, dict) and vcs.get("vcs") == "git" and COMMIT_SHA.match(str(vcs.get("commit_id", ""))):
        return str(record.get("url", "")), vcs["commit_id"]
    return None


# ---------------------------------------------------------------- what a clone knows


@dataclass(frozen=True)
class CloneView:
    """What a git clone knows of github.com: its github.com remotes and their tracking branches."""

    path: Path
    remotes: dict[str, str]  # remote name -> OWNER/REPO, github.com remotes only
    tracked: tuple[str, ...]  # their remote-tracking refs (refs/remotes/NAME/...)

    def holds(self, commit: str) -> bool:
        return git.run(["cat-file", "-e", f"{commit}^{{commit}}"], self.path, check=False).ok

    def branches_with(self, commit: str) -> list[str]:
        """The github.com remote-tracking branches that hold COMMIT (`origin/main`)."""
        if not self.tracked:
            return []
        listing = ["for-each-ref", "--contains", commit, "--format=%(refname)", *self.remote_patterns()]
        result = git.run(listing, self.path, check=False)
        refs = [line for line in result.stdout.splitlines() if line and not line.endswith("/HEAD")]
        return sorted(ref.removeprefix("refs/remotes/") for ref in refs)

    def remote_patterns(self) -> list[str]:
        return [f"refs/remotes/{name}/" for name in sorted(self.remotes)]

    def newest_published(self, commit: str) -> str | None:
        """The newest ancestor of COMMIT that a github.com remote branch holds (the boundary of
        the commits only this clone has), or None."""
        negated = [f"--remotes={name}" for name in sorted(self.remotes)]
        result = git.run(["rev-list", "--boundary", "--topo-order", commit, "--not", *negated], self.path, check=False)
        boundary = [line[1:] for line in result.stdout.splitlines() if line.startswith("-")]
        return boundary[0] if result.ok and boundary else None

    def repository_of(self, branch: str) -> str:
        return self.remotes[branch.split("/", 1)[0]]


def clone_view(path: Path) -> CloneView | None:
    """What the clone at PATH knows of github.com; None when it is no git clone."""
    listed = git.run(["config", "--get-regexp", r"^remote\..*\.url$"], path, check=False)
    if not git.run(["rev-parse", "--git-dir"], path, check=False).ok:
        return None
    remotes = {}
    for line in listed.stdout.splitlines():
        key, _, url = line.partition(" ")
        repository = github_repository(url)
        if repository:
            remotes[key.removeprefix("remote.").removesuffix(".url")] = repository
    tracked: tuple[str, ...] = ()
    if remotes:
        refs = git.run(
            ["for-each-ref", "--format=%(refname)", *[f"refs/remotes/{n}/" for n in sorted(remotes)]], path, check=False
        )
        tracked = tuple(line for line in refs.stdout.splitlines() if line)
    return CloneView(path, remotes, tracked)


# ---------------------------------------------------------------- judging a `uses:` value


def split_action(action: str) -> tuple[str, str, str] | None:
    """(owner, OWNER/REPO[/PATH], ref) of an `OWNER/REPO[/PATH]@REF` action; None for anything else."""
    match = ACTION_REF.match(action.strip())
    if not match:
        return None
    owner, repo, path, ref = match.groups()
    return owner, f"{owner}/{repo}{path or ''}", ref


def unpublished(action: str, clone: Path | None) -> str | None:
    """Why github.com has no such action (a placeholder owner, the null commit, a commit only
    ever made in CLONE), or None where nothing says so. CLONE: the clone patchctl runs from."""
    if action.strip() == SELF_ACTION:
        return None
    parts = split_action(action)
    if parts is None:
        return None  # not an OWNER/REPO@REF reference: the schema's business
    owner, _name, ref = parts
    if owner.lower() in PLACEHOLDER_OWNERS:
        return (
            f"{owner!r} is a placeholder, not the GitHub account that publishes the action "
            f"(patchctl's home is {home_repository()}; a fork is YOURS/patchctl)"
        )
    if ref == git.ZERO_OID:
        return "the null commit is no commit"
    view = clone_view(clone) if clone is not None and COMMIT_SHA.match(ref) else None
    if view is None or not view.tracked or not view.holds(ref) or view.branches_with(ref):
        return None
    newest = view.newest_published(ref)
    hint = ""
    if newest:
        branch = (view.branches_with(newest) or ["a remote branch"])[0]
        hint = f"; the newest commit of it that github.com has is {newest} ({branch})"
    return (
        f"{ref[:12]} is a commit of the clone patchctl runs from ({view.path}) that none of its github.com "
        f"remote branches ({', '.join(sorted(view.remotes.values()))}) holds: push it first{hint}"
    )


# ---------------------------------------------------------------- what `init` writes


@dataclass(frozen=True)
class ActionChoice:
    """The `workflows: action:` init writes (None: left unset) and the line that says why."""

    action: str | None
    said: str  # a `chose:` line's text, or a warning's (when action is None or not this patchctl)
    warning: bool = False


def choose_action(named: str | None, clone: Path | None) -> ActionChoice:
    """What `init` writes: the action NAMED (`--action`, refused when unpublished), else this
    patchctl's commit where github.com is known to have it, else its newest ancestor there,
    else nothing (a warning says how to set it). CLONE: the clone patchctl runs from, if any."""
    if named is not None:
        name, _, commit = named.partition("@")
        if not (ACTION_NAME.match(name) and COMMIT_SHA.match(commit)):
            raise UsageError(
                f"--action {named!r}: give OWNER/REPO@COMMIT with the full 40-hex commit id (a tag can be moved; "
                "the workflows pin the commit)"
            )
        problem = unpublished(named, clone)
        if problem:
            raise UsageError(f"--action {named}: {problem}")
        return ActionChoice(named, f"workflows: action: {named} (--action)")
    record = pip_vcs_record()
    if record is not None and (repository := github_repository(record[0])):
        return ActionChoice(
            f"{repository}@{record[1]}",
            f"workflows: action: {repository}@{record[1]}: this patchctl, as pip installed it from {record[0]}",
        )
    how = (
        f"set workflows: action: in matrix.yaml to OWNER/REPO@COMMIT, a commit that github.com has of "
        f"{home_repository()} or of your fork of it, or run init again with --action OWNER/REPO@COMMIT"
    )
    view = clone_view(clone) if clone is not None else None
    if view is None:
        return ActionChoice(
            None,
            "workflows: action: not set: this patchctl was not installed from a git clone or a github.com URL, so "
            f"no commit of its action is known; {how}",
            warning=True,
        )
    head = git.run(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], view.path, check=False).stdout.strip()
    branches = view.branches_with(head) if COMMIT_SHA.match(head) else []
    if branches:
        repository = view.repository_of(branches[0])
        return ActionChoice(
            f"{repository}@{head}",
            f"workflows: action: {repository}@{head}: this patchctl's commit, which github.com has ({branches[0]})",
        )
    newest = view.newest_published(head) if COMMIT_SHA.match(head) else None
    if newest:
        branch = view.branches_with(newest)[0]
        repository = view.repository_of(branch)
        return ActionChoice(
            f"{repository}@{newest}",
            f"workflows: action: {repository}@{newest}, the newest commit of this patchctl that github.com has "
            f"({branch}): this patchctl runs at {head[:12]}, whose own commits no workflow can fetch until they are "
            "pushed (then run init again with --action OWNER/REPO@COMMIT)",
            warning=True,
        )
    remotes = ", ".join(sorted(set(view.remotes.values()))) or "no github.com remote"
    return ActionChoice(
        None,
        f"workflows: action: not set: this patchctl runs from a clone ({view.path}, {remotes}) whose HEAD "
        f"{head[:12] or '(none)'} github.com is not known to have; {how}",
        warning=True,
    )
