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
