"""`patchctl export`: regenerate a series from a work tree (see `patchctl.exporter`)."""

from __future__ import annotations

from pathlib import Path

import click

from .. import apply_job, exporter, worktree
from ..app import AppContext, complete_series, echo_lines, emit_json, pass_app
from ..errors import UsageError


@click.command("export")
@click.argument("series", shell_complete=complete_series)
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
    # A fresh clone has no applied tree: --check applies the series first (what `apply` makes),
    # so the check (and its pre-commit hook) works anywhere; plain export needs your commits.
    fresh = from_dir is None and not worktree.applied_tree(app.root, series).exists()
    if not check or fresh:
        app.lock_project()
    config = app.config
    source = app.path(from_dir) or worktree.applied_tree(config.root, config.get_series(series).name)
    if fresh and not source.exists():
        exporter.read_existing(config, series, check=check)  # a misspelled dir: name its line first
        if not check:
            raise UsageError(
                f"no applied tree for {series} at {worktree.display(config.root, source)}: run "
                f"`patchctl apply {series}`, commit your changes in it, then export"
            )
        click.echo(f"patchctl: no applied tree for {series} yet: applying the series first", err=True)
        apply_job.apply(config, app.store, (series,))
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
