"""The patchctl command line: thin Click commands over the domain modules.

Commands parse their options, call one domain function and print its result. Domain code
raises typed errors (`patchctl.errors`); `main` turns them into one line on stderr and the
documented exit code: 0 ok, 1 check failed, 2 usage or configuration error, 3 environment
error (network, git, Docker). `--debug` shows the traceback instead.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from . import __version__
from . import config as config_mod
from .errors import ExitCode, PatchctlError, UsageError
from .store import Store


@dataclass
class AppContext:
    directory: Path | None
    config_file: Path | None
    url_overrides: tuple[str, ...]
    debug: bool
    _config: config_mod.Config | None = field(default=None, repr=False)
    _store: Store | None = field(default=None, repr=False)

    @property
    def config(self) -> config_mod.Config:
        if self._config is None:
            path = config_mod.find_config(self.directory, self.config_file)
            loaded = config_mod.load(path)
            self._config = loaded.with_url_overrides(config_mod.parse_url_overrides(self.url_overrides))
        return self._config

    @property
    def store(self) -> Store:
        if self._store is None:
            self._store = Store()
        return self._store

    @property
    def workdir(self) -> Path:
        return (self.directory or Path.cwd()).resolve()

    def path(self, value: Path | None) -> Path | None:
        """A path option, relative to -C DIR like git's."""
        return None if value is None else (self.workdir / value).resolve()


pass_app = click.make_pass_decorator(AppContext)


def emit_json(payload: Any) -> None:
    click.echo(json.dumps(payload, indent=2, sort_keys=True, default=str))


class _Group(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)  # in definition order: the order a user meets them


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option(
    "-C", "directory", type=click.Path(file_okay=False, path_type=Path), help="Run as if started in DIR (like git -C)."
)
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Use FILE instead of DIR/matrix.yaml.",
)
@click.option(
    "--upstream-url",
    "url_overrides",
    multiple=True,
    metavar="NAME=URL",
    help="Point upstream NAME at another URL or path (a mirror). Repeatable; also $PATCHCTL_UPSTREAM_URL.",
)
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors.")
@click.version_option(__version__, prog_name="patchctl")
@click.pass_context
def cli(
    ctx: click.Context, directory: Path | None, config_file: Path | None, url_overrides: tuple[str, ...], debug: bool
) -> None:
    """Keep a vendored patch series alive on top of a fast-moving upstream.

    \b
    patchctl keeps the upstream pins in matrix.yaml, applies each patch series strictly and
    transactionally, regenerates it deterministically, moves a pin forward behind gates
    (pin-sync), runs a canary on the upstream tip, and renders the CI build matrix.

    \b
    Exit codes: 0 ok, 1 check failed, 2 usage or configuration error,
                3 environment error (network, git, Docker).
    """
    ctx.obj = AppContext(directory, config_file, url_overrides, debug)


