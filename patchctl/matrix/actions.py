"""The third-party GitHub Actions the rendered workflows use, pinned to full commit ids.

    actions:
      actions/checkout: {sha: 3d3c42e5aac5ba805825da76410c181273ba90b1, version: v7.0.1}

A tag can be moved, a commit id cannot, so every `uses:` is rendered as
`OWNER/REPO@SHA # VERSION` (the comment is what Dependabot and zizmor read back). The
table in matrix.yaml overrides or extends the defaults below; a template that uses an
action missing from both is a configuration error, never an unpinned reference.

The defaults are node24 releases (GitHub removed the node20 runtime on 2026-09-23); each
commit id is the release tag's commit, cross-checked in several public repositories.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .. import git
from ..errors import ConfigError
from ..project.yamlloc import KeyPath

ACTION_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]*/[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$")
COMMIT_SHA = re.compile(r"^[0-9a-f]{40}$")
RELEASE_VERSION = re.compile(r"^v[0-9]+(\.[0-9]+){0,2}$")


@dataclass(frozen=True)
class ActionPin:
    name: str  # owner/repo, or owner/repo/path for an action in a subdirectory
    sha: str
    version: str

    def reference(self) -> str:
        """What goes after `uses:`: the commit id, with the release it is as a comment."""
        return f"{self.name}@{self.sha} # {self.version}"


DEFAULT_ACTIONS: dict[str, ActionPin] = {
    pin.name: pin
    for pin in (
        ActionPin("actions/checkout", "3d3c42e5aac5ba805825da76410c181273ba90b1", "v7.0.1"),
        ActionPin("actions/setup-python", "5fda3b95a4ea91299a34e894583c3862153e4b97", "v7.0.0"),
        ActionPin("actions/upload-artifact", "bbbca2ddaa5d8feaa63e36b76fdaad77386f024f", "v7.0.0"),
        ActionPin("actions/download-artifact", "3e5f45b2cfb9172054b4087a40e8e0b5a5461e7c", "v8.0.1"),
        ActionPin("actions/cache", "27d5ce7f107fe9357f9df03efb73ab90386fccae", "v5.0.5"),
        # The same release's restore/save halves: a cache saved again when its contents change.
        ActionPin("actions/cache/restore", "27d5ce7f107fe9357f9df03efb73ab90386fccae", "v5.0.5"),
        ActionPin("actions/cache/save", "27d5ce7f107fe9357f9df03efb73ab90386fccae", "v5.0.5"),
        ActionPin("peter-evans/create-pull-request", "5f6978faf089d4d20b00c7766989d076bb2fc7f1", "v8.1.1"),
        ActionPin("docker/metadata-action", "dc802804100637a589fabce1cb79ff13a1411302", "v6.2.0"),
        ActionPin("docker/setup-buildx-action", "37fe631027851001ddb9b187196cc803df7f5f0e", "v4.3.0"),
        ActionPin("docker/login-action", "4907a6ddec9925e35a0a9e82d7399ccc52663121", "v4.1.0"),
        ActionPin("docker/build-push-action", "53b7df96c91f9c12dcc8a07bcb9ccacbed38856a", "v7.3.0"),
        # pin-sync's token when matrix.yaml names a GitHub App (workflows: pin_sync: github_app:).
        ActionPin("actions/create-github-app-token", "bcd2ba49218906704ab6c1aa796996da409d3eb1", "v3.2.0"),
    )
}


# The `uses:` of patchctl's own action from inside patchctl's repository (its action.yml at the root).
SELF_ACTION = "./"
# patchctl's repository on GitHub, as pyproject.toml's project URLs name it: the published action.
PUBLISHED_ACTION = "OWNER/patchctl"


def is_patchctl_repository(root: Path) -> bool:
    """ROOT is patchctl's own repository: its action.yml is patchctl's, beside patchctl's pyproject.toml."""
    try:
        action = yaml.safe_load((root / "action.yml").read_text(encoding="utf-8"))
        project = (root / "pyproject.toml").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return False
    own_action = isinstance(action, dict) and action.get("name") == "patchctl" and "runs" in action
    return own_action and re.search(r'^name\s*=\s*"patchctl"\s*$', project, re.MULTILINE) is not None


