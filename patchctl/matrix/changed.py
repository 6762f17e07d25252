"""Which build rows a change touches.

A row is rebuilt when a changed file matches one of its backend's `paths` or `shared`
globs (a shared path rebuilds every backend that lists it), when the row itself was
added or edited in matrix.yaml since the base revision, or when an upstream's pin moved
there and a series on that upstream feeds the row's backend (a file of the series matches
its globs): a pull request that only moves a pin builds the images made at that pin.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import yaml

from .. import git
from ..output.jsonout import json_field
from ..project.globs import glob_match
from ..records import dataclass
from .model import DARWIN, LINUX, BuildMatrix, Row


@dataclass(frozen=True)
class Reason:
    backend: str
    file: str
    pattern: str
    shared: bool

    def describe(self) -> str:
        kind = "shared path" if self.shared else "path"
        return f"{self.backend}: {self.file} matches {kind} {self.pattern}"


@dataclass(frozen=True)
class MovedPin:
    """An upstream whose pin moved since the base revision, and the files of a series on it."""

    upstream: str
    series: str
    files: tuple[str, ...]  # the series' files, repository-relative


@dataclass(frozen=True)
class PinReason:
    backend: str
    upstream: str
    series: str
    file: str  # the series file that matches the backend's globs
    pattern: str

    def describe(self) -> str:
        return (
            f"{self.backend}: upstream {self.upstream}'s pin moved, and series {self.series} "
            f"({self.file}) matches path {self.pattern}"
        )


@dataclass
class ChangedRows:
    """What `matrix changed` selected; its JSON is shaped for GitHub Actions' fromJSON."""

    JSON_PROPERTIES: ClassVar[dict[str, str]] = {
        "linux": "linux_matrix",
        "darwin": "darwin_matrix",
        "pairs": "pairs",
        "backends": "backends",
        "reasons": "all_reasons",
    }

    files: list[str]
    rows: list[Row] = json_field(omit=True, default_factory=list)
    reasons: list[Reason | PinReason] = json_field(omit=True, default_factory=list)
    # rows selected because matrix.yaml changed them
    edited_rows: list[str] = json_field(omit=True, default_factory=list)

    @property
    def backends(self) -> list[str]:
        return sorted({r.backend for r in self.rows})

    @property
    def linux_matrix(self) -> dict[str, list[dict[str, Any]]]:
        return {"include": [dict(r.values) for r in self.rows if r.section == LINUX]}

    @property
    def darwin_matrix(self) -> dict[str, list[dict[str, Any]]]:
        return {"include": [dict(r.values) for r in self.rows if r.section == DARWIN]}

    @property
    def pairs(self) -> list[str]:
        """Tag suffixes of the amd64/arm64 pairs among the Linux rows."""
        return sorted({r.tag_suffix for r in self.rows if r.section == LINUX and r.get("platform-tag")})

    @property
    def all_reasons(self) -> list[dict[str, Any]]:
        return [vars(r) for r in self.reasons] + [{"row": name, "matrix": True} for name in self.edited_rows]

    def over_limit(self, limit: int) -> str | None:
        """Why GitHub would refuse these rows (a matrix above LIMIT jobs), or None."""
        sizes = {"Linux": len(self.linux_matrix["include"]), "macOS": len(self.darwin_matrix["include"])}
        sizes["amd64/arm64 merge"] = len(self.pairs)
        over = [f"{what} {count}" for what, count in sizes.items() if count > limit]
        if not over:
            return None
        return (
            f"matrix changed: {', '.join(over)} rows, above GitHub's {limit} jobs per matrix "
            "(the workflow would be refused): split the rows over more workflows"
        )

    def lines(self) -> list[str]:
        """What `patchctl matrix changed` prints: why each row was picked, then the rows."""
        out = [reason.describe() for reason in self.reasons]
        out += [f"{row}: changed in matrix.yaml" for row in self.edited_rows]
        out += [f"build {row.describe()}" for row in self.rows]
        out.append(
            f"matrix changed: {len(self.rows)} row(s) of {', '.join(self.backends) or 'no backend'} "
            f"from {len(self.files)} changed file(s)"
        )
        return out


def files_since(root: Path, base: str | None) -> list[str]:
    """Files changed since BASE (merge-base with HEAD), or uncommitted ones when BASE is None."""
    if base is not None:
        names = git.run(["diff", "--name-only", "--relative", "-z", f"{base}...HEAD", "--"], root).stdout
        return sorted(n for n in names.split("\0") if n)
    tracked = git.run(["diff", "--name-only", "--relative", "-z", "HEAD", "--"], root).stdout
    untracked = git.run(["ls-files", "--others", "--exclude-standard", "-z"], root).stdout
    return sorted({n for n in (tracked + "\0" + untracked).split("\0") if n})


def _row_key(section: str, values: dict) -> tuple[str, str, str]:
    return section, str(values.get("tag-suffix")), str(values.get("platforms", "darwin"))


def edited_rows(matrix: BuildMatrix, old_text: str | None) -> list[Row]:
    """Rows that differ from (or are missing in) the matrix.yaml text of the base revision."""
    try:
        old = yaml.safe_load(old_text) if old_text is not None else None
    except yaml.YAMLError:
        old = None
    if not isinstance(old, dict):
        return list(matrix.rows)
    before = {}
    for section in (LINUX, DARWIN):
        for values in old.get(section) or []:
            if isinstance(values, dict):
                before[_row_key(section, values)] = {
                    k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in values.items()
                }
    return [r for r in matrix.rows if before.get(_row_key(r.section, r.values)) != r.values]


def select(
    matrix: BuildMatrix,
    files: list[str],
    *,
    everything: bool = False,
    base_matrix_text: str | None = None,
    matrix_changed: bool = False,
    moved_pins: list[MovedPin] | None = None,
) -> ChangedRows:
    result = ChangedRows(files=sorted(set(files)))
    if everything:
        result.rows = list(matrix.rows)
        return result
    touched: set[str] = set()
    for backend in (matrix.backends or {}).values():
        for path in result.files:
            hit = next(((p, shared) for p, shared in backend.patterns() if glob_match(path, p)), None)
            if hit is not None:
                result.reasons.append(Reason(backend.name, path, hit[0], hit[1]))
                touched.add(backend.name)
        if backend.name in touched:
            continue
        for moved in moved_pins or []:
            hit = next(((f, p) for f in moved.files for p, _ in backend.patterns() if glob_match(f, p)), None)
            if hit is not None:
                result.reasons.append(PinReason(backend.name, moved.upstream, moved.series, *hit))
                touched.add(backend.name)
                break
    edited = edited_rows(matrix, base_matrix_text) if matrix_changed else []
    result.edited_rows = [r.describe() for r in edited if r.backend not in touched]
    edited_ids = {id(r) for r in edited}
    result.rows = [r for r in matrix.rows if r.backend in touched or id(r) in edited_ids]
    return result
