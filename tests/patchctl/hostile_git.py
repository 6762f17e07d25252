"""Hostile git config for the tests (issue 44, items 4 and 7): every setting a repository's
config can hold that makes git run a program, each set to a payload that leaves a marker file
naming it. Used by test_hostile_git_config.py and the property test's `git-config` addition."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

HOOKS = (
    "applypatch-msg",
    "pre-applypatch",
    "post-applypatch",
    "pre-commit",
    "pre-merge-commit",
    "prepare-commit-msg",
    "commit-msg",
    "post-commit",
    "pre-rebase",
    "post-checkout",
    "post-merge",
    "pre-push",
    "pre-receive",
    "update",
    "post-receive",
    "post-update",
    "reference-transaction",
    "push-to-checkout",
    "pre-auto-gc",
    "post-rewrite",
    "post-index-change",
    "fsmonitor-watchman",
)
# Every setting a repository's config can hold that makes git run something: NAME -> payload name.
PROGRAMS = {
    "core.fsmonitor": "fsmonitor",
    "core.pager": "pager",
    "pager.log": "pager-log",
    "pager.diff": "pager-diff",
    "pager.show": "pager-show",
    "pager.status": "pager-status",
    "core.sshCommand": "sshCommand",
    "core.gitProxy": "gitProxy",
    "core.editor": "editor",
    "sequence.editor": "sequence-editor",
    "core.askPass": "askPass",
    "gpg.program": "gpg",
    "gpg.ssh.program": "gpg-ssh",
    "diff.external": "diff-external",
    "filter.evil.clean": "filter-clean",
    "filter.evil.smudge": "filter-smudge",
    "filter.evil.process": "filter-process",
    "diff.evil.textconv": "textconv",
    "diff.evil.command": "diff-command",
    "merge.evil.driver": "merge-driver",
    "uploadpack.packObjectsHook": "packObjectsHook",
    "core.alternateRefsCommand": "alternateRefsCommand",
    "remote.evil.uploadpack": "uploadpack",
    "remote.evil.receivepack": "receivepack",
    "remote.origin.uploadpack": "origin-uploadpack",
}
ALIASES = ("status", "log", "diff", "apply", "show", "rev-parse", "worktree", "fetch", "lint", "st")
GITATTRIBUTES = "* filter=evil diff=evil merge=evil\n"


class Payloads:
    """Programs that leave a marker: `program(NAME)` is an executable that touches MARKERS/NAME
    (and, as a filter or textconv would, passes its input on). A path and nothing else, so that
    git runs it whether a setting is a shell command (core.pager) or a program (gpg.program)."""

    def __init__(self, directory: Path, markers: Path | None = None):
        self.bin = directory / "bin"
        self.markers = markers or directory / "markers"
        self.bin.mkdir(parents=True)
        self.markers.mkdir(exist_ok=True)

    def program(self, name: str) -> str:
        path = self.bin / name
        if not path.exists():
            passes_input = "cat\n" if name.startswith(("filter-", "textconv")) else ""
            path.write_text(f'#!/bin/sh\ntouch "{self.markers}/{name}"\n{passes_input}exit 0\n')
            path.chmod(0o755)
        return str(path)

    def fired(self) -> list[str]:
        return sorted(p.name for p in self.markers.iterdir())

    def clear(self) -> None:
        for marker in self.markers.iterdir():
            marker.unlink()


def plant(git_dir: Path, payloads: Payloads) -> None:
    """Every setting of PROGRAMS, aliases, a promisor remote, signing, and every hook (in the
    hooks directory and in one `core.hooksPath` names) in the repository whose git directory is GIT_DIR."""
    settings = {key: payloads.program(name) for key, name in PROGRAMS.items()}
    settings.update({f"alias.{name}": "!" + payloads.program(f"alias-{name}") for name in ALIASES})
    settings.update(
        {
            "credential.helper": "!" + payloads.program("credential"),
            "commit.gpgSign": "true",
            "tag.gpgSign": "true",
            "log.showSignature": "true",
            "filter.evil.required": "false",
            "core.hooksPath": str(git_dir / "planted-hooks"),
            "core.repositoryformatversion": "1",
            "extensions.partialClone": "evil",
            "remote.evil.url": "file:///nonexistent/evil.git",
            "remote.evil.promisor": "true",
        }
    )
    for key, value in settings.items():
        # `git config --file` reads no repository: the config is written, not run.
        subprocess.run(["git", "config", "--file", str(git_dir / "config"), key, value], check=True)
    for directory in (git_dir / "hooks", git_dir / "planted-hooks"):
        directory.mkdir(exist_ok=True)
        for name in HOOKS:
            hook = directory / name
            hook.write_text(f"#!/bin/sh\n{payloads.program('hook-' + name)}\n")
            hook.chmod(0o755)


def plain_git(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """git as a user's shell runs it: none of patchctl's hardening. With an identity of its own:
    a machine whose HOME has no git config (the README's test command in `env -i`) has none, and
    a commit would stop before its hooks and its signing run."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    for role in ("AUTHOR", "COMMITTER"):
        env[f"GIT_{role}_NAME"], env[f"GIT_{role}_EMAIL"] = "Dana Developer", "dana@example.invalid"
    return subprocess.run(["git", *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True)


def embedded_git_dir(directory: Path, payloads: Payloads, worktree: Path) -> None:
    """A git directory as a checkout can carry it, as plain files (HEAD, config, objects/, refs/),
    whose config says its work tree is WORKTREE and sets every hostile program."""
    (directory / "objects").mkdir(parents=True)
    (directory / "refs/heads").mkdir(parents=True)
    (directory / "HEAD").write_text("ref: refs/heads/main\n")
    (directory / "config").write_text(
        f"[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tworktree = {worktree}\n"
    )
    plant(directory, payloads)
