"""The patchctl command line: the group, its global options and `main`.

Each command lives in `patchctl/commands/` and is registered here, in the order `--help`
lists them. Commands parse their options, call one domain function and print its result. Domain code
raises typed errors (`patchctl.errors`); `main` turns them into one line on stderr and the
documented exit code: 0 ok, 1 check failed, 2 usage or configuration error, 3 environment
error (network, git, Docker). `--debug` shows the traceback instead.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from . import __version__
from . import config as config_mod
from .app import AppContext, CommandGroup
from .commands.apply import apply_cmd
from .commands.canary import canary_cmd
from .commands.export import export_cmd
from .commands.gate import gate_cmd
from .commands.lint import lint_cmd
from .commands.matrix import matrix_group
from .commands.pin_sync import pin_sync_cmd
from .errors import ExitCode, PatchctlError


@click.group(cls=CommandGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
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
@click.option(
    "--upstream-source",
    type=click.Choice(config_mod.UPSTREAM_SOURCES),
    default="default",
    envvar=config_mod.UPSTREAM_SOURCE_ENV,
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
    """
    ctx.obj = AppContext(directory, config_file, url_overrides, debug, upstream_source=upstream_source)


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


# In the order a user meets them: `--help` lists them so.
for command in (apply_cmd, export_cmd, lint_cmd, gate_cmd, matrix_group, pin_sync_cmd, canary_cmd):
    cli.add_command(command)
