"""The files patchctl writes in a repository: the only ones a journal may name.

Recovery (`patchctl.state.journal`) renames and deletes what a journal names, before matrix.yaml
is loaded (a killed pin-sync may have left it half-written). So the set is read here from
the raw YAML of each version of matrix.yaml the journal involves, without validating it:

    matrix.yaml itself                 (pin-sync moves the pin; init writes it)
    series.NAME.dir                    (export, pin-sync; default patches/NAME)
    series.NAME.list.path              (export, pin-sync: the downstream's own patch list)
    series.NAME.vendor[].to            (vendor, pin-sync)
    upstreams.NAME.pin_files[].path    (pin-sync)
    upstreams.NAME.manifests[].path    (pin-sync: an OpenWrt Makefile, a conda-forge recipe, a DEPS file)
    index.output, .github/workflows/   (matrix render)
    templates/, .pre-commit-config.yaml (init)

Whatever matrix.yaml says, a path with an empty, `.` or `..` component, a `.git` component in
any spelling git refuses, or a first component `.patchctl` is never managed.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path, PurePosixPath
from typing import Any

from ..confined.names import invalid_path_reason
from ..confined.regular import NotRegular, TooLarge, read_regular
from ..errors import ConfigError
from ..project import yamlloc
from ..records import dataclass

# The outputs of `matrix render` (patchctl.matrix.render.WORKFLOWS_DIR) and `init`
# (patchctl.adopt.layout): named here so that recovery does not import Jinja or init's planner.
WORKFLOWS_DIR = ".github/workflows"
TEMPLATES_DIR = "templates"
PRE_COMMIT_NAME = ".pre-commit-config.yaml"
DEFAULT_INDEX_OUTPUT = "backend/index.yaml"
_MAX_CONFIG_BYTES = yamlloc.MAX_BYTES


@dataclass(frozen=True)
class Managed:
    files: frozenset[str]  # repository-relative, '/'-separated
    dirs: frozenset[str]  # every file under them

    def why_not(self, relative: str) -> str | None:
        """Why RELATIVE (repository-relative) is not a file patchctl writes, or None when it is."""
        reason = unsafe(relative)
        if reason is not None:
            return reason
        if relative in self.files or any(relative.startswith(d + "/") for d in self.dirs):
            return None
        return (
            f"{relative} is not a file patchctl writes (matrix.yaml, a series, a pin file, a vendored copy, a workflow)"
        )


def unsafe(relative: str) -> str | None:
    """Why RELATIVE can never be managed, whatever matrix.yaml says; None when it can."""
    if "\0" in relative:
        return f"{relative!r} holds a NUL byte"
    reason = invalid_path_reason(relative)
    if reason is not None:
        return reason
    if relative.split("/", 1)[0] == ".patchctl":
        return f"{relative} is inside .patchctl"
    return None


def managed_paths(config_file: Path, versions: Iterable[Path | bytes] = ()) -> Managed:
    """What CONFIG_FILE (matrix.yaml, in the repository's root) and its other VERSIONS (the
    staged and backup copies a journal names, or the new text being committed) make patchctl
    write. A version that is not readable YAML adds nothing: its own name is still managed."""
    files = {Path(config_file).name, PRE_COMMIT_NAME}
    dirs = {WORKFLOWS_DIR, TEMPLATES_DIR}
    for config in (Path(config_file), *versions):
        data = _raw(config, Path(config_file))
        if data is None:
            continue
        series = data.get("series")
        for name, entry in series.items() if isinstance(series, dict) else []:
            entry = entry if isinstance(entry, dict) else {}
            dirs.add(_relative(entry.get("dir", f"patches/{name}")))
            if isinstance(entry.get("list"), dict):
                files.add(_relative(entry["list"].get("path")))
            for copy in _list(entry.get("vendor")):
                dirs.add(_relative(copy.get("to")))
        upstreams = data.get("upstreams")
        for entry in upstreams.values() if isinstance(upstreams, dict) else []:
            for key in ("pin_files", "manifests"):
                for pin_file in _list(entry.get(key) if isinstance(entry, dict) else None):
                    files.add(_relative(pin_file.get("path")))
        index = data.get("index")
        if isinstance(index, dict):
            files.add(_relative(index.get("output", DEFAULT_INDEX_OUTPUT)))
    root = Path(config_file).parent
    files, dirs = files - {""}, dirs - {""}
    # A writer may name a path by where its links lead (`.github/workflows -> ci/workflows`,
    # inside the repository): that spelling is the same file.
    return Managed(frozenset(files | _resolved(root, files)), frozenset(dirs | _resolved(root, dirs)))


def _resolved(root: Path, relatives: set[str]) -> set[str]:
    real_root = os.path.realpath(root)
    found = set()
    for relative in relatives:
        real = os.path.realpath(os.path.join(real_root, relative))
        if real.startswith(real_root + os.sep):
            candidate = Path(real).relative_to(real_root).as_posix()
            if unsafe(candidate) is None:
                found.add(candidate)
    return found


def _raw(config: Path | bytes, name: Path) -> dict[str, Any] | None:
    try:
        data = config if isinstance(config, bytes) else read_regular(config, _MAX_CONFIG_BYTES)
        if data is None or len(data) > _MAX_CONFIG_BYTES:
            return None
        parsed = yamlloc.parse(data.decode("utf-8"), name).data
    except (NotRegular, TooLarge, OSError, UnicodeDecodeError, ConfigError, RecursionError):
        return None
    return parsed if isinstance(parsed, dict) else None


def _list(value: object) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _relative(value: object) -> str:
    """VALUE as a repository-relative path ('' when it is not a usable one)."""
    if not isinstance(value, str) or not value.strip("/") or value.startswith("/"):
        return ""
    text = PurePosixPath(value.strip("/")).as_posix()
    return "" if unsafe(text) is not None else text
