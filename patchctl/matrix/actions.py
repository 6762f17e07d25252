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

from typing import Any

from ..errors import ConfigError
from ..patterns import lazy
from ..project.yamlloc import KeyPath
from ..records import dataclass

ACTION_NAME = lazy(r"^[A-Za-z0-9][A-Za-z0-9-]*/[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$")
COMMIT_SHA = lazy(r"^[0-9a-f]{40}$")
RELEASE_VERSION = lazy(r"^v[0-9]+(\.[0-9]+){0,2}$")


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


# The `uses:` of patchctl's own action from inside patchctl's repository (its action.yml at the
# root); elsewhere, a published commit (action_source.py).
SELF_ACTION = "./"


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
