"""`patchctl init --from quilt`: a `series` file (default `debian/patches/series`); the upstream is given."""

from __future__ import annotations

import re
from pathlib import Path

from ..errors import UsageError
from .layout import Layout, checked_pin, file_kind, inside_path, read_text, safe_name

# ------------------------------------------------------------------ quilt


def detect_quilt(root: Path, directory: str | None, url: str | None, pin: str | None, name: str | None) -> Layout:
    if directory is None:
        candidates = ["debian/patches", "patches"]
        directory = next((c for c in candidates if file_kind(root, f"{c}/series") == "regular file"), "debian/patches")
    directory = inside_path(root, directory.strip("/"), "--from quilt DIR")
    series_text = read_text(root, f"{directory}/series")
    if series_text is None:
        raise UsageError(f"{directory}/series: no such file (give the quilt directory: --from quilt DIR)")
    if url is None or pin is None:
        raise UsageError(
            "--from quilt needs --upstream-url and --pin: the series applies to the package's upstream tree "
            "(a git repository of the original sources, e.g. one commit made from the orig tarball)"
        )
    entries = []
    notes = []
    for words in quilt_lines(series_text):
        if len(words) > 1:
            notes.append(f"{directory}/series: {words[0]} has quilt options {' '.join(words[1:])!r}: ignored")
        if words[1:] and words[1:] != ["-p1"]:
            notes.append(f"{directory}/series: {words[0]}: patchctl applies every patch with -p1")
        entries.append(words[0])
        if file_kind(root, f"{directory}/{words[0]}") != "regular file":
            notes.append(f"{directory}/series: {words[0]} is listed but missing")
    package = name or _debian_package(root) or root.resolve().name
    upstream = safe_name(package)
    layout = Layout(upstream, url, checked_pin(pin, url, root), upstream, directory, "quilt")
    layout.found = [
        f"series: {directory}/series ({len(entries)} patch(es))",
        f"upstream: {url} (--upstream-url)",
        f"pin: {layout.pin} (--pin)",
        "naming: quilt",
    ]
    layout.unmapped = notes
    layout.allow_empty = not entries
    return layout


def quilt_lines(text: str) -> list[list[str]]:
    """The words of each line of a quilt `series` file (a patch name, then its options), comments dropped."""
    return [words for line in text.splitlines() if (words := line.split("#", 1)[0].split())]


def _debian_package(root: Path) -> str | None:
    changelog = read_text(root, "debian/changelog")
    if changelog is not None:
        first = changelog.split("\n", 1)[0]
        match = re.match(r"^([a-z0-9][a-z0-9.+-]+) \(", first)
        if match:
            return match.group(1)
    return None
