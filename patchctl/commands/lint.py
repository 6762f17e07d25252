"""`patchctl lint`: check the series and the pins (rules in `patchctl.series.linter`)."""

from __future__ import annotations

import click

from ..app import AppContext, complete_series, pass_app, print_findings
from ..errors import UsageError
from ..output.escape import log_line, workflow_command


@click.command("lint")
@click.argument("series", nargs=-1, shell_complete=complete_series)
@click.option("--no-apply", is_flag=True, help="Skip the strict apply check (no upstream needed).")
@click.option("--json", "as_json", is_flag=True, help="Print findings as JSON.")
@pass_app
def lint_cmd(app: AppContext, series: tuple[str, ...], no_apply: bool, as_json: bool) -> None:
    """Check the series and the pins; exit 1 with one line per finding.

    \b
    Rules: PC001 numbering unique and contiguous, PC002 file names, PC003 patches parse,
    PC004 no hunk on an excluded path, PC005 no CRLF, PC006 no binary (unless the series
    allows them), PC007 subject, PC008 description (both off with allow_undescribed),
    PC009 the series applies strictly to its pin, PC010 pin_files equal the pin, PC011
    tracks constraints, PC012 no path outside the tree, PC013 no line past a hunk's
    declared counts (git apply would drop it), PC014 a well-formed Upstream-Status: header
    (only with upstream_status: required).
    Findings print as FILE:LINE: RULE: message, and as ::error annotations under GitHub
    Actions. A warning does not fail lint: PC016 allow_empty: true left on a series that has
    patches (FILE:LINE: warning: PC016: ... on stderr, a ::warning annotation).

    \b
    Examples:
      patchctl lint
      patchctl lint llama.cpp --no-apply --json
    """
    from ..output.findings import repository_path, under_github_actions
    from ..series import linter

    if not series and not app.config.series:
        raise UsageError(f"{app.config.path.name} defines no series: lint would check nothing")
    findings = linter.lint(app.config, None if no_apply else app.store, series, apply_check=not no_apply)
    for warning in linter.warnings(app.config, series):
        click.echo(log_line(f"{warning.file}:{warning.line}: warning: {warning.rule}: {warning.message}"), err=True)
        if under_github_actions() and not as_json:  # (stdout is the JSON alone)
            file = repository_path(warning.file, (app.config.root,))
            click.echo(workflow_command("warning", warning.message, file=file, line=warning.line, title=warning.rule))
    print_findings(findings, as_json, (app.config.root,))
    if not as_json:
        click.echo("lint: no findings")
