"""An upstream's release keys in matrix.yaml: the version the downstream names its pin by, the
upstream's tag for a version, and the downstream's manifests that state them.

    upstreams:
      btop:
        pin: 5c0d1e...          # the commit (always): what every series applies to
        version: 1.4.6          # the release, as the downstream spells it (quote 1.10: YAML reads a number)
        tag: v{version}         # the upstream's tag for a version (default: '{version}')
        manifests:              # where the downstream states it; pin-sync moves them with the pin
          - {path: Makefile, format: openwrt}
          - {path: recipe/meta.yaml, format: conda-forge}
          - {path: DEPS, format: gclient, var: node_version}

`lint` (PC010) checks that each manifest states the pin; `pin-sync` moves them
(`patchctl.loop.versionpin`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..patterns import lazy
from .upstream_checks import ref_name_problem
from .validation import Validator, kind
from .yamlloc import KeyPath, format_keypath

VERSION_KEYS = ("version", "tag", "manifests")
DEFAULT_TAG = "{version}"
_VAR_RE = lazy(r"^[A-Za-z_][A-Za-z0-9_.-]{0,99}$")

# The manifests' module (its formats and dataclasses) is imported only where an upstream is
# pinned by release: most projects pin a commit (start-up, patchctl.lazy).
if TYPE_CHECKING:
    from .manifests import Manifest


def read_version_keys(
    v: Validator, keypath: KeyPath, check_relative: Callable[[KeyPath, str], None]
) -> tuple[str | None, str, tuple[Manifest, ...]]:
    """(version, tag pattern, manifests) of the upstream at KEYPATH, validated."""
    data: dict[str, Any] = v.at(keypath)
    version = None
    if "version" in data:
        value = data["version"]
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            raise v.error(
                keypath + ("version",), f"must be a string: quote it ('{value}'), YAML reads {value!r} as a number"
            )
        version = v.string(keypath, "version")
        from .manifests import VERSION_RE

        if not VERSION_RE.match(version or ""):
            allowed = "letters, digits, '.', '_', '+', '~', '-'"
            raise v.error(keypath + ("version",), f"not a version ({allowed}): {version!r}")
    tag = v.string(keypath, "tag", DEFAULT_TAG) or DEFAULT_TAG
    if "tag" in data:
        if version is None:
            raise v.error(keypath + ("tag",), "a tag pattern needs a `version:` to fill it in")
        if tag.count("{version}") != 1:
            raise v.error(keypath + ("tag",), f"must hold {{version}} once (e.g. 'v{{version}}'), got {tag!r}")
        if (problem := ref_name_problem(tag.replace("{version}", "1.0"))) is not None:
            raise v.error(keypath + ("tag",), f"{problem}: {tag!r}")
    manifests = []
    for index, entry in enumerate(v.optional_list(keypath, "manifests")):
        from .manifests import FORMATS, Manifest

        at = keypath + ("manifests", index)
        v.mapping(entry, at, ("path", "format", "var"), required=("path", "format"))
        path, format_name = v.string(at, "path"), v.string(at, "format")
        check_relative(at + ("path",), path or "")
        if format_name not in FORMATS:
            raise v.error(at + ("format",), f"unknown format {format_name!r} (choose: {', '.join(FORMATS)})")
        var = v.string(at, "var", required=False)
        if format_name == "gclient" and var is None:
            raise v.error(at, "a gclient manifest needs `var:`, the vars entry that holds the revision")
        if var is not None and (format_name != "gclient" or not _VAR_RE.match(var)):
            what = "a vars name" if format_name == "gclient" else f"only for gclient, not {format_name}"
            raise v.error(at + ("var",), f"`var:` is {what}, got {kind(var) if not isinstance(var, str) else var!r}")
        where = f"{v.doc.path}:{v.line(at)}: {format_keypath(at)}"
        manifests.append(Manifest(path or "", format_name or "", var, where))
    return version, tag, tuple(manifests)
