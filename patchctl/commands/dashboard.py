"""`patchctl dashboard`: the whole picture in one issue (see `patchctl.loop.dashboard`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..app import AppContext, echo_lines, echo_report, emit_json, pass_app, progress_display
from ..errors import PatchctlError

if TYPE_CHECKING:
    from ..loop import dashboard as dashboard_mod
    from ..loop.dashboard_issue import IssueOutcome

# The issue's label and the workflows' bot, written out for --help (patchctl.loop.dashboard_issue
# is not imported to print it): tests/patchctl/test_startup.py keeps them one with its LABEL and DEFAULT_AUTHOR.
LABEL = "patchctl-dashboard"
DEFAULT_AUTHOR = "app/github-actions"


@click.command("dashboard")
@click.option(
    "--status",
    "status_file",
    type=click.Path(dir_okay=False, allow_dash=True, path_type=Path),
    help="Build it from FILE, what `patchctl status --json` printed ('-': stdin), instead of judging the series here.",
)
@click.option(
    "--github/--no-github",
    default=None,
    help="Ask GitHub (with gh) for the open pin-sync pull requests, the issues the workflows opened and what became "
    "of the Submitted patches' pull requests (default: only with --update).",
)
@click.option(
    "--update",
    is_flag=True,
    help=f"Edit the dashboard issue in place (label {LABEL}, opened by --author), or open it when there is none.",
)
@click.option(
    "--author",
    default=DEFAULT_AUTHOR,
    show_default=True,
    metavar="LOGIN",
    help="Who opens the dashboard and the workflows' issues: only theirs count (the workflows' bot; @me for your own).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the dashboard as JSON instead of the issue's body.")
@click.option(
    "--markdown",
    "markdown_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the issue's Markdown body to FILE.",
)
@pass_app
def dashboard_cmd(
    app: AppContext,
    status_file: Path | None,
    github: bool | None,
    update: bool,
    author: str,
    as_json: bool,
    markdown_file: Path | None,
) -> None:
    """One issue per repository that says how every series stands, kept up to date.

    \b
    Every series with its upstream, pin and tip and the verdicts at the tip; the open pin-sync
    pull requests and their state; the open issues the canary and pin-sync workflows filed; the
    patches to look at (a stop: conflict, needs a hand, needs a look, with the upstream commits
    behind it; blocked, mechanical, taken upstream, flagged, the highest drift of each series,
    carried a year and never sent upstream), with their drift, age and upstream status, and every
    patch in a fold. The series are judged as `patchctl status` judges them, or read from what
    it printed (--status FILE: a read-only job judges, the job that may write issues only
    renders). --update finds the dashboard issue by its label and its author only, never by its
    title, and edits it in place, or opens it; the text is escaped like every report. Never
    modifies the repository.

    \b
    Examples:
      patchctl dashboard                               # the issue's body, as plain text
      patchctl dashboard --github --json | jq '.pulls'
      patchctl status --json > status.json && patchctl dashboard --status status.json --update
    """
    from ..confined import named
    from ..loop import dashboard as dashboard_mod
    from ..loop.dashboard_issue import GitHub, upkeep
    from ..output.dashboard import dashboard_markdown
    from ..output.jsonout import to_json

    markdown_file = app.output(markdown_file)
    ask = update if github is None else github
    status = None
    if status_file is not None and str(status_file) == "-":
        status = dashboard_mod.read_status(None, stdin=click.get_binary_stream("stdin").read)
    elif status_file is not None:
        status = dashboard_mod.read_status(app.path(status_file))
    with progress_display() as progress:
        board = dashboard_mod.dashboard(
            app.config if status is None else None,
            app.store if status is None else None,
            status=status,
            github=ask,
            author=author,
            run=_run(),
            progress=progress,
        )
    body = dashboard_markdown(to_json(board))
    if markdown_file:
        named.write_text(markdown_file, body, _repository(app))
    if update:
        board.issue = upkeep(GitHub(), body, author=author)
    if as_json:
        emit_json(board)
    elif update:
        echo_lines([_said(board.issue)])
    else:
        echo_report(body)


def _repository(app: AppContext) -> Path | None:
    """The repository a --markdown FILE inside it is written to through no link; None outside one
    (--status FILE needs no repository)."""
    try:
        return app.root
    except PatchctlError:
        return None


def _said(outcome: IssueOutcome) -> str:
    """What --update did, in one line."""
    line = f"dashboard #{outcome.number} {outcome.action}"
    if outcome.state == "CLOSED":
        line += " (a maintainer closed it: edited, left closed)"
    if outcome.duplicates_closed:
        line += f"; closed {', '.join(f'#{n}' for n in outcome.duplicates_closed)} as duplicates"
    return line + (f": {outcome.url}" if outcome.url else "")


def _run() -> dashboard_mod.RunLine | None:
    """The workflow run this is, under GitHub Actions (its own variables name it)."""
    from ..loop.dashboard import RunLine

    env = os.environ
    if env.get("GITHUB_ACTIONS") != "true" or not all(
        env.get(name) for name in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID", "GITHUB_WORKFLOW")
    ):
        return None
    url = f"{env['GITHUB_SERVER_URL']}/{env['GITHUB_REPOSITORY']}/actions/runs/{env['GITHUB_RUN_ID']}"
    return RunLine(env["GITHUB_WORKFLOW"], url)
