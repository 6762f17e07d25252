"""Moving a pin: the edits to matrix.yaml and the pin_files.

Edits are made on the raw text, never by re-dumping YAML: only the 40-hex value on the
`pin:` line changes, so comments, quoting, order and every other byte stay as they were. A
pin_files match that abbreviates the pin (at least 7 hex digits) is moved to the new pin
abbreviated as long. An upstream's `version:` and manifests are `patchctl.loop.versionpin`'s.
They are written together with the rest of a pin update through `patchctl.state.journal`.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..confined import Root
from ..errors import ConfigError
from ..project.config import Config, Upstream
from ..project.manifests import is_abbreviation
from ..project.yamlloc import MAX_BYTES as MAX_PIN_FILE_BYTES  # matrix.yaml's own bound
from ..state.journal import FileChange

__all__ = ["FileChange", "moved_upstreams", "pin_changes", "read_pin_file"]
_PIN_VALUE_RE = re.compile(r"(?P<quote>[\"']?)(?P<pin>[0-9a-f]{40})(?P=quote)")


def moved_upstreams(config: Config, upstream: str) -> list[Upstream]:
    """UPSTREAM and every upstream that tracks it, directly or through another tracker."""
    moved = [config.get_upstream(upstream)]
    frontier = [upstream]
    while frontier:
        current = frontier.pop()
        for tracker in config.trackers_of(current):
            if tracker not in moved:
                moved.append(tracker)
                frontier.append(tracker.name)
    return moved


def pin_changes(config: Config, upstream: str, new_pin: str) -> list[FileChange]:
    """The edits that move UPSTREAM (and its trackers) to NEW_PIN: matrix.yaml's `pin:`
    values and every pin_files match. Files that would not change are left out."""
    texts: dict[Path, str] = {}

    def text_of(path: Path) -> str:
        if path not in texts:
            data = read_pin_file(config, path)
            if data is None:
                raise ConfigError(f"{path}: pin file does not exist")
            texts[path] = data.decode("utf-8", errors="surrogateescape")
        return texts[path]

    for moved in moved_upstreams(config, upstream):
        keypath = moved.pin_keypath or ("upstreams", moved.name, "pin")
        line_no = config.doc.line_of(keypath)
        lines = text_of(config.path).splitlines(keepends=True)
        line = lines[line_no - 1]
        colon = line.find("pin:")
        found = _PIN_VALUE_RE.search(line, colon + 4 if colon >= 0 else 0)
        if found is None or found["pin"] != moved.pin:
            raise config.error(keypath, "cannot find the pin value on its line to update it")
        lines[line_no - 1] = line[: found.start("pin")] + new_pin + line[found.end("pin") :]
        texts[config.path] = "".join(lines)
        for entry in moved.pin_files:
            path = config.root / entry.path
            text = text_of(path)
            matches = list(entry.pattern.finditer(text))
            if not matches:
                raise ConfigError(
                    f"{entry.path}: pin_files pattern of upstream {moved.name} matches nothing: {entry.pattern.pattern}"
                )
            pieces, last = [], 0
            for match in matches:
                # An abbreviated pin (Ollama's `FETCH_HEAD=ec98e2002`) stays as long as it was.
                short = is_abbreviation(match.group("pin"), moved.pin)
                pieces += [text[last : match.start("pin")], new_pin[: len(match.group("pin"))] if short else new_pin]
                last = match.end("pin")
            texts[path] = "".join(pieces) + text[last:]
    changes = []
    for path, text in texts.items():
        data = text.encode("utf-8", errors="surrogateescape")
        if data != read_pin_file(config, path):
            changes.append(FileChange(path, data))
    return changes


def read_pin_file(config: Config, path: Path) -> bytes | None:
    """The bytes of PATH, matrix.yaml or a pin file of CONFIG's repository, or None when it does
    not exist; read through `confined.Root` (a link on the way or at PATH, a FIFO, a device is
    refused in one line, exit 2, and never read), at most MAX_PIN_FILE_BYTES."""
    where = Root(config.path.parent) if path == config.path else Root(config.root)
    return where.read_bytes(path, MAX_PIN_FILE_BYTES)