def patchctl_action(root: Path, configured: str | None) -> str:
    """The `uses:` of patchctl's action in ROOT's rendered workflows: matrix.yaml's `workflows: action:`,
    else `./` in patchctl's own repository. Anywhere else it must be set: there is no `./` to call."""
    if configured is not None:
        return configured
    if is_patchctl_repository(root):
        return SELF_ACTION
    raise ConfigError(
        f"matrix.yaml: workflows: action: not set, and this repository has no action.yml of patchctl's to call "
        f"as {SELF_ACTION}: set it to {PUBLISHED_ACTION}@COMMIT, the patchctl release the workflows run "
        "(`patchctl init` writes it)"
    )


def installed_commit() -> tuple[str, str] | None:
    """(OWNER/REPO, commit) of the patchctl running, when known: pip's record of a VCS install
    (`pip install git+https://github.com/OWNER/patchctl@COMMIT`, PEP 610), else the commit of
    the git checkout it runs from (an editable install). None for a wheel from an index."""
    import importlib.metadata  # only `init` asks: keep it off the start-up of the other commands

    try:
        record = json.loads(importlib.metadata.distribution("patchctl").read_text("direct_url.json") or "{}")
    except (importlib.metadata.PackageNotFoundError, json.JSONDecodeError):
        record = {}
    vcs = record.get("vcs_info") or {}
    if vcs.get("vcs") == "git" and COMMIT_SHA.match(str(vcs.get("commit_id", ""))):
        match = re.match(
            r"^(?:https://|ssh://git@|git@)github\.com[/:]([^/]+/[^/]+?)(?:\.git)?/?$", record.get("url", "")
        )
        return (match.group(1) if match else PUBLISHED_ACTION), vcs["commit_id"]
    checkout = Path(__file__).resolve().parents[2]
    if not is_patchctl_repository(checkout):
        return None
    head = git.run(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], checkout, check=False)
    commit = head.stdout.strip() if head.ok else ""
    return (PUBLISHED_ACTION, commit) if COMMIT_SHA.match(commit) else None


def parse_actions(reader: Any, value: Any, keypath: KeyPath) -> dict[str, ActionPin]:
    """The `actions:` table, validated by READER (a schema.Section); defaults filled in."""
    if not isinstance(value, dict):
        raise reader.error(keypath, "must be a mapping of OWNER/REPO to {sha, version}")
    pins = dict(DEFAULT_ACTIONS)
    for name, item in value.items():
        where = keypath + (name,)
        if not isinstance(name, str) or not ACTION_NAME.match(name):
            raise reader.error(where, f"invalid action name {name!r} (expected OWNER/REPO)")
        reader.mapping(item, where, ("sha", "version"), ("sha", "version"))
        sha = item["sha"]
        if not isinstance(sha, str) or not COMMIT_SHA.match(sha):
            raise reader.error(where + ("sha",), f"must be a full 40-character lowercase commit id, got {sha!r}")
        version = item["version"]
        if not isinstance(version, str) or not RELEASE_VERSION.match(version):
            raise reader.error(where + ("version",), f"must be a release tag like v7.0.1, got {version!r}")
        pins[name] = ActionPin(name, sha, version)
    return pins


class UnpinnedAction(ConfigError):
    pass


def resolver(pins: dict[str, ActionPin]):
    """The `action(NAME)` function templates call: NAME's pinned `uses:` value."""

    def action(name: str) -> str:
        pin = pins.get(name)
        if pin is None:
            raise UnpinnedAction(
                f"action {name!r} has no pinned commit: add it to matrix.yaml's actions: table "
                f"(known: {', '.join(sorted(pins))})"
            )
        return pin.reference()

    return action


def installed_action() -> str | None:
    """OWNER/patchctl@COMMIT of the patchctl running (what `init` writes); None: unknown."""
    found = installed_commit()
    return f"{found[0]}@{found[1]}" if found else None
