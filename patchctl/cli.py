"""The patchctl command line: the group, its global options and `main`.

Each command lives in `patchctl/commands/` and is registered here, in the order `--help`
lists them, by name (`patchctl.lazy`): a command's module is imported only when it runs.
Commands parse their options, call one domain function and print its result. Domain code
raises typed errors (`patchctl.errors`); `main` turns them into one line on stderr and the
documented exit code: 0 ok, 1 check failed, 2 usage or configuration error, 3 environment
error (network, git, Docker). `--debug` prints the traceback before that line; the exit code
stays the one the error stands for.
"""

from __future__ import annotations

import contextlib
import gc
import re
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import click

from . import __version__
from .app import AppContext
from .errors import EnvironmentFailure, ExitCode, PatchctlError
from .lazy import LazyGroup
from .output import progress
from .output.escape import log_line
from .project.upstream_source import UPSTREAM_SOURCE_ENV, UPSTREAM_SOURCES


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
@click.option(
    "--debug", is_flag=True, help="Print the traceback before an error's line (the exit code stays the same)."
)
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
    # -C is made absolute at once: `apply` may replace the tree the command was started in
    # (`patchctl -C ../../.. apply --force` from inside .patchctl/trees/SERIES), and a relative
    # path means nothing once the working directory is gone.
    ctx.obj = AppContext(
        _start_directory(directory), config_file, url_overrides, debug, upstream_source=upstream_source
    )
    if not (quiet or progress.quiet_from_env()):
        progress.install(sys.stderr)
        ctx.call_on_close(progress.uninstall)


def _start_directory(directory: Path | None) -> Path:
    """-C DIR (default: the working directory) as an absolute path, its links resolved now."""
    try:
        cwd = Path.cwd()
    except FileNotFoundError:
        raise EnvironmentFailure(
            "the working directory no longer exists (a tree patchctl replaced, or removed while a shell stood in "
            "it): cd into the project again"
        ) from None
    return (cwd / directory).resolve() if directory is not None else cwd


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP (what `timeout`, `kill`, systemd and a cancelled CI job send): raised
    where the signal lands, so that the run unwinds exactly as Ctrl-C unwinds it (every
    `finally` and `except KeyboardInterrupt` on the way: build containers removed, process
    groups killed, temporary trees and worktrees removed, the lock released)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


_TERMINATING = (signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def _signals_unwind() -> Iterator[None]:
    """Turn the first SIGTERM or SIGHUP into `Terminated`; later ones are ignored, so that the
    cleanup the first one started runs to its end (SIGKILL still ends it). The previous
    handlers are put back afterwards (`main` also runs inside tests)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def unwind(signum: int, _frame: object) -> None:
        for each in _TERMINATING:
            signal.signal(each, wait_for_cleanup)  # a handler, not SIG_IGN: children must not inherit it
        raise Terminated(signum)

    def wait_for_cleanup(_signum: int, _frame: object) -> None:
        pass

    previous = {each: signal.signal(each, unwind) for each in _TERMINATING}
    try:
        yield
    finally:
        for each, handler in previous.items():
            signal.signal(each, handler)


def _stopped(exc: BaseException) -> int:
    """The line and exit code of a run stopped by Ctrl-C or a terminating signal (128 + its number)."""
    cause = exc if isinstance(exc, Terminated) else exc.__cause__ or exc.__context__
    if isinstance(cause, Terminated):
        name = signal.Signals(cause.signum).name
        click.echo(f"patchctl: terminated by {name}; its containers and temporary trees were removed", err=True)
        return 128 + cause.signum
    interrupted = isinstance(exc, KeyboardInterrupt) or isinstance(cause, KeyboardInterrupt)
    click.echo("patchctl: interrupted" if interrupted else "patchctl: aborted", err=True)
    return 130


def main(argv: list[str] | None = None) -> int:
    debug = "--debug" in (sys.argv[1:] if argv is None else argv)
    try:
        with _signals_unwind():
            try:
                cli.main(args=argv, prog_name="patchctl", standalone_mode=False)
            finally:
                progress.uninstall()  # the live line leaves the terminal before the error line
    except PatchctlError as exc:
        if debug:
            _print_traceback()
        click.echo(log_line(f"patchctl: error: {exc}"), err=True)  # one line, whatever names it quotes
        return int(exc.exit_code)
    except click.exceptions.Abort as exc:  # Click's word for a KeyboardInterrupt in a command
        return _stopped(exc)
    except click.ClickException as exc:
        if debug:
            _print_traceback()
        if type(exc).__name__ == "NoArgsIsHelpError":  # `patchctl`, `patchctl matrix`: the help, as git does
            exc.show()
            return int(ExitCode.USAGE)
        click.echo(log_line(f"patchctl: error: {usage_line(exc)}"), err=True)
        return int(ExitCode.USAGE) if exc.exit_code == 2 else exc.exit_code
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except KeyboardInterrupt as exc:
        return _stopped(exc)
    return int(ExitCode.OK)


def _print_traceback() -> None:
    """--debug: the traceback of the error being handled (imported here: only --debug needs it)."""
    import traceback

    traceback.print_exc()


def run() -> NoReturn:
    """The `patchctl` program (and `python -m patchctl`): `main`, then exit with its code."""
    # A command makes its objects in bursts (a series parsed, a diff read) and drops them as it
    # goes: the cyclic collector's default first threshold (a pass every 700 allocations, over
    # what the imports made too) cost a `pin-sync --continue` 3 to 10 ms of its 270 in paired
    # runs. Cycles are still collected, less often.
    gc.set_threshold(10_000, 10, 10)
    code = main()
    # The exit frees what is left: the last full collection over every object the command made,
    # which the interpreter otherwise runs on its way out, costs about a tenth of a short
    # command's time (a `pin-sync --continue`) for nothing. Not in `main`, which tests call.
    gc.freeze()
    sys.exit(code)


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
    "status",
    "patchctl.commands.status:status_cmd",
    "The health of each series: upstream status, age, drift and verdict of every patch.",
)
cli.add_lazy_command(
    "dashboard",
    "patchctl.commands.dashboard:dashboard_cmd",
    "One issue per repository that says how every series stands, kept up to date.",
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
