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
from .errors import ExitCode, PatchctlError
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


pass_app = click.make_pass_decorator(AppContext)


def emit_json(payload: Any) -> None:
    click.echo(json.dumps(payload, indent=2, sort_keys=True, default=str))


class _Group(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)  # in definition order: the order a user meets them


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("-C", "directory", type=click.Path(file_okay=False, path_type=Path), help="Run as if started in DIR (like git -C).")
@click.option("--config", "config_file", type=click.Path(dir_okay=False, path_type=Path), help="Use FILE instead of DIR/matrix.yaml.")
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
def cli(ctx: click.Context, directory: Path | None, config_file: Path | None, url_overrides: tuple[str, ...], debug: bool) -> None:
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
@click.option("--into", type=click.Path(file_okay=False, path_type=Path), help="Target tree (default: .patchctl/trees/SERIES).")
@click.option("--force", is_flag=True, help="Replace a target that has local changes or was not made by patchctl.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_app
def apply_cmd(app: AppContext, series: tuple[str, ...], rev: str | None, into: Path | None, force: bool, as_json: bool) -> None:
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
        results = apply_mod.apply(app.config, app.store, series, rev=rev, into=into, force=force)
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
        click.echo(f"{', '.join(result.series)}: applied {len(result.outcomes)} patch(es) to {result.rev[:12]} in {where}")
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
@click.option("--from", "from_dir", type=click.Path(file_okay=False, path_type=Path), help="Work tree whose commits on top of the pin become the series (default: .patchctl/trees/SERIES).")
@click.option("--base", help="Commit the series starts from (default: the upstream's pin).")
@click.option("--check", is_flag=True, help="Write nothing; exit 1 listing the patches that are out of date.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_app
def export_cmd(app: AppContext, series: str, from_dir: Path | None, base: str | None, check: bool, as_json: bool) -> None:
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
    source = from_dir if from_dir is not None else export_mod.default_from(config, config.get_series(series))
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
    click.echo(f"{series}: {len(result.written)} written, {len(result.renamed)} renamed, {len(result.deleted)} deleted, {len(result.unchanged)} unchanged; verified against {result.base[:12]}")


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
    the tree. Findings print as FILE:LINE: RULE: message, and as ::error annotations
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
@click.argument("series")
@click.option("--tree", type=click.Path(file_okay=False, path_type=Path), help="Applied tree to gate (default: .patchctl/trees/SERIES).")
@click.option("--update-baseline", is_flag=True, help="Record changed gate output digests in matrix.yaml instead of failing.")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@pass_app
def gate_cmd(app: AppContext, series: str, tree: Path | None, update_baseline: bool, as_json: bool) -> None:
    """Run the gates matrix.yaml declares for SERIES on its applied tree.

    \b
    Gates run in order, each a shell command in the tree under its timeout; the first
    failure stops the run (exit 1) and names the gate, the failing case and the log.
    A gate with a baseline also checks the digest of what it produced. For this
    repository's llama.cpp series the gates regenerate the engine's conformance vectors,
    compile the C++ port with the system compiler and replay every vector bit-exactly.

    \b
    Examples:
      patchctl apply llama.cpp && patchctl gate llama.cpp
      patchctl gate llama.cpp --json
      patchctl gate llama.cpp --update-baseline     # after an intended engine change
    """
    from .commands import gate as gate_mod

    try:
        results = gate_mod.run_gates(app.config, series, tree, update_baseline=update_baseline)
    except gate_mod.GatesFailed as failed:
        _print_gates(failed.results, as_json, series)
        raise
    _print_gates(results, as_json, series)


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
