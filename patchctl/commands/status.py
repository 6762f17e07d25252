"""`patchctl status`: the health of each series (see `patchctl.loop.health`)."""

from __future__ import annotations

from pathlib import Path

import click

from ..app import AppContext, complete_series, echo_lines, emit_json, pass_app, progress_display


@click.command("status")
@click.argument("series", nargs=-1, shell_complete=complete_series)
@click.option("--rev", help="Judge the series at this upstream revision instead of the branch tip.")
@click.option(
    "--trial/--no-trial",
    default=True,
    help="Apply each series at the tip for its verdicts, as the canary does (default: yes).",
)
@click.option(
    "--check-submitted",
    is_flag=True,
    help="Ask GitHub (with gh) what became of each Submitted patch's pull request: merged, or closed unmerged.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON: one entry per patch.")
@click.option(
    "--html",
    "html_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the report as one self-contained HTML page with charts to FILE (needs matplotlib).",
)
@click.option(
    "--markdown",
    "markdown_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the short Markdown table (what canary and pin-sync reports carry) to FILE.",
)
@pass_app
def status_cmd(
    app: AppContext,
    series: tuple[str, ...],
    rev: str | None,
    trial: bool,
    check_submitted: bool,
    as_json: bool,
    html_file: Path | None,
    markdown_file: Path | None,
) -> None:
    """The health of each series: upstream status, age, drift and verdict of every patch.

    \b
    For each patch of SERIES (default: all): its Upstream-Status: header, its age (from the
    commit that added its file to the project, to HEAD), the files it touches, its drift
    (upstream commits between the pin and the tip that touched those files), its verdict
    at the tip (strict, else 3-way, as the canary tries it; "taken upstream in COMMIT" when
    upstream holds its change) and how it fared in the recent pin-syncs (kept, rewritten,
    or the stop it was: conflict, needed a hand, needed a look). --html writes one page
    with charts (drift by status, the series' size over time), with no script and
    nothing fetched. Never modifies the repository.

    \b
    Examples:
      patchctl status
      patchctl status llama.cpp --json | jq '.series[].patches[] | {patch, upstream_status, drift, verdict}'
      patchctl status --html status.html --rev b6000
    """
    from ..confined import named
    from ..loop import health
    from ..loop.status import status
    from ..output import report as report_mod
    from ..output.jsonout import to_json

    html_file, markdown_file = app.output(html_file), app.output(markdown_file)
    with progress_display() as progress:
        report = status(
            app.config, app.store, series, rev=rev, trial=trial, check_submitted=check_submitted, progress=progress
        )
    payload = to_json(report)
    if html_file:
        from ..loop.health_page import render_page  # matplotlib: only for the page

        named.write_text(html_file, render_page(payload), app.root)
    if markdown_file:
        markdown = "\n".join(report_mod.health_markdown(health.rows_of(report))) + "\n"
        named.write_text(markdown_file, markdown, app.root)
    if as_json:
        emit_json(payload)
        return
    echo_lines(health.text_lines(report))
