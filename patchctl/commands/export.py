"""`patchctl export`: regenerate a series from a work tree (see `patchctl.exporter`)."""

from __future__ import annotations

from pathlib import Path

import click

from .. import exporter, worktree
from ..app import AppContext, echo_lines, emit_json, pass_app


@click.command("export")
@click.argument("series")
@click.option(
    "--from",
    "from_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Work tree whose commits on top of the pin become the series (default: .patchctl/trees/SERIES).",
)
@click.option("--base", help="Commit the series starts from (default: the upstream's pin).")
@click.option("--check", is_flag=True, help="Write nothing; exit 1 listing the patches that are out of date.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_app
def export_cmd(
    app: AppContext, series: str, from_dir: Path | None, base: str | None, check: bool, as_json: bool
) -> None:
    """Regenerate SERIES from the commits on top of the pin in a work tree.

    \b
    One NNNN-slug.patch per commit, byte-for-byte deterministic whatever your git config
    says (zero commit id, no version signature, full index lines, myers, no renames).
    Existing patches keep their names and are only rewritten when their hunks changed;
    patches of commits that are gone are deleted; hunks on excluded paths are dropped and
    reported. Before writing, the new series must reproduce the work tree exactly.

    \b
    Examples:
      patchctl apply llama.cpp                    # tree in .patchctl/trees/llama.cpp
      (cd .patchctl/trees/llama.cpp && git commit -am "Fix slot finder")
      patchctl export llama.cpp
      patchctl export llama.cpp --check           # in CI: exit 1 when patches/ is stale
    """
    if not check:
        app.lock_project()
    config = app.config
    source = app.path(from_dir) or worktree.applied_tree(config.root, config.get_series(series).name)
    try:
        result = exporter.export(config, series, source, base=base, check=check)
    except exporter.ExportOutOfDate as stale:
        if as_json:
            emit_json(stale.result)
        raise
    if as_json:
        emit_json(result)
        return
    echo_lines(result.lines())
