"""Three keys of a series that say how the downstream keeps its patches, so that patchctl keeps
them the same way: `naming:` (how files are named), `list:` (where the order lives) and
`form:` (how export writes a file).

* `list:` names the downstream's own patch list, read and edited in place: a quilt `series`
  file (wherever it is), Electron's `.patches`, the `patches:` list of a conda-forge
  `meta.yaml`, or `none` (name order: OpenWrt, a directory of format-patch files), where no
  list file is written at all. Its default follows `naming:` (`quilt`: DIR/series,
  `electron`: DIR/.patches, any other: `none`), so configurations written before it mean
  what they meant.
* `form:` is `own` (default: every patch keeps its own form, a mail stays a mail, a
  header-less diff stays header-less), a named preset (`electron`: what Electron's
  `script/lib/git.py` writes), or `{format_patch: [OPTIONS...]}`: export writes every patch
  exactly as `git format-patch OPTIONS` does, so a downstream that regenerates its patches
  canonically (and checks that in CI) and patchctl agree on every byte. Only the options
  below are accepted: none reads a file, runs a program or writes anywhere.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..patterns import lazy
from ..records import dataclass
from .validation import Validator, kind
from .yamlloc import KeyPath, format_keypath

Config = Any  # project.config's Config (which imports this module): the one reading matrix.yaml
NAMINGS = ("format-patch", "strict", "quilt", "openwrt", "electron", "any")
LIST_KINDS = ("quilt", "electron", "conda-forge", "none")
# The list file a kind reads when `list:` gives no path (relative to the series directory).
DEFAULT_LIST_FILE = {"quilt": "series", "electron": ".patches"}
# The list `naming:` implies when the series has no `list:` key.
NAMING_LIST = {"quilt": "quilt", "electron": "electron"}
FORMS = ("own", "electron")

# git's built-in diff drivers (userdiff.c): an attribute `PATTERN diff=DRIVER` with one of
# these changes only the hunk headers' function names; any other driver could run a program.
BUILTIN_DIFF_DRIVERS = (
    "ada bash bibtex cpp csharp css dts elixir fortran fountain golang html java kotlin markdown matlab objc "
    "pascal perl php python ruby rust scheme tex"
).split()
_FLAG_OPTIONS = {
    "--keep-subject",
    "-k",
    "--no-stat",
    "--no-signature",
    "--zero-commit",
    "--full-index",
    "--binary",
    "--no-binary",
    "--no-renames",
    "--find-renames",
    "-M",
    "--no-prefix",
    "--minimal",
    "--patience",
    "--histogram",
}
_VALUED_OPTIONS = {
    "--signature": lazy(r"[^\n\0]*"),
    "--subject-prefix": lazy(r"[^\n\0\]]*"),
    "--abbrev": lazy(r"[4-9]|[1-3][0-9]|40"),
    "--diff-algorithm": lazy(r"myers|minimal|patience|histogram"),
    "--unified": lazy(r"[0-9]{1,3}"),
    "--src-prefix": lazy(r"[^\s\0]*"),
    "--dst-prefix": lazy(r"[^\s\0]*"),
}
_ATTRIBUTE_RE = lazy(r"(?P<pattern>[^\s!#\0][^\s\0]*)\s+diff=(?P<driver>[a-z]+)")


@dataclass(frozen=True)
class PatchList:
    """Where a series' order lives: KIND's file PATH (None for `none`: name order)."""

    kind: str = "none"
    path: Path | None = None
    where: str = ""  # FILE:LINE: KEYPATH of the `list:` key (or of the series), for errors

    @property
    def writes_file(self) -> bool:
        return self.path is not None


@dataclass(frozen=True)
class PatchForm:
    """How export writes a patch file: `own` (each keeps its own form), or canonically, as
    `git format-patch ARGS` writes it (CONFIG: `git -c` settings; ATTRIBUTES: gitattributes
    lines naming built-in diff drivers; ONE_TRAILING_NEWLINE: trailing newlines cut to one,
    and `Patch-Dir:`/`Patch-Filename:` lines dropped, as Electron's exporter does)."""

    name: str = "own"
    args: tuple[str, ...] = ()
    config: tuple[str, ...] = ()
    attributes: tuple[str, ...] = ()
    electron_cleanup: bool = False

    @property
    def canonical(self) -> bool:
        return self.name != "own"


# Electron's script/lib/git.py `format_patch` and `export_patches` (electron/electron, main):
# rename detection on, Objective-C function names for *.m and *.mm, then each patch's
# trailing newlines cut to one and its patch-location lines dropped.
ELECTRON_FORM = PatchForm(
    "electron",
    ("--keep-subject", "--no-stat", "--no-signature", "--zero-commit", "--full-index"),
    ("diff.renames=true",),
    ("*.mm diff=objc", "*.m diff=objc"),
    electron_cleanup=True,
)
PRESETS = {"own": PatchForm(), "electron": ELECTRON_FORM}


def parse_list(
    config: Config, v: Validator, keypath: KeyPath, naming: str, directory: str, check_path: Callable[..., None]
) -> PatchList:
    """The series' `list:` (a kind, or `{kind, path}`), or the default its NAMING implies;
    CHECK_PATH(config, keypath, path) refuses a path that leaves the repository."""
    data = v.at(keypath)
    where = f"{config.doc.path}:{config.doc.line_of(keypath + ('list',))}: {format_keypath(keypath + ('list',))}"
    if "list" not in data:
        implied = NAMING_LIST.get(naming, "none")
        path = DEFAULT_LIST_FILE.get(implied)
        return PatchList(implied, config.root / directory / path if path else None, where)
    value = data["list"]
    at = keypath + ("list",)
    if isinstance(value, str):
        list_kind, path_text = value, None
    else:
        v.mapping(value, at, ("kind", "path"), required=("kind",))
        list_kind = v.string(at, "kind")
        path_text = v.string(at, "path", required=False)
    if list_kind not in LIST_KINDS:
        raise config.error(at, f"unknown list kind {list_kind!r} (choose: {', '.join(LIST_KINDS)})")
    if list_kind == "none":
        if path_text is not None:
            raise config.error(at + ("path",), "list kind none reads no file (the order is the file names')")
        return PatchList("none", None, where)
    if path_text is None:
        if list_kind not in DEFAULT_LIST_FILE:
            raise config.error(at, f"list kind {list_kind} needs a path (the recipe's meta.yaml)")
        return PatchList(list_kind, config.root / directory / DEFAULT_LIST_FILE[list_kind], where)
    check_path(config, at + ("path",), path_text)
    return PatchList(list_kind, config.root / path_text, where)


def parse_form(config: Config, v: Validator, keypath: KeyPath) -> PatchForm:
    """The series' `form:`: `own`, a preset's name, or `{format_patch: [...], renames, attributes}`."""
    data = v.at(keypath)
    if "form" not in data:
        return PatchForm()
    value = data["form"]
    at = keypath + ("form",)
    if isinstance(value, str):
        if value not in PRESETS:
            raise config.error(
                at, f"unknown form {value!r} (choose: {', '.join(FORMS)}, or {{format_patch: [OPTIONS]}})"
            )
        return PRESETS[value]
    if not isinstance(value, dict):
        raise config.error(at, f"must be a preset name or a mapping, got {kind(value)}")
    v.mapping(value, at, ("format_patch", "renames", "attributes"), required=("format_patch",))
    args = v.sequence(value["format_patch"], at + ("format_patch",))
    for i, arg in enumerate(args):
        if (problem := _option_problem(arg)) is not None:
            raise config.error(at + ("format_patch", i), problem)
    renames = v.boolean(at, "renames", False)
    attributes = v.optional_list(at, "attributes")
    for i, line in enumerate(attributes):
        match = _ATTRIBUTE_RE.fullmatch(line) if isinstance(line, str) else None
        if match is None or match["driver"] not in BUILTIN_DIFF_DRIVERS:
            raise config.error(
                at + ("attributes", i),
                f"must be `PATTERN diff=DRIVER` with one of git's built-in drivers "
                f"({', '.join(BUILTIN_DIFF_DRIVERS)}), got {line!r}",
            )
    return PatchForm(
        "format-patch",
        tuple(args),
        (f"diff.renames={'true' if renames else 'false'}",),
        tuple(attributes),
    )


def _option_problem(arg: Any) -> str | None:
    if not isinstance(arg, str):
        return f"must be a format-patch option, got {kind(arg)}"
    if arg in _FLAG_OPTIONS:
        return None
    name, sep, value = arg.partition("=")
    if sep and name in _VALUED_OPTIONS:
        if _VALUED_OPTIONS[name].fullmatch(value):
            return None
        return f"{name}: value {value!r} is not accepted"
    if re.fullmatch(r"-U[0-9]{1,3}", arg):
        return None
    accepted = sorted(_FLAG_OPTIONS) + [f"{name}=..." for name in sorted(_VALUED_OPTIONS)] + ["-UN"]
    return f"format-patch option {arg!r} is not accepted here (accepted: {', '.join(accepted)})"
