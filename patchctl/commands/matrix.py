"""`patchctl matrix render|check|changed`: the CI build matrix (see `patchctl.matrix`)."""

from __future__ import annotations

from pathlib import Path

import click

from ..app import AppContext, CommandGroup, echo_lines, emit_json, pass_app, print_findings
from ..errors import CheckFailed, UsageError


@click.group("matrix", cls=CommandGroup)
def matrix_group() -> None:
    """The CI build matrix: render workflows and the backend index, check invariants, pick rows.

    \b
    matrix.yaml's include/includeDarwin rows (LocalAI's backend-matrix schema), index,
    canary and backends sections are the single source of truth; see `patchctl matrix
    check --help` for the rules.

    \b
    Examples:
      patchctl matrix render && git diff --stat
      patchctl matrix check --matrix .github/backend-matrix.yml --index backend/index.yaml
      patchctl matrix changed --base origin/main --json
    """


@matrix_group.command("render")
@click.option(
    "--check", is_flag=True, help="Write nothing; exit 1 with a unified diff when a rendered file is out of date."
)
@click.option(
    "--templates",
    type=click.Path(file_okay=False, path_type=Path),
    help="Template directory (default: templates/ next to matrix.yaml, else patchctl's installed defaults).",
)
@click.option("--json", "as_json", is_flag=True, help="Print which files were rendered and which were stale, as JSON.")
@pass_app
def matrix_render_cmd(app: AppContext, check: bool, templates: Path | None, as_json: bool) -> None:
    """Render .github/workflows/*.yml and the backend index from matrix.yaml.

    \b
    Each templates/NAME.yml.j2 becomes .github/workflows/NAME.yml and
    templates/index.yaml.j2 becomes the index file (index.output, default
    backend/index.yaml). Output is deterministic and starts with a line saying it is
    generated. Values are validated and quoted: nothing in matrix.yaml can open a GitHub
    expression or break the YAML. All files are written together or not at all.

    \b
    Examples:
      patchctl matrix render
      patchctl matrix render --check       # in CI: exit 1 and print the diff on drift
    """
    from ..matrix import api

    if not check:
        app.lock_project()
    result = api.render(app.config, check=check, templates=templates)
    if as_json:
        emit_json(result)
    if check and result.stale:
        if not as_json:
            click.echo(result.diff(), nl=False)
        raise CheckFailed(result.drift_message())
    if not as_json:
        echo_lines(result.lines(check=check))


@matrix_group.command("check")
@click.option(
    "--matrix",
    "matrix_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Matrix to check: a patchctl matrix.yaml or a LocalAI .github/backend-matrix.yml (default: matrix.yaml).",
)
@click.option(
    "--index",
    "index_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="LocalAI-format backend index (a list of metas and variants) to check against the rows.",
)
@click.option(
    "--allow",
    "allow_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Allowlist of known findings: {allow: [{rule, subject, reason}]}.",
)
@click.option("--json", "as_json", is_flag=True, help="Print findings as JSON.")
@pass_app
def matrix_check_cmd(
    app: AppContext, matrix_path: Path | None, index_path: Path | None, allow_path: Path | None, as_json: bool
) -> None:
    """Check the build matrix, the backend index and the canary; exit 1 on any finding.

    \b
    Schema errors stop with FILE:LINE (exit 2). Then the invariants:
      MX101 tag-suffix naming convention   MX102 tag-suffix unique per platform
      MX103 arm64 rows on arm runners      MX104 amd64/arm64 pairs agree
      MX201 one latest- and one master- variant per row
      MX202 every variant has a row        MX203 -development names use master- images
      MX204 mirrors carry the uri's tag    MX205 index names unique
      MX301 capabilities resolve           MX302 capability keys known
      MX303 capabilities match hardware    MX304 variant names match their toolchain
      MX401 canary toolchain matches a shipped row
      MX501 tracking pins equal            MX502 tracking pins not auto-bumped
      MX601 backends declare their paths
      MX701 a row's dockerfile, context or make target exists
      MX702 at most 256 jobs per matrix (GitHub's limit)
    Findings print as FILE:LINE: RULE: message (and ::error annotations under GitHub
    Actions). An allowlist silences known findings by rule and subject (a glob).

    \b
    Examples:
      patchctl matrix check
      patchctl matrix check --matrix .github/backend-matrix.yml --index backend/index.yaml \\
          --allow matrix-allow.yaml --json
    """
    from ..matrix import api

    report = api.check(
        lambda: app.config, app.workdir, matrix_path=matrix_path, index_path=index_path, allow_path=allow_path
    )
    if as_json:
        emit_json(report)
        if report.findings:
            raise CheckFailed(f"{len(report.findings)} finding(s)")
        return
    for entry in report.unused_allow:
        click.echo(entry.note())
    print_findings(report.findings, False, (app.config.root, app.workdir) if matrix_path is None else (app.workdir,))
    click.echo(report.summary())


@matrix_group.command("changed")
@click.argument("files", nargs=-1)
@click.option("--base", help="Compare HEAD with this revision (merge base), e.g. the pull request's base.")
@click.option("--all", "everything", is_flag=True, help="Every row (a push to main, a release).")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print {linux: {include}, darwin: {include}, pairs, backends, files, reasons} for fromJSON.",
)
@pass_app
def matrix_changed_cmd(
    app: AppContext, files: tuple[str, ...], base: str | None, everything: bool, as_json: bool
) -> None:
    """The build rows that FILES (or the changes since --base) touch.

    \b
    A row is selected when a changed file matches its backend's `paths` or `shared`
    globs in matrix.yaml (a shared path rebuilds every backend that lists it), when
    the row itself changed in matrix.yaml, or when an upstream's pin moved there and a
    file of a series on it matches the backend's globs (its images are made at the new
    pin). Without FILES or --base: uncommitted changes.
    --json gives GitHub Actions matrices: `fromJSON(...).linux` and `.darwin`; a matrix
    above GitHub's 256 jobs is refused (exit 1) rather than printed.

    \b
    Examples:
      patchctl matrix changed backend/cpp/llama-cpp/grpc-server.cpp
      patchctl matrix changed --base origin/main --json > plan.json
      jq -c .linux plan.json      # strategy.matrix: ${{ fromJSON(needs.plan.outputs.linux) }}
    """
    if everything and (files or base):
        raise UsageError("--all takes no FILES and no --base")
    from ..matrix import api

    result = api.changed(app.config, base=base, files=files, everything=everything)
    if as_json:
        emit_json(result)
        return
    echo_lines(result.lines())
