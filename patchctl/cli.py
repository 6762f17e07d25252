"""The patchctl command line: the group, its global options and `main`.

Each command lives in `patchctl/commands/` and is registered here, in the order `--help`
lists them, by name (`patchctl.lazy`): a command's module is imported only when it runs.
Commands parse their options, call one domain function and print its result. Domain code
raises typed errors (`patchctl.errors`); `main` turns them into one line on stderr and the
documented exit code: 0 ok, 1 check failed, 2 usage or configuration error, 3 environment
error (network, git, Docker). `--debug` shows the traceback instead.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import click

from . import __version__, progress
from .app import AppContext
from .errors import ExitCode, PatchctlError
from .lazy import LazyGroup
from .upstream_source import UPSTREAM_SOURCE_ENV, UPSTREAM_SOURCES


def usage_line(exc: click.ClickException) -> str:
    """Click's three-line usage error as one line: `export: missing argument SERIES (see
    'patchctl export --help')`."""
    message = exc.format_message().strip().rstrip(".")
    if isinstance(exc, click.MissingParameter) and exc.param is not None:
        # Click quotes the metavar ('SERIES'); the README and --help write it bare.
        message = re.sub(r"'([A-Z][A-Z0-9_.]*)'", r"\1", message)
    message = message[:1].lower() + message[1:]
    ctx = getattr(exc, "ctx", None)
    if ctx is None:
        return message
    path = ctx.command_path
    command = path.partition(" ")[2]
    prefix = f"{command}: " if command else ""
    return f"{prefix}{message} (see '{path} --help')"


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option(
    "-C", "directory", type=click.Path(file_okay=False, path_type=Path), help="Run as if started in DIR (like git -C)."
)
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Use FILE instead of the nearest matrix.yaml in DIR or its parents (as git finds .git).",
)
@click.option(
    "--upstream-url",
    "url_overrides",
    multiple=True,
    metavar="NAME=URL",
    help="Point upstream NAME at another URL or path (a mirror). Repeatable; also $PATCHCTL_UPSTREAM_URL.",
)
@click.option(
    "-q", "--quiet", is_flag=True, help="No progress lines on stderr (also $PATCHCTL_QUIET=1); errors still print."
)
@click.option(
    "--upstream-source",
    type=click.Choice(UPSTREAM_SOURCES),
    default="default",
    envvar=UPSTREAM_SOURCE_ENV,
    show_default=True,
    help="ci: follow each upstream's `ci:` url, branch and pin (the rendered canary sets "
    "$PATCHCTL_UPSTREAM_SOURCE=ci); default: the embedded url.",
)
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors.")
@click.version_option(__version__, prog_name="patchctl")
@click.pass_context
def cli(
    ctx: click.Context,
    directory: Path | None,
    config_file: Path | None,
    url_overrides: tuple[str, ...],
    quiet: bool,
    upstream_source: str,
    debug: bool,
) -> None:
    """Keep a vendored patch series alive on top of a fast-moving upstream.

    \b
    patchctl keeps the upstream pins in matrix.yaml, applies each patch series strictly and
    transactionally, regenerates it deterministically, moves a pin forward behind gates
    (pin-sync), runs a canary on the upstream tip, and renders the CI build matrix.

    \b
    Exit codes: 0 ok, 1 check failed, 2 usage or configuration error,
                3 environment error (network, git, Docker).

    \b
    Shell completion (commands, series, upstreams), in ~/.bashrc:
      eval "$(_PATCHCTL_COMPLETE=bash_source patchctl)"    # zsh_source, fish_source: see the manual
    """
    ctx.obj = AppContext(directory, config_file, url_overrides, debug, upstream_source=upstream_source)
    if not (quiet or progress.quiet_from_env()):
        progress.install(sys.stderr)
        ctx.call_on_close(progress.uninstall)


def main(argv: list[str] | None = None) -> int:
    debug = "--debug" in (sys.argv[1:] if argv is None else argv)
    try:
        try:
            cli.main(args=argv, prog_name="patchctl", standalone_mode=False)
        finally:
            progress.uninstall()  # the live line leaves the terminal before the error line
    except PatchctlError as exc:
        if debug:
            raise
        click.echo(f"patchctl: error: {exc}", err=True)
        return int(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("patchctl: aborted", err=True)
        return 130
    except click.ClickException as exc:
        if debug:
            raise
        if type(exc).__name__ == "NoArgsIsHelpError":  # `patchctl`, `patchctl matrix`: the help, as git does
            exc.show()
            return int(ExitCode.USAGE)
        click.echo(f"patchctl: error: {usage_line(exc)}", err=True)
        return int(ExitCode.USAGE) if exc.exit_code == 2 else exc.exit_code
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except KeyboardInterrupt:
        click.echo("patchctl: interrupted", err=True)
        return 130
    return int(ExitCode.OK)


# In the order a user meets them: `--help` lists them so. Each module is imported when its
# command runs; the summary (the first paragraph of the command's help) is what `--help`
# lists meanwhile (tests/patchctl/test_startup.py checks that the two agree).
cli.add_lazy_command(
    "apply",
    "patchctl.commands.apply:apply_cmd",
    "Check out the upstream at its pin and apply SERIES (default: all) strictly.",
)
cli.add_lazy_command(
    "export",
    "patchctl.commands.export:export_cmd",
    "Regenerate SERIES from the commits on top of the pin in a work tree.",
)
cli.add_lazy_command(
    "lint",
    "patchctl.commands.lint:lint_cmd",
    "Check the series and the pins; exit 1 with one line per finding.",
)
cli.add_lazy_command(
    "gate",
    "patchctl.commands.gate:gate_cmd",
    "Run the gates matrix.yaml declares for SERIES (default: every series with gates).",
)
cli.add_lazy_command(
    "matrix",
    "patchctl.commands.matrix:matrix_group",
    "The CI build matrix: render workflows and the backend index, check invariants, pick rows.",
)
cli.add_lazy_command(
    "pin-sync",
    "patchctl.commands.pin_sync:pin_sync_cmd",
    "Move UPSTREAM's pin forward, replaying its series and running every gate first.",
)
cli.add_lazy_command(
    "canary",
    "patchctl.commands.canary:canary_cmd",
    "Apply every series to the upstream tip: an early warning that never modifies the repository.",
)
cli.add_lazy_command(
    "vendor",
    "patchctl.commands.vendor:vendor_cmd",
    "Write the vendored copies of SERIES (default: every series with `vendor:`) from pin + series.",
)
cli.add_lazy_command(
    "init",
    "patchctl.commands.init:init_cmd",
    "Write matrix.yaml, templates/ and a pre-commit config, or adopt an existing layout.",
)
