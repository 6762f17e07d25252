"""`patchctl pin-sync`: move a pin forward behind the gates (see `patchctl.loop.sync`)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..app import (
    AppContext,
    complete_upstreams,
    echo_lines,
    json_options,
    pass_app,
    progress_display,
    publish_report,
)
from ..errors import CheckFailed, UsageError
from ..output.escape import log_line, shell_command

if TYPE_CHECKING:
    from ..loop.sync_report import SyncReport, SyncStopped


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
    "--wait",
    is_flag=True,
    help="At each stop, wait for you instead of exiting: resolve, `git add`, then press Enter to continue "
    "(or answer drop, abort or stop). The sync stays stopped on disk meanwhile, as without --wait.",
)
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
    wait: bool,
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
    this one), and for an upstream pinned by release (`version:`) its manifests (an
    OpenWrt Makefile, a conda-forge recipe, a DEPS file: version and checksums, a
    checksum that cannot be remade here listed to refresh), all together or not at
    all; with `version:`, --latest is the newest fitting tag. The report then has a
    range-diff per series. Exit 1 when it stops at a conflict or a failing gate. With --wait it
    asks instead at each stop, and goes on in the same run when you press Enter:
    no new run per stop (see "Waiting at a stop" below).

    \b
    Examples:
      patchctl pin-sync llama.cpp --latest --report sync.md
      patchctl pin-sync llama.cpp --to aa601ae300d05a804f5f68940ab6fa75fc9653d3 --dry-run
      patchctl pin-sync --continue          # after resolving and `git add` in the sync tree
      patchctl pin-sync --continue --drop   # drop the patch that stopped it, on purpose
      patchctl pin-sync --abort
      patchctl pin-sync llama.cpp --latest --wait

    \b
    Waiting at a stop (--wait): after the report, pin-sync asks on stderr and reads
    one line from stdin. Enter (or `continue`) does what --continue does, `drop`
    what --continue --drop does, `abort` what --abort does; `stop`, Ctrl-D or no
    input leaves the sync stopped and exits 1, to --continue later. The project is
    not locked while it waits; an answer that --continue would refuse (markers
    left, nothing staged) is said in one line and asked again.
    """
    if drop and not resume:
        raise UsageError("--drop goes with --continue")
    if resume and abort:
        raise UsageError("--continue and --abort exclude each other")
    if (resume or abort) and (to or latest or dry_run):
        raise UsageError("--continue/--abort take no --to, --latest or --dry-run")
    if wait and (abort or dry_run):
        raise UsageError("--wait waits at the stops of a sync that can go on: not with --abort or --dry-run")
    as_json, json_file = json_options(upstream, as_json, json_file)
    from ..loop import sync

    app.lock_project()
    report_file, json_file = app.output(report_file), app.output(json_file)
    outputs = (report_file, json_file, as_json)
    action = "abort" if abort else "continue" if resume else "start"
    waited = False
    while True:
        try:
            _round(app, upstream, action, drop=drop, to=to, latest=latest, dry_run=dry_run, outputs=outputs)
            return
        except sync.SyncStopped as stopped:
            if not wait:
                raise
            upstream = stopped.report.upstream
            action, drop = _ask(app, upstream, stopped)
        except UsageError as refused:
            # After an answer, what --continue refuses (markers left, nothing staged) is asked
            # again while the sync is still stopped; a first round is refused as without --wait.
            if not waited or upstream is None or not sync.in_progress(app.config, upstream):
                raise
            echo_lines([f"patchctl: error: {refused}"], err=True)
            action, drop = _ask(app, upstream, None)
        waited = True


def _round(
    app: AppContext,
    upstream: str | None,
    action: str,
    *,
    drop: bool,
    to: str | None,
    latest: bool,
    dry_run: bool,
    outputs: tuple[Path | None, Path | None, bool],
) -> None:
    """One run of pin-sync (ACTION: start, continue or abort), its report written and printed
    whether it ends or stops."""
    from ..loop import sync

    config = app.config
    report = None
    try:
        with progress_display() as progress:
            if action == "abort":
                report = sync.abort_sync(config, app.store, upstream)
            elif action == "continue":
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
            _write_report(report, *outputs)


def _write_report(report: SyncReport, report_file: Path | None, json_file: Path | None, as_json: bool) -> None:
    from ..output import report as report_mod
    from ..output.jsonout import to_json

    payload = to_json(report)
    markdown = report_mod.sync_markdown(payload)
    publish_report(payload, markdown, markdown_file=report_file, json_file=json_file, as_json=as_json)
    echo_lines([f"patchctl: warning: {warning}" for warning in report.warnings], err=True)


_ANSWERS = {
    "": ("continue", False),
    "continue": ("continue", False),
    "drop": ("continue", True),
    "abort": ("abort", False),
}


def _ask(app: AppContext, upstream: str, stopped: SyncStopped | None) -> tuple[str, bool]:
    """Wait at a stop (STOPPED; None after a refused answer): the project unlocked meanwhile,
    so that `git`, `patchctl status` or a --continue elsewhere can run. The next round's
    (action, drop); a stop re-raised for `stop`, Ctrl-D or the end of the input."""
    app.unlock_project()
    while True:
        click.echo(
            log_line(
                f"patchctl: pin-sync of {upstream} is waiting: resolve, `git add`, then press Enter to continue "
                "(or answer drop, abort or stop)"
            ),
            err=True,
        )
        line = sys.stdin.readline()
        answer = line.strip().lower()
        if not line or answer == "stop":
            if stopped is not None:
                raise stopped
            go_on = shell_command(["patchctl", "pin-sync", upstream, "--continue"])
            raise CheckFailed(f"pin-sync of {upstream} left stopped; `{go_on}` goes on from there")
        if answer in _ANSWERS:
            break
        click.echo(log_line(f"patchctl: {answer!r}: answer Enter, continue, drop, abort or stop"), err=True)
    app.lock_project()
    app.reload_config()  # what a new run would read: matrix.yaml may have changed meanwhile
    return _ANSWERS[answer]
