"""`patchctl init --from git-dir DIR`: a directory of format-patch files and a pin found in a
Makefile variable (`LLAMA_VERSION?=<sha>`) or in a version file; the place it was found becomes a
`pin_files` entry when it holds the full commit id."""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

from ..confined import Root
from ..errors import UsageError
from ..project.manifests.openwrt import is_package_makefile
from .conda_forge import detect_conda_forge
from .layout import (
    FULL_RE,
    HEX_RE,
    Layout,
    PinFileEntry,
    checked_pin,
    expand_pin,
    file_kind,
    inside_path,
    name_from_url,
    pin_pattern,
    read_text,
    regular_files,
    safe_name,
    unique,
)
from .openwrt import detect_openwrt
from .patchorder import apply_order
from .patchorder import detect as detect_order

# ------------------------------------------------------------------ git-dir

_PIN_VAR_RE = re.compile(
    r"^(?:export\s+|override\s+)?(?P<name>[A-Za-z_][A-Za-z0-9_]*(?:VERSION|COMMIT|SHA|REV|REVISION|PIN|REF|HASH)"
    r"[A-Za-z0-9_]*)\s*(?:\?=|:=|::=|=)\s*(?P<value>[^\s#]+)\s*(?:#.*)?$",
    re.IGNORECASE,
)
_URL_VAR_RE = re.compile(
    r"^(?:export\s+|override\s+)?(?P<name>[A-Za-z_][A-Za-z0-9_]*(?:REPO|URL|UPSTREAM|REMOTE|GIT)[A-Za-z0-9_]*)"
    r"\s*(?:\?=|:=|::=|=)\s*(?P<value>\S+)\s*$",
    re.IGNORECASE,
)


def _makefiles(root: Path, directory: str) -> list[str]:
    names = []
    for folder in unique([".", posixpath.dirname(directory) or "."]):
        for name in regular_files(root, folder):
            if name in ("Makefile", "GNUmakefile", "makefile") or name.endswith(".mk"):
                names.append(posixpath.normpath(f"{folder}/{name}"))
    return names


def _version_files(root: Path, directory: str) -> list[str]:
    names = []
    for folder in unique([".", posixpath.dirname(directory) or "."]):
        for name in regular_files(root, folder):
            if re.fullmatch(r"[A-Za-z0-9_.-]*(VERSION|COMMIT|REV|PIN)[A-Za-z0-9_.-]*", name):
                info = Root(root).lstat(f"{folder}/{name}")
                if info is not None and info.st_size <= 200:
                    names.append(posixpath.normpath(f"{folder}/{name}"))
    return names


def _manifest_beside(root: Path, directory: str, url: str | None, pin: str | None, name: str | None) -> Layout | None:
    """The layout of an OpenWrt package or a conda-forge recipe whose patches DIRECTORY holds:
    their Makefile or recipe names the release (a PKG_VERSION is no commit id to pin)."""
    beside = posixpath.dirname(directory) or "."
    makefile = read_text(root, posixpath.normpath(f"{beside}/Makefile"))
    if posixpath.basename(directory) == "patches" and makefile is not None and is_package_makefile(makefile):
        layout = detect_openwrt(root, beside, url, pin, name)
    elif any(file_kind(root, f"{beside}/{recipe}") == "regular file" for recipe in ("meta.yaml", "recipe.yaml")):
        layout = detect_conda_forge(root, beside, url, pin, name)
        if layout.dir != directory:
            return None
    else:
        return None
    kind = "OpenWrt package Makefile" if layout.manifests[0].format == "openwrt" else "conda-forge recipe"
    layout.found.insert(0, f"{directory} belongs to the {kind} {layout.manifests[0].path}: read as its layout")
    return layout


def detect_git_dir(root: Path, directory: str, url: str | None, pin: str | None, name: str | None) -> Layout:
    directory = inside_path(root, directory.strip("/"), "--from git-dir DIR")
    if file_kind(root, directory) != "directory":
        raise UsageError(f"{directory}: no such directory (--from git-dir DIR)")
    if (manifest := _manifest_beside(root, directory, url, pin, name)) is not None:
        return manifest
    found: list[str] = []
    notes: list[str] = []
    pin_files: list[PinFileEntry] = []
    candidates: list[tuple[str, int, str, str, str]] = []  # file, line, variable, value, prefix
    url_found: tuple[str, str] | None = None
    for makefile in _makefiles(root, directory):
        text = read_text(root, makefile) or ""
        for number, line in enumerate(text.splitlines(), 1):
            if match := _PIN_VAR_RE.match(line):
                candidates.append((makefile, number, match["name"], match["value"], line[: match.start("value")]))
            elif (match := _URL_VAR_RE.match(line)) and url_found is None:
                if re.match(r"^(https?://|git@|ssh://|git://|file://)", match["value"]):
                    url_found = (match["value"], f"{makefile}:{number} ({match['name']})")
            if url_found is None and (clone := re.search(r"\bgit clone\s+(?:-\S+\s+)*(\S+://\S+|git@\S+)", line)):
                url_found = (clone.group(1), f"{makefile}:{number} (git clone)")
    for version_file in _version_files(root, directory):
        words = (read_text(root, version_file) or "").split()
        if len(words) == 1:
            candidates.append((version_file, 1, "", words[0], ""))
    hex_first = sorted(candidates, key=lambda c: (not FULL_RE.match(c[3]), not HEX_RE.match(c[3])))
    if url is None:
        if url_found is None:
            raise UsageError(f"no upstream URL found in the Makefiles beside {directory}: give --upstream-url")
        url = url_found[0]
        found.append(f"upstream: {url} ({url_found[1]})")
    else:
        found.append(f"upstream: {url} (--upstream-url)")
    if pin is None:
        if not hex_first:
            raise UsageError(
                "no pin found (a Makefile variable like LLAMA_VERSION?=<sha> or a version file): give --pin"
            )
        file, number, variable, value, prefix = hex_first[0]
        where = f"{file}:{number}" + (f" ({variable})" if variable else "")
        resolved = expand_pin(value, url, root, where)
        found.append(f"pin: {resolved} ({where})")
        if (pattern := pin_pattern(prefix, value, resolved)) is not None:
            pin_files.append(PinFileEntry(file, pattern + ("" if prefix else "$")))
            short = "" if value == resolved else f" (the pin abbreviated to {len(value)})"
            found.append(f"pin file: {where}{short}")
        else:
            notes.append(f"{where}: holds {value!r}, not the full commit id: no pin_files entry")
        for other in hex_first[1:]:
            notes.append(f"{other[0]}:{other[1]}: {other[2] or 'value'} {other[3]!r} also looks like a pin: not used")
        pin = resolved
    else:
        pin = checked_pin(pin, url, root)
        found.append(f"pin: {pin} (--pin)")
    upstream = name or name_from_url(url)
    series = posixpath.basename(directory)
    if series in ("patches", "patch"):
        series = posixpath.basename(posixpath.dirname(directory)) or upstream
    order = detect_order(root, directory)
    layout = Layout(safe_name(upstream), url, pin, safe_name(series), directory, order.naming, "master", pin_files)
    layout.found = found + [f"patches: {directory}", f"naming: {order.naming}", *order.found]
    layout.unmapped = notes + order.notes
    apply_order(layout, order)
    layout.allow_empty = not order.names
    return layout
