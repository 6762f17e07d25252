"""How an adopted patch directory is named, ordered and written: read from what the downstream
already has, so that `init` adds nothing its build would read.

* the order: the downstream's own list when it keeps one (a quilt `series` file in the
  directory, Electron's `.patches`, the `patches:` list of a conda-forge `meta.yaml` or
  rattler-build `recipe.yaml` beside or above the directory), else the file names (OpenWrt's
  quilt.mk reads `patches/series` when it exists: writing one would change the build, so none
  is ever written);
* the naming: the strictest of `strict`, `format-patch`, `openwrt`, `electron` that every
  file's name fits, else `any` (lint then accepts every name the directory has);
* the form: `electron` when the directory keeps Electron's `.patches` and every patch is
  exactly what Electron's exporter writes (zero commit, no `[PATCH]`, no stat, no signature,
  full index lines), so that export and Electron's CI check agree; else each patch's own.
"""

from __future__ import annotations

import posixpath
import re
import stat
from dataclasses import field
from pathlib import Path

from ..confined import Refused, Root, is_dotgit
from ..project.config import Series
from ..project.series_keys import PatchList
from ..records import dataclass
from ..series import patchlist
from ..series.naming import well_named

PATCH_SUFFIXES = (".patch", ".diff")
MAX_READ_BYTES = 16 * 1024 * 1024  # a recipe or a patch: far below this
_RECIPES = ("meta.yaml", "recipe.yaml")  # conda-build's, rattler-build's
_ELECTRON_MAIL_RE = re.compile(r"\AFrom 0{40} Mon Sep 17 00:00:00 2001\nFrom: .*\nDate: .*\nSubject: (?!\[PATCH)")
_INDEX_RE = re.compile(r"^index ([0-9a-f]+)\.\.", re.M)
_PATCHES_KEY_RE = re.compile(r"^\s*(?:-\s+)?patches:", re.M)


@dataclass
class Order:
    """An adopted directory's naming, list and form, and its patch names in order."""

    naming: str
    list_kind: str = "none"
    list_path: str | None = None  # repository-relative; None for `none`
    form: str = "own"
    names: list[str] = field(default_factory=list)
    found: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def implied_list(self) -> bool:
        """Whether `naming:` alone says where the order lives (no `list:` key to write)."""
        implied = {"quilt": ("quilt", "series"), "electron": ("electron", ".patches")}.get(self.naming)
        if implied is None:
            return self.list_kind == "none"
        return self.list_kind == implied[0] and posixpath.basename(self.list_path or "") == implied[1]


def detect(root: Path, directory: str) -> Order:
    """The naming, list and form of the patch directory DIRECTORY (repository-relative)."""
    if file_kind(root, f"{directory}/.patches") == "regular file":
        return _listed(root, directory, "electron", f"{directory}/.patches")
    if file_kind(root, f"{directory}/series") == "regular file":
        return _listed(root, directory, "quilt", f"{directory}/series")
    recipe = _recipe(root, directory)
    if recipe is not None:
        return _listed(root, directory, "conda-forge", recipe)
    names = [n for n in regular_files(root, directory) if n.endswith(PATCH_SUFFIXES)]
    order = Order(_naming(names), names=[n for n in names if n.endswith(".patch")])
    if not names:
        order.naming = "format-patch"
        order.notes.append(f"{directory}: no *.patch file (allow_empty: true until the first one)")
    elif any(not n.endswith(".patch") for n in names):
        order.notes.append(
            f"{directory}: {', '.join(n for n in names if not n.endswith('.patch'))}: not *.patch, which patchctl "
            "reads in name order without a list: not part of the series"
        )
    order.found.append(f"order: file names ({len(order.names)} patch(es)); no list file is written")
    return order


