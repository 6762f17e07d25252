"""`patchctl canary`: apply every series to the upstream tip (see `patchctl.loop.canary`)."""

from __future__ import annotations

from pathlib import Path

import click

from ..app import AppContext, complete_upstreams, json_options, pass_app, progress_display, publish_report
from ..errors import CheckFailed, UsageError


@click.command("canary")
@click.argument("upstream", required=False, shell_complete=complete_upstreams)
@click.option("--rev", help="Try this upstream revision instead of the branch tip.")
@click.option("--latest", is_flag=True, help="Try the tip of the upstream's branch (the default).")
@click.option(
    "--compile/--no-compile", "do_compile", default=False, help="Also compile once per canary toolchain (default: no)."
)
@click.option(
    "--bisect/--no-bisect",
    default=True,
    help="Name the first upstream commit that breaks each failing patch (default: yes).",
)
@click.option(
    "--compile-bisect",
    "bisect_builds",
    type=click.Choice(["probe", "full"]),
    default="probe",
    show_default=True,
    help="How a failing --compile build is bisected: probe compiles at each commit only the translation units "
    "that failed at the tip (their commands from the build's compile_commands.json, through ccache when the "
    "build environment has it), then confirms the commit named with full builds at it and at its parent, "
    "falling back to full builds when they disagree or nothing can be probed; full rebuilds at every commit.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the JSON report instead of the Markdown one.")
@click.option(
    "--json-file",
    "json_file",
    type=click.Path(dir_okay=False, allow_dash=True, path_type=Path),
    help="Write the JSON report to FILE ('-': stdout, as --json).",
)
@click.option(
    "--summary",
    "summary_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the Markdown report to FILE (it is also appended to $GITHUB_STEP_SUMMARY when set).",
)
@click.option(
    "--issues",
    "issues_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the issues a red canary files to FILE: a JSON list of {key, title, body}, one per break ([] when "
    "green). The key is stable across runs; the body starts with a hidden <!-- patchctl-canary-key: KEY --> marker.",
)
@click.option(
    "--toolchain",
    "toolchains",
    multiple=True,
    metavar="NAME",
    envvar="PATCHCTL_CANARY_TOOLCHAIN",
    help="With --compile, only this canary toolchain (repeatable; also $PATCHCTL_CANARY_TOOLCHAIN: one CI job per "
    "toolchain).",
)
@click.option(
    "--check-submitted",
    is_flag=True,
    help="Ask GitHub (with gh) what became of each Submitted patch's pull request; the scheduled workflow does.",
)
@click.option(
    "--work-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Scratch directory for trees and logs (default: a new temporary one).",
)
@pass_app
def canary_cmd(
    app: AppContext,
    upstream: str | None,
    rev: str | None,
    latest: bool,
    do_compile: bool,
    bisect: bool,
    bisect_builds: str,
    as_json: bool,
    json_file: Path | None,
    summary_file: Path | None,
    issues_file: Path | None,
    toolchains: tuple[str, ...],
    check_submitted: bool,
    work_dir: Path | None,
) -> None:
    """Apply every series to the upstream tip: an early warning that never modifies the repository.

    \b
    Each patch is applied strictly; one that fails is tried with a 3-way merge, which
    says whether a pin-sync would be mechanical or stop at it (a conflict, a patch that
    needs a hand or a look, or one blocked by an earlier one), and the upstream
    history between the pin and the tip is bisected to name the first commit that
    breaks it. With --compile each toolchain of matrix.yaml's canary section builds
    the series in its image (pulled, or built from its dockerfile) with its command, in
    a clean tree; a failing build is bisected the same way, each probe compiling only
    the translation units that failed at the tip, confirmed by two full builds.
    --issues writes one issue (stable key, title, body) per break for the workflow.
    --check-submitted asks gh about each Submitted patch's GitHub pull request: merged ("expect
    taken upstream at the next bump") or closed ("rejected upstream: update the status") goes in
    the report's health table. Exit 1 when red: a patch fails strictly or a compile fails.

    \b
    Examples:
      patchctl canary llama.cpp
      patchctl canary --compile --json-file canary.json --summary canary.md
      patchctl canary llama.cpp --json | jq .series
      patchctl canary llama.cpp --rev aa601ae300d05a804f5f68940ab6fa75fc9653d3 --no-bisect
      patchctl canary llama.cpp --rev "$REV" --compile --toolchain cpu-amd64 --issues issues.json
    """
    if rev and latest:
        raise UsageError("--rev and --latest exclude each other")
    as_json, json_file = json_options(upstream, as_json, json_file)
    json_file, summary_file, work_dir = app.output(json_file), app.output(summary_file), app.path(work_dir)
    issues_file = app.output(issues_file)
    from ..confined import named
    from ..loop import canary
    from ..output import report as report_mod
    from ..output.jsonout import to_json

    if do_compile:  # its build logs go to .patchctl/logs/canary; without --compile it writes nothing
        app.lock_project()
    with progress_display() as progress:
        report = canary.canary(
            app.config,
            app.store,
            upstream,
            rev=rev,
            compile=do_compile,
            bisect=bisect,
            bisect_builds=bisect_builds,
            toolchains=toolchains,
            work_dir=work_dir,
            check_submitted=check_submitted,
            progress=progress,
        )
    payload = to_json(report)
    markdown = report_mod.canary_markdown(payload)
    if issues_file:
        named.write_json_list(issues_file, [to_json(issue) for issue in report.issues()], app.root)
    named.append_step_summary(markdown)
    publish_report(payload, markdown, markdown_file=summary_file, json_file=json_file, as_json=as_json)
    if report.red:
        raise CheckFailed(report.red_reason())
