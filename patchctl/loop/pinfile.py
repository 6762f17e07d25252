"""Moving a pin: the edits to matrix.yaml and the pin_files.

Edits are made on the raw text, never by re-dumping YAML: only the 40-hex value on the
`pin:` line changes, so comments, quoting, order and every other byte stay as they were. A
pin_files match that abbreviates the pin (at least 7 hex digits) is moved to the new pin
abbreviated as long. An upstream's `version:` and manifests are `patchctl.loop.versionpin`'s.
They are written together with the rest of a pin update through `patchctl.state.journal`.
"""

from __future__ import annotations

from pathlib import Path

from ..confined import Root
from ..errors import ConfigError
from ..patterns import lazy
from ..project.config import Config, Upstream
from ..project.upstream_checks import is_sdist_url
from ..project.yamlloc import MAX_BYTES as MAX_PIN_FILE_BYTES  # matrix.yaml's own bound
from ..state.journal import FileChange

__all__ = ["FileChange", "ci_pin_left_behind", "moved_upstreams", "pin_changes", "read_pin_file"]
_PIN_VALUE_RE = lazy(r"(?P<quote>[\"']?)(?P<pin>[0-9a-f]{40})(?P=quote)")


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


def pin_keypaths(upstream: Upstream) -> list[tuple[str, ...]]:
    """Every `pin:` of UPSTREAM in matrix.yaml, whichever source is followed: its own and its
    `ci:` block's (when that block states one). They name one revision, so they move together:
    a pin left behind is a stale series under the other source. One exception: a commit of a
    `pypi-sdist:` source is that source's own (built from a release's archive), which no other
    repository has: following one, the `ci:` block's pin stays (ci_pin_left_behind says so)."""
    own = ("upstreams", upstream.name, "pin")
    found = [own]
    if upstream.ci is not None and upstream.ci.pin_keypath != own and ci_pin_left_behind(upstream) is None:
        found.append(upstream.ci.pin_keypath)
    return found


def ci_pin_left_behind(upstream: Upstream) -> str | None:
    """Why UPSTREAM's `ci:` pin does not move with the followed one, or None when it does."""
    if upstream.ci is None or upstream.ci.pin_keypath == ("upstreams", upstream.name, "pin"):
        return None
    if not is_sdist_url(upstream.url) or upstream.url == upstream.ci.url:
        return None
    return (
        f"upstream {upstream.name}: its ci: pin stays at {upstream.ci.pin[:12]}: the commits of {upstream.url} "
        f"are built from its sdists, and {upstream.ci.url} has none of them; move it there with "
        f"`patchctl --upstream-source ci pin-sync {upstream.name} --to COMMIT` (the commit that release vendors)"
    )


def _value_at(config: Config, keypath: tuple[str, ...]) -> object:
    value: object = config.doc.data
    for key in keypath:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def pin_changes(config: Config, upstream: str, new_pin: str) -> list[FileChange]:
    """The edits that move UPSTREAM (and its trackers) to NEW_PIN: every `pin:` value of theirs
    in matrix.yaml (the `ci:` block's too, under either source) and every pin_files match.
    Files that would not change are left out."""
    texts: dict[Path, str] = {}

    def text_of(path: Path) -> str:
        if path not in texts:
            data = read_pin_file(config, path)
            if data is None:
                raise ConfigError(f"{path}: pin file does not exist")
            texts[path] = data.decode("utf-8", errors="surrogateescape")
        return texts[path]

    for moved in moved_upstreams(config, upstream):
        for keypath in pin_keypaths(moved):
            line_no = config.doc.line_of(keypath)
            lines = text_of(config.path).splitlines(keepends=True)
            line = lines[line_no - 1]
            colon = line.find("pin:")
            found = _PIN_VALUE_RE.search(line, colon + 4 if colon >= 0 else 0)
            if found is None or found["pin"] != _value_at(config, keypath):
                raise config.error(keypath, "cannot find the pin value on its line to update it")
            lines[line_no - 1] = line[: found.start("pin")] + new_pin + line[found.end("pin") :]
            texts[config.path] = "".join(lines)
        for entry in moved.pin_files:
            # Here: the manifests package is paid only where pin_files name a file.
            from ..project.manifests import is_abbreviation

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
