"""A YAML document with the line of every value in it, and the bounds a file is read within: what
`patchctl.project.yamlloc` loads and `patchctl.project.yamlparse` builds, without PyYAML."""

from __future__ import annotations

from dataclasses import field
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..records import dataclass

KeyPath = tuple[Any, ...]


def format_keypath(keypath: KeyPath) -> str:
    out = ""
    for part in keypath:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<root>"


@dataclass
class LocatedDocument:
    """A parsed YAML document plus the line of every value in it."""

    path: Path
    data: Any
    lines: dict[KeyPath, int] = field(default_factory=dict)

    def line_of(self, keypath: KeyPath) -> int:
        """The line of KEYPATH, or of its nearest ancestor that exists."""
        keypath = tuple(keypath)
        while keypath and keypath not in self.lines:
            keypath = keypath[:-1]
        return self.lines.get(keypath, 1)

    def error(self, keypath: KeyPath, message: str) -> ConfigError:
        return ConfigError(f"{self.path}:{self.line_of(keypath)}: {format_keypath(keypath)}: {message}")


# Hostile-input bounds, far above any real matrix or LocalAI index (hundreds of KiB, depth < 12,
# tens of thousands of values). libyaml's composer recurses in C (deep nesting crashes the
# process) and aliases share nodes the builder expands (a few hundred bytes can stand for
# billions of values), so depth and aliases are checked on the event stream before composing,
# and the expanded size while building.
MAX_BYTES = 16 * 1024 * 1024
MAX_DEPTH = 64
MAX_ALIASES = 10_000
MAX_VALUES = 1_000_000