def _listed(root: Path, directory: str, kind: str, path: str) -> Order:
    series = _probe_series(root, directory, kind, path)
    listed = patchlist.read(series)
    assert listed is not None
    names = listed.names
    naming = "quilt" if kind == "quilt" else _naming(names)
    order = Order(naming, kind, path, names=names)
    order.found.append(f"order: {path} ({len(names)} patch(es), kept as the one list)")
    for line, problem in patchlist.problems(series):
        order.notes.append(f"{path}:{line}: {problem}")
    if kind == "electron" and names and _electron_canonical(root, directory, names):
        order.form = "electron"
        order.found.append("form: electron (every patch is what Electron's exporter writes: export writes them so too)")
    return order


def _naming(names: list[str]) -> str:
    """The strictest naming every name fits; `any` when none does."""
    if not names:
        return "format-patch"
    for naming in ("strict", "format-patch", "openwrt", "electron"):
        if all(well_named(naming, name) for name in names):
            if naming in ("strict", "format-patch") and not _unique_numbers(names, strict=naming == "strict"):
                continue
            return naming
    return "any"


def _unique_numbers(names: list[str], *, strict: bool) -> bool:
    numbers = [int(n[:4]) for n in names]
    if len(set(numbers)) != len(numbers) or 0 in numbers:
        return False
    return not strict or sorted(numbers) == list(range(1, len(numbers) + 1))


def _recipe(root: Path, directory: str) -> str | None:
    """The conda-forge recipe (`meta.yaml`, or rattler-build's `recipe.yaml`) beside DIRECTORY
    or above it whose `patches:` list names its files."""
    for folder in (directory, posixpath.dirname(directory)):
        for recipe in _RECIPES:
            path = posixpath.normpath(f"{folder}/{recipe}") if folder else recipe
            text = read_text(root, path) if file_kind(root, path) == "regular file" else None
            if text is not None and _PATCHES_KEY_RE.search(text):
                return path
    return None


def _electron_canonical(root: Path, directory: str, names: list[str]) -> bool:
    confined = Root(root)
    for name in names:
        try:
            data = confined.read_bytes(f"{directory}/{name}", MAX_READ_BYTES)
        except Refused:
            return False
        text = (data or b"").decode("utf-8", errors="replace")
        if not _ELECTRON_MAIL_RE.match(text) or "\ndiff --git " not in text or "\n-- \n" in text:
            return False
        if any(len(ids) != 40 for ids in _INDEX_RE.findall(text)) or not text.endswith("\n") or text.endswith("\n\n"):
            return False
    return True


def _probe_series(root: Path, directory: str, kind: str, path: str) -> Series:
    """A Series just good enough for `patchlist` to read DIRECTORY's list as export will."""
    return Series(
        name="adopted",
        upstream="",
        dir=root / directory,
        patch_list=PatchList(kind, root / path, path),
        where=path,
        root=root,
    )


def apply_order(layout, order: Order) -> None:
    """LAYOUT (an adopt `Layout`) named, listed and formed as ORDER found its directory."""
    layout.naming = order.naming
    if order.implied_list:
        layout.list_kind, layout.list_path = None, None
    else:  # `list: none` too, where the naming would imply a list file the directory lacks
        layout.list_kind, layout.list_path = order.list_kind, order.list_path
    layout.form = order.form
    layout.names = order.names


# ---------------------------------------------------------------- reading (through Root: no link, bounded)


def file_kind(root: Path, path: str) -> str | None:
    try:
        return Root(root).kind(path)
    except Refused:
        return None


def read_text(root: Path, path: str) -> str | None:
    data = Root(root).read_bytes(path, MAX_READ_BYTES)
    return None if data is None else data.decode("utf-8", errors="replace")


def regular_files(root: Path, directory: str) -> list[str]:
    confined = Root(root)
    names = [n for n in confined.listdir(directory) or [] if not is_dotgit(n)]
    return sorted(n for n in names if (info := confined.lstat(f"{directory}/{n}")) and stat.S_ISREG(info.st_mode))
