"""`patchctl matrix render|check|changed`: the domain side of the matrix commands."""

from __future__ import annotations

import stat
from collections.abc import Callable
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from .. import git
from ..confined import Root
from ..errors import CheckFailed
from ..output.findings import Finding
from ..output.jsonout import json_field, to_json
from ..project import config as config_mod
from ..records import dataclass
from ..state import journal
from . import allowlist, checks, sources
from .changed import ChangedRows, MovedPin, files_since, select
from .model import BuildMatrix
from .workflow_checks import WorkflowTally

if TYPE_CHECKING:  # render (Jinja) is imported by `matrix render` alone: `check` and `changed` start faster
    from .render import RenderResult


def render(config: config_mod.Config, *, check: bool = False, templates: Path | None = None) -> RenderResult:
    """Render every output; unless CHECK, write the ones that changed, all or none."""
    from .render import render as render_files

    result = render_files(config, sources.from_config(config), templates)
    if not check and result.stale:
        changes = [journal.FileChange(f.path, f.text.encode("utf-8")) for f in result.stale]
        journal.commit(config.path, changes)
    return result


def _silenced_json(silenced: list[tuple[Finding, allowlist.AllowEntry]]) -> list[dict[str, Any]]:
    return [{**to_json(finding), "allowed_by": to_json(entry)} for finding, entry in silenced]


@dataclass
class CheckReport:
    JSON_PROPERTIES: ClassVar[dict[str, str]] = {"ok": "ok"}

    matrix_file: str = json_field(name="matrix")
    index_file: str | None = json_field(name="index")
    rows: int
    variants: int
    findings: list[Finding]
    silenced: list[tuple[Finding, allowlist.AllowEntry]] = json_field(encode=_silenced_json, default_factory=list)
    unused_allow: list[allowlist.AllowEntry] = field(default_factory=list)
    workflows: WorkflowTally = field(default_factory=WorkflowTally)

    @property
    def ok(self) -> bool:
        return not self.findings

    def summary(self) -> str:
        """The last line of a clean `patchctl matrix check`."""
        silenced = f", {len(self.silenced)} allowed" if self.silenced else ""
        index = f" and {self.variants} index variant(s)" if self.index_file else ""
        read = f"; {self.workflows.summary()}" if self.workflows.files else ""
        return f"matrix check: {self.rows} row(s){index}, no findings{silenced}{read}"


def load_for_check(
    load_config: Callable[[], config_mod.Config], workdir: Path, matrix_path: Path | None, index_path: Path | None
) -> tuple[BuildMatrix, config_mod.Config | None]:
    """The matrix to check: matrix.yaml by default, or FILE in either format, with an optional LocalAI index."""
    config: config_mod.Config | None
    if matrix_path is None:
        config = load_config()
        matrix = sources.from_config(config)
    elif sources.is_patchctl_config(matrix_path):
        config = sources.load_project(matrix_path)
        matrix = sources.from_config(config)
    else:
        config = None
        matrix = sources.load_localai_matrix(matrix_path, workdir)
    if index_path is not None:
        sources.attach_localai_index(matrix, index_path, workdir)
    return matrix, config


def check(
    load_config: Callable[[], config_mod.Config],
    workdir: Path,
    *,
    matrix_path: Path | None = None,
    index_path: Path | None = None,
    allow_path: Path | None = None,
) -> CheckReport:
    matrix, config = load_for_check(load_config, workdir, matrix_path, index_path)
    tally = WorkflowTally()
    findings = checks.run_checks(matrix, config, tally)
    report = CheckReport(
        matrix.matrix_file, matrix.index_file, len(matrix.rows), len(matrix.variants), findings, workflows=tally
    )
    if allow_path is not None:
        entries = allowlist.load(allow_path, sources.display_path(allow_path, workdir))
        filtered = allowlist.apply(findings, entries)
        report.findings, report.silenced, report.unused_allow = filtered.kept, filtered.silenced, filtered.unused
    return report


def changed(
    config: config_mod.Config, *, base: str | None = None, files: tuple[str, ...] = (), everything: bool = False
) -> ChangedRows:
    """The rows to rebuild for FILES, or for what changed since BASE (uncommitted changes without either).

    Raises CheckFailed rather than hand GitHub a matrix above its 256 jobs (MX702)."""
    result = _changed(config, base=base, files=files, everything=everything)
    problem = result.over_limit(checks.MAX_MATRIX_JOBS)
    if problem is not None:
        raise CheckFailed(problem)
    return result


def _changed(config: config_mod.Config, *, base: str | None, files: tuple[str, ...], everything: bool) -> ChangedRows:
    matrix = sources.from_config(config)
    if everything:
        return select(matrix, [], everything=True)
    changed_files = (
        [f.replace("\\", "/").removeprefix("./") for f in files] if files else files_since(config.root, base)
    )
    config_name = sources.display_path(config.path, config.root)
    matrix_changed = config_name in changed_files
    old_text = None
    if matrix_changed:
        shown = git.run(["show", f"{base or 'HEAD'}:./{config_name}"], config.root, check=False)
        old_text = shown.stdout if shown.ok else None
    return select(
        matrix,
        changed_files,
        base_matrix_text=old_text,
        matrix_changed=matrix_changed,
        moved_pins=moved_pins(config, old_text) if matrix_changed else [],
    )


def moved_pins(config: config_mod.Config, old_text: str | None) -> list[MovedPin]:
    """Each series on an upstream whose `pin:` (or its `ci:` block's) differs from the base's
    matrix.yaml OLD_TEXT, with its files: the images built from it are made at another commit.
    Read from the files as written, whichever upstream source this run follows."""
    import yaml

    def pins(data: Any, name: str) -> tuple[Any, Any]:
        upstreams = data.get("upstreams") if isinstance(data, dict) else None
        upstream = upstreams.get(name) if isinstance(upstreams, dict) else None
        if not isinstance(upstream, dict):
            return None, None
        ci = upstream.get("ci")
        return upstream.get("pin"), ci.get("pin") if isinstance(ci, dict) else None

    try:
        old = yaml.safe_load(old_text) if old_text is not None else None
    except yaml.YAMLError:
        old = None
    found = []
    for name in config.upstreams:
        if pins(config.doc.data, name) == pins(old, name):
            continue
        for series in config.series_on(name):
            relative = Path(series.dir).relative_to(config.root).as_posix()
            listed = Root(config.root).walk(relative)  # never through a link; nothing when missing
            files = sorted(f"{relative}/{found}" for found, info in listed if stat.S_ISREG(info.st_mode))
            found.append(MovedPin(name, series.name, tuple(files)))
    return found
