"""`patchctl pin-sync`: move a pin forward behind the gates (see `patchctl.loop.sync`)."""

from __future__ import annotations

from pathlib import Path

import click

from ..app import (
    AppContext,
    complete_upstreams,
    echo_lines,
    echo_report,
    emit_json,
    json_options,
    pass_app,
    progress_display,
)
from ..errors import UsageError
from ..loop import sync
from ..output import report as report_mod
from ..output.jsonout import to_json


@click.command("pin-sync")
@click.argument("upstream", required=False, shell_complete=complete_upstreams)
@click.option("--to", "to", metavar="REV", help="Move the pin to REV (a commit, tag or branch upstream).")
@click.option("--latest", is_flag=True, help="Move the pin to the tip of the upstream's branch.")
@click.option("--dry-run", is_flag=True, help="Replay and run every gate, but write nothing.")
@click.option(
    "--continue", "resume", is_flag=True, help="Resume a stopped sync after resolving the conflict or fixing the gate."
)
@click.option(
    "--drop",
    is_flag=True,
    help="With --continue: drop the patch that stopped the sync from the series, on purpose (said in the report).",
)
@click.option("--abort", is_flag=True, help="Drop a stopped sync: remove its worktrees and state.")
@click.option(
    "--report",
    "report_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the Markdown report to FILE.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the JSON report instead of the Markdown one.")
@click.option(
    "--json-file",
    "json_file",
    type=click.Path(dir_okay=False, allow_dash=True, path_type=Path),
    help="Write the JSON report to FILE ('-': stdout, as --json).",
)
@pass_app
def pin_sync_cmd(
    app: AppContext,
    upstream: str | None,
    to: str | None,
    latest: bool,
    dry_run: bool,
    resume: bool,
    drop: bool,
    abort: bool,
    report_file: Path | None,
    as_json: bool,
    json_file: Path | None,
) -> None:
    """Move UPSTREAM's pin forward, replaying its series and running every gate first.

    \b
    Each patch is replayed on the target with a 3-way merge and classified: clean,
    applied with offset, merged 3-way, already upstream (dropped) or conflict. A
    conflict stops the sync and leaves the markers in .patchctl/sync/UPSTREAM/SERIES;
    resolve there, then --continue, which goes on from there (or --abort). Then, per
    series: strict apply of the re-exported series at the target, its build steps and
    its gates in a clean checkout of it. Only when all pass are patches/, `pin:` in
    matrix.yaml and every pin_files entry written (also for upstreams that `tracks`
    this one), all together or not at all; the report then has a range-diff per
    series. Exit 1 when it stops at a conflict or a failing gate.

    \b
    Examples:
      patchctl pin-sync llama.cpp --latest --report sync.md
      patchctl pin-sync llama.cpp --to aa601ae300d05a804f5f68940ab6fa75fc9653d3 --dry-run
      patchctl pin-sync --continue          # after resolving and `git add` in the sync tree
      patchctl pin-sync --continue --drop   # drop the patch that stopped it, on purpose
      patchctl pin-sync --abort
    """
    if drop and not resume:
        raise UsageError("--drop goes with --continue")
    if resume and abort:
        raise UsageError("--continue and --abort exclude each other")
    if (resume or abort) and (to or latest or dry_run):
        raise UsageError("--continue/--abort take no --to, --latest or --dry-run")
    as_json, json_file = json_options(upstream, as_json, json_file)
    app.lock_project()
    config = app.config
    report_file, json_file = app.path(report_file), app.path(json_file)
    report = None
    try:
        with progress_display() as progress:
            if abort:
                report = sync.abort_sync(config, app.store, upstream)
            elif resume:
                report = sync.continue_sync(config, app.store, upstream, drop=drop, progress=progress)
            else:
                report = sync.pin_sync(
                    config, app.store, upstream, to=to, latest=latest, dry_run=dry_run, progress=progress
                )
    except sync.SyncStopped as stopped:
        report = stopped.report
        raise
    finally:
        if report is not None:
            payload = to_json(report)
            markdown = report_mod.sync_markdown(payload)
            if report_file:
                report_mod.write_text(report_file, markdown)
            if json_file:
                report_mod.write_json(json_file, payload)
            if as_json:
                emit_json(payload)
            else:
                echo_report(markdown)
            echo_lines([f"patchctl: warning: {warning}" for warning in report.warnings], err=True)
