"""`patchctl init --from electron [DIR]`: a patch directory laid out as Electron's `patches/`:
`DIR/.patches` lists the patches in order, `patches/config.json` says which repository each
patch directory is applied to. The upstream (a repository of that name: give its URL and
commit, as Electron's DEPS pins it) is given; the series is named after the directory."""

from __future__ import annotations

import json
import posixpath
from pathlib import Path

from ..confined import Refused, Root
from ..errors import UsageError
from .layout import Layout, checked_pin, file_kind, inside_path, read_text, safe_name
from .patchorder import apply_order
from .patchorder import detect as detect_order

CONFIG_JSON = "config.json"


def detect_electron(root: Path, directory: str, url: str | None, pin: str | None, name: str | None) -> Layout:
    directory = inside_path(root, directory.strip("/"), "--from electron DIR")
    if file_kind(root, f"{directory}/.patches") != "regular file":
        dirs = _patch_dirs(root, directory)
        hint = f" (patch directories: {', '.join(dirs)})" if dirs else ""
        raise UsageError(f"{directory}/.patches: no such file: give the patch directory, --from electron DIR{hint}")
    if url is None or pin is None:
        raise UsageError(
            "--from electron needs --upstream-url and --pin: the repository the patches apply to and its commit "
            "(Electron's DEPS pins it)"
        )
    found, notes = [], []
    repo = _repo_of(root, directory, found, notes)
    series = posixpath.basename(directory)
    upstream = safe_name(name or (posixpath.basename(repo) if repo and repo != "src" else series))
    order = detect_order(root, directory)
    layout = Layout(upstream, url, checked_pin(pin, url, root), safe_name(series), directory, order.naming)
    layout.found = [
        *found,
        f"upstream: {url} (--upstream-url)",
        f"pin: {layout.pin} (--pin)",
        f"naming: {order.naming}",
        *order.found,
    ]
    layout.unmapped = notes + order.notes
    apply_order(layout, order)
    layout.allow_empty = not order.names
    return layout


def _repo_of(root: Path, directory: str, found: list[str], notes: list[str]) -> str | None:
    """The repository `config.json` (beside DIRECTORY's parent) applies DIRECTORY to, or None."""
    path = posixpath.normpath(f"{posixpath.dirname(directory) or '.'}/{CONFIG_JSON}")
    text = read_text(root, path)
    if text is None:
        notes.append(f"{path}: no such file: which repository {directory} patches is not known")
        return None
    try:
        entries = json.loads(text)
    except ValueError as exc:
        notes.append(f"{path}: not JSON ({exc}): ignored")
        return None
    for number, entry in enumerate(entries if isinstance(entries, list) else []):
        patch_dir = entry.get("patch_dir") if isinstance(entry, dict) else None
        if isinstance(patch_dir, str) and (patch_dir == directory or patch_dir.endswith("/" + directory)):
            repo = entry.get("repo")
            found.append(f"{path}: entry {number + 1}: {directory} is applied to {repo}")
            return repo if isinstance(repo, str) else None
    notes.append(f"{path}: no entry names {directory}")
    return None


def _patch_dirs(root: Path, directory: str) -> list[str]:
    try:
        names = Root(root).listdir(directory) or []
    except Refused:
        return []
    return sorted(f"{directory}/{n}" for n in names if file_kind(root, f"{directory}/{n}/.patches") == "regular file")