def main(argv: list[str] | None = None) -> int:
    debug = "--debug" in (sys.argv[1:] if argv is None else argv)
    try:
        cli.main(args=argv, prog_name="patchctl", standalone_mode=False)
    except PatchctlError as exc:
        if debug:
            raise
        click.echo(f"patchctl: error: {exc}", err=True)
        return int(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("patchctl: aborted", err=True)
        return 130
    except click.ClickException as exc:
        exc.show()
        return int(ExitCode.USAGE) if exc.exit_code == 2 else exc.exit_code
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except KeyboardInterrupt:
        click.echo("patchctl: interrupted", err=True)
        return 130
    return int(ExitCode.OK)


# Commands are defined below, one section per command; each calls a module in
# patchctl/commands/ (the domain function) and prints its result.


# ---------------------------------------------------------------- apply


@cli.command("apply")
@click.argument("series", nargs=-1)
@click.option("--rev", help="Upstream revision to apply to (default: the pin in matrix.yaml).")
@click.option(
    "--into", type=click.Path(file_okay=False, path_type=Path), help="Target tree (default: .patchctl/trees/SERIES)."
)
@click.option("--force", is_flag=True, help="Replace a target that has local changes or was not made by patchctl.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_app
def apply_cmd(
    app: AppContext, series: tuple[str, ...], rev: str | None, into: Path | None, force: bool, as_json: bool
) -> None:
    """Check out the upstream at its pin and apply SERIES (default: all) strictly.

    \b
    Every patch applies with no fuzz (line offsets are allowed and reported) or the target
    tree is left exactly as it was. A failure names the patch, the file and the hunk, and
    its cause: file missing, context drift, already applied, malformed, unsafe path.
    Re-running on a tree that is already patched is a no-op. The tree is a git worktree
    with one commit per patch on top of the upstream rev: edit, commit, then `export`.

    \b
    Examples:
      patchctl apply                                  # every series, at its pin
      patchctl apply llama.cpp --rev v0.3.33 --into /tmp/llama
      patchctl apply --json > apply.json
    """
    from .commands import apply as apply_mod

    try:
        results = apply_mod.apply(app.config, app.store, series, rev=rev, into=app.path(into), force=force)
    except apply_mod.ApplyFailed as failed:
        if as_json:
            emit_json({"ok": False, "results": [failed.result.to_json()]})
        raise
    if as_json:
        emit_json({"ok": True, "results": [r.to_json() for r in results]})
        return
    for result in results:
        where = _display_path(result.tree, app.workdir)
        if result.state == "unchanged":
            click.echo(f"{', '.join(result.series)}: already applied at {result.rev[:12]} in {where} (nothing to do)")
            continue
        click.echo(
            f"{', '.join(result.series)}: applied {len(result.outcomes)} patch(es) to {result.rev[:12]} in {where}"
        )
        for outcome in result.outcomes:
            click.echo(f"  {outcome.describe()}")


def _display_path(path: Path, base: Path) -> str:
    try:
        return str(path.relative_to(base))
    except ValueError:
        return str(path)


# ---------------------------------------------------------------- export


@cli.command("export")
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
    from .commands import export as export_mod

    config = app.config
    source = app.path(from_dir) or export_mod.default_from(config, config.get_series(series))
    try:
        result = export_mod.export(config, series, source, base=base, check=check)
    except export_mod.ExportOutOfDate as stale:
        if as_json:
            emit_json(stale.result.to_json())
        raise
    if as_json:
        emit_json(result.to_json())
        return
    for dropped in result.dropped_hunks:
        click.echo(f"dropped hunks on excluded path {dropped.path} (commit {dropped.commit_subject!r})")
    for subject in result.dropped_commits:
        click.echo(f"dropped commit {subject!r}: it only touches excluded paths")
    if check:
        click.echo(f"{series}: up to date ({len(result.unchanged)} patches)")
        return
    for name in result.written:
        click.echo(f"wrote   {name}")
    for old, new in result.renamed:
        click.echo(f"renamed {old} -> {new}")
    for name in result.deleted:
        click.echo(f"deleted {name}")
    click.echo(
        f"{series}: {len(result.written)} written, {len(result.renamed)} renamed, {len(result.deleted)} deleted, {len(result.unchanged)} unchanged; verified against {result.base[:12]}"
    )


# ---------------------------------------------------------------- lint


def print_findings(findings: list, as_json: bool) -> None:
    """Findings as text (and GitHub annotations under Actions) or JSON; exit 1 when any."""
    from .errors import CheckFailed
    from .findings import under_github_actions

    if as_json:
        emit_json({"ok": not findings, "findings": [f.to_json() for f in findings]})
    else:
        for finding in findings:
            click.echo(finding.format())
            if under_github_actions():
                click.echo(finding.annotation())
    if findings:
        raise CheckFailed(f"{len(findings)} finding(s)")


@cli.command("lint")
@click.argument("series", nargs=-1)
@click.option("--no-apply", is_flag=True, help="Skip the strict apply check (no upstream needed).")
@click.option("--json", "as_json", is_flag=True, help="Print findings as JSON.")
@pass_app
def lint_cmd(app: AppContext, series: tuple[str, ...], no_apply: bool, as_json: bool) -> None:
    """Check the series and the pins; exit 1 with one line per finding.

    \b
    Rules: PC001 numbering unique and contiguous, PC002 file names, PC003 patches parse,
    PC004 no hunk on an excluded path, PC005 no CRLF, PC006 no binary (unless the series
    allows them), PC007 subject, PC008 description, PC009 the series applies strictly to
    its pin, PC010 pin_files equal the pin, PC011 tracks constraints, PC012 no path outside
    the tree, PC013 no line past a hunk's declared counts (git apply would drop it). Findings print as FILE:LINE: RULE: message, and as ::error annotations
    under GitHub Actions.

    \b
    Examples:
      patchctl lint
      patchctl lint llama.cpp --no-apply --json
    """
    from .commands import lint as lint_mod

    findings = lint_mod.lint(app.config, None if no_apply else app.store, series, apply_check=not no_apply)
    print_findings(findings, as_json)
    if not as_json:
        click.echo("lint: no findings")


# ---------------------------------------------------------------- gate


@cli.command("gate")
@click.argument("series", nargs=-1)
@click.option(
    "--tree",
    type=click.Path(file_okay=False, path_type=Path),
    help="Applied tree to gate (default: .patchctl/trees/SERIES; one SERIES only).",
)
@click.option(
    "--update-baseline", is_flag=True, help="Record changed gate output digests in matrix.yaml instead of failing."
)
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@pass_app
def gate_cmd(app: AppContext, series: tuple[str, ...], tree: Path | None, update_baseline: bool, as_json: bool) -> None:
    """Run the gates matrix.yaml declares for SERIES (default: every series with gates).

    \b
    Gates run in order, each a shell command in the series' applied tree under its
    timeout; the first failure stops the run (exit 1) and names the gate, the failing case
    and the log. A gate with a baseline also checks the digest of what it produced. For
    this repository's llama.cpp series the gates regenerate the engine's conformance
    vectors, compile the C++ port with the system compiler and replay every vector.

    \b
    Examples:
      patchctl apply && patchctl gate
      patchctl gate llama.cpp --json
      patchctl gate llama.cpp --update-baseline     # after an intended engine change
    """
    from .commands import gate as gate_mod

    names = list(series) or [s.name for s in app.config.series.values() if s.gates]
    if not names:
        raise UsageError("matrix.yaml declares no gates")
    if tree is not None and len(names) != 1:
        raise UsageError("--tree needs exactly one SERIES")
    for name in names:
        try:
            results = gate_mod.run_gates(app.config, name, app.path(tree), update_baseline=update_baseline)
        except gate_mod.GatesFailed as failed:
            _print_gates(failed.results, as_json, name)
            raise
        _print_gates(results, as_json, name)


def _print_gates(results: list, as_json: bool, series: str) -> None:
    if as_json:
        emit_json({"series": series, "ok": all(r.ok for r in results), "gates": [r.to_json() for r in results]})
        return
    for result in results:
        status = "PASS" if result.ok else "FAIL"
        cases = f", {sum(c.ok for c in result.cases)}/{len(result.cases)} cases passed" if result.cases else ""
        baseline = f", baseline {result.baseline}" if result.baseline != "none" else ""
        click.echo(f"{status} {result.name} ({result.duration_s:.1f} s{cases}{baseline})")
        for case in result.cases:
            click.echo(f"    {'pass' if case.ok else 'FAIL'} {case.name}{': ' + case.detail if case.detail else ''}")


# ---------------------------------------------------------------- matrix

from . import matrix as _matrix_sections  # noqa: E402,F401  (registers the build-matrix validator with config.load)


@cli.group("matrix", cls=_Group)
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
    help="Template directory (default: templates/ next to matrix.yaml).",
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
    from .commands import matrix as matrix_mod
    from .errors import CheckFailed

    result = matrix_mod.render(app.config, check=check, templates=templates)
    if as_json:
        emit_json(result.to_json())
    if check:
        if result.stale:
            if not as_json:
                click.echo(result.diff(), nl=False)
            names = ", ".join(f.display for f in result.stale)
            raise CheckFailed(
                f"{len(result.stale)} rendered file(s) out of date: {names} (run `patchctl matrix render`)"
            )
        if not as_json:
            click.echo(f"matrix render: {len(result.files)} file(s) up to date")
        return
    if not as_json:
        for rendered in result.files:
            click.echo(f"{'wrote    ' if rendered.stale else 'unchanged'} {rendered.display}")


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
    Findings print as FILE:LINE: RULE: message (and ::error annotations under GitHub
    Actions). An allowlist silences known findings by rule and subject (a glob).

    \b
    Examples:
      patchctl matrix check
      patchctl matrix check --matrix .github/backend-matrix.yml --index backend/index.yaml \\
          --allow matrix-allow.yaml --json
    """
    from .commands import matrix as matrix_mod

    report = matrix_mod.check(
        lambda: app.config, app.workdir, matrix_path=matrix_path, index_path=index_path, allow_path=allow_path
    )
    if as_json:
        emit_json(report.to_json())
        if report.findings:
            from .errors import CheckFailed

            raise CheckFailed(f"{len(report.findings)} finding(s)")
        return
    for entry in report.unused_allow:
        click.echo(
            f"{entry.file}:{entry.line}: note: allowlist entry {entry.rule} {entry.subject!r} matched nothing; delete it"
        )
    print_findings(report.findings, False)
    silenced = f", {len(report.silenced)} allowed" if report.silenced else ""
    index = f" and {report.variants} index variant(s)" if report.index_file else ""
    click.echo(f"matrix check: {report.rows} row(s){index}, no findings{silenced}")


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
    globs in matrix.yaml (a shared path rebuilds every backend that lists it), or when
    the row itself changed in matrix.yaml. Without FILES or --base: uncommitted changes.
    --json gives GitHub Actions matrices: `fromJSON(...).linux` and `.darwin`.

    \b
    Examples:
      patchctl matrix changed backend/cpp/llama-cpp/grpc-server.cpp
      patchctl matrix changed --base origin/main --json > plan.json
      jq -c .linux plan.json      # strategy.matrix: ${{ fromJSON(needs.plan.outputs.linux) }}
    """
    from .commands import matrix as matrix_mod
    from .errors import UsageError

    if everything and (files or base):
        raise UsageError("--all takes no FILES and no --base")
    result = matrix_mod.changed(app.config, base=base, files=files, everything=everything)
    if as_json:
        emit_json(result.to_json())
        return
    for reason in result.reasons:
        click.echo(reason.describe())
    for row in result.edited_rows:
        click.echo(f"{row}: changed in matrix.yaml")
    for row in result.rows:
        click.echo(f"build {row.describe()}")
    click.echo(
        f"matrix changed: {len(result.rows)} row(s) of {', '.join(result.backends) or 'no backend'} from {len(result.files)} changed file(s)"
    )


# ---------------------------------------------------------------- pin-sync and canary


def _progress_display():
    """A one-line live status on stderr for long runs (builds stream their last line);
    nothing when stderr is not a terminal, so logs and CI output stay clean."""
    import contextlib

    if not sys.stderr.isatty():
        return contextlib.nullcontext(None)
    from rich.console import Console

    status = Console(stderr=True).status("starting")

    @contextlib.contextmanager
    def shown():
        with status:
            yield lambda line: status.update(line[:150] or "working")

    return shown()


@cli.command("pin-sync")
@click.argument("upstream", required=False)
@click.option("--to", "to", metavar="REV", help="Move the pin to REV (a commit, tag or branch upstream).")
@click.option("--latest", is_flag=True, help="Move the pin to the tip of the upstream's branch.")
@click.option("--dry-run", is_flag=True, help="Replay and run every gate, but write nothing.")
@click.option(
    "--continue", "resume", is_flag=True, help="Resume a stopped sync after resolving the conflict or fixing the gate."
)
@click.option("--abort", is_flag=True, help="Drop a stopped sync: remove its worktrees and state.")
@click.option(
    "--report",
    "report_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the Markdown report to FILE.",
)
@click.option(
    "--json", "json_file", type=click.Path(dir_okay=False, path_type=Path), help="Write the JSON report to FILE."
)
@pass_app
def pin_sync_cmd(
    app: AppContext,
    upstream: str | None,
    to: str | None,
    latest: bool,
    dry_run: bool,
    resume: bool,
    abort: bool,
    report_file: Path | None,
    json_file: Path | None,
) -> None:
    """Move UPSTREAM's pin forward, replaying its series and running every gate first.

    \b
    Each patch is replayed on the target with a 3-way merge and classified: clean,
    applied with offset, merged 3-way, already upstream (dropped) or conflict. A
    conflict stops the sync and leaves the markers in .patchctl/sync/UPSTREAM/SERIES;
    resolve there, then --continue (or --abort). Then, per series: strict apply of the
    re-exported series on a clean checkout of the target, its build steps, its gates.
    Only when all pass are patches/, `pin:` in matrix.yaml and every pin_files entry
    written (also for upstreams that `tracks` this one), all together or not at all.
    Exit 1 when it stops at a conflict or a failing gate.

    \b
    Examples:
      patchctl pin-sync llama.cpp --latest --report sync.md
      patchctl pin-sync llama.cpp --to aa601ae300d05a804f5f68940ab6fa75fc9653d3 --dry-run
      patchctl pin-sync --continue          # after resolving and `git add` in the sync tree
      patchctl pin-sync --abort
    """
    from . import report as report_mod
    from .commands import pin_sync as sync_mod
    from .errors import UsageError

    if resume and abort:
        raise UsageError("--continue and --abort exclude each other")
    if (resume or abort) and (to or latest or dry_run):
        raise UsageError("--continue/--abort take no --to, --latest or --dry-run")
    config = app.config
    report_file, json_file = app.path(report_file), app.path(json_file)
    report = None
    try:
        with _progress_display() as progress:
            if abort:
                report = sync_mod.abort_sync(config, app.store, upstream)
            elif resume:
                report = sync_mod.continue_sync(config, app.store, upstream, progress=progress)
            else:
                report = sync_mod.pin_sync(
                    config, app.store, upstream, to=to, latest=latest, dry_run=dry_run, progress=progress
                )
    except sync_mod.SyncStopped as stopped:
        report = stopped.report
        raise
    finally:
        if report is not None:
            payload = report.to_json()
            markdown = report_mod.sync_markdown(payload)
            if report_file:
                report_mod.write_text(report_file, markdown)
            if json_file:
                report_mod.write_json(json_file, payload)
            click.echo(markdown, nl=False)


@cli.command("canary")
@click.argument("upstream", required=False)
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
    "--json", "json_file", type=click.Path(dir_okay=False, path_type=Path), help="Write the JSON report to FILE."
)
@click.option(
    "--summary",
    "summary_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the Markdown report to FILE (it is also appended to $GITHUB_STEP_SUMMARY when set).",
)
@click.option(
    "--toolchain",
    "toolchains",
    multiple=True,
    metavar="NAME",
    envvar="PATCHCTL_CANARY_TOOLCHAIN",
    help="With --compile, only this canary toolchain (repeatable; also $PATCHCTL_CANARY_TOOLCHAIN: one CI job per toolchain).",
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
    json_file: Path | None,
    summary_file: Path | None,
    toolchains: tuple[str, ...],
    work_dir: Path | None,
) -> None:
    """Apply every series to the upstream tip: an early warning that never modifies the repository.

    \b
    Each patch is applied strictly; one that fails is tried with a 3-way merge, which
    says whether a pin-sync would be mechanical or needs a hand, and the upstream
    history between the pin and the tip is bisected to name the first commit that
    breaks it. With --compile the series' build steps run once per toolchain in
    matrix.yaml's canary section (in that toolchain's image), each in a clean tree.
    Exit 1 when red: a patch fails strictly or a compile fails.

    \b
    Examples:
      patchctl canary llama.cpp
      patchctl canary --compile --json canary.json --summary canary.md
      patchctl canary llama.cpp --rev aa601ae300d05a804f5f68940ab6fa75fc9653d3 --no-bisect
      patchctl canary llama.cpp --rev "$REV" --compile --toolchain cpu-amd64
    """
    from . import report as report_mod
    from .commands import canary as canary_mod
    from .errors import CheckFailed, UsageError

    if rev and latest:
        raise UsageError("--rev and --latest exclude each other")
    json_file, summary_file, work_dir = app.path(json_file), app.path(summary_file), app.path(work_dir)
    with _progress_display() as progress:
        report = canary_mod.canary(
            app.config,
            app.store,
            upstream,
            rev=rev,
            compile=do_compile,
            bisect=bisect,
            toolchains=toolchains,
            work_dir=work_dir,
            progress=progress,
        )
    payload = report.to_json()
    markdown = report_mod.canary_markdown(payload)
    if json_file:
        report_mod.write_json(json_file, payload)
    if summary_file:
        report_mod.write_text(summary_file, markdown)
    report_mod.append_step_summary(markdown)
    click.echo(markdown, nl=False)
    if report.red:
        failing = [f"{s.name}/{p.patch}" for s in report.series for p in s.patches if p.verdict != "ok"]
        broken = [f"{c.toolchain}/{c.series}" for c in report.compiles if c.state == "failed"]
        raise CheckFailed(
            "canary is red: "
            + "; ".join(
                x
                for x in (
                    f"{len(failing)} patch(es) fail strictly ({', '.join(failing[:5])})" if failing else "",
                    f"compile failed for {', '.join(broken)}" if broken else "",
                )
                if x
            )
        )
