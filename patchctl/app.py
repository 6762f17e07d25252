"""What every Click command shares: the application context (-C, --config, --upstream-url,
--debug), JSON and findings output, the command group class and the live progress line."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from . import config as config_mod
from .errors import CheckFailed
from .findings import Finding, under_github_actions
from .jsonout import to_json
from .lock import ProjectLock, lock_timeout
from .recovery import recover_project
from .store import Store


@dataclass
class AppContext:
    directory: Path | None
    config_file: Path | None
    url_overrides: tuple[str, ...]
    debug: bool
    upstream_source: str = "default"  # `ci`: each upstream's matrix.yaml `ci:` source (config.with_upstream_source)
    _config: config_mod.Config | None = field(default=None, repr=False)
    _store: Store | None = field(default=None, repr=False)
    _lock: ProjectLock | None = field(default=None, repr=False)

    def lock_project(self) -> None:
        """Hold the project's lock (`.patchctl/lock`) until this command ends. Every command
        that writes calls this first, before `config`, so recovery and loading happen under it."""
        ctx = click.get_current_context()
        command = ctx.command_path.partition(" ")[2] or ctx.command_path
        path = config_mod.find_config(self.directory, self.config_file)
        self._lock = ProjectLock(path.parent, command, lock_timeout())
        self._lock.acquire()
        ctx.call_on_close(self._lock.release)

    @property
    def config(self) -> config_mod.Config:
        if self._config is None:
            path = config_mod.find_config(self.directory, self.config_file)
            # A killed run's half-written state is put right before anything reads the repository.
            lock = self._lock or ProjectLock(path.parent, "recovery", lock_timeout())
            for line in recover_project(path.parent, lock):
                click.echo(f"patchctl: {line}", err=True)
            loaded = config_mod.load(path)
            loaded = loaded.with_upstream_source(self.upstream_source)
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


class CommandGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)  # in definition order: the order a user meets them


def emit_json(payload: Any) -> None:
    """PAYLOAD (dataclasses included) as indented JSON with sorted keys."""
    click.echo(json.dumps(to_json(payload), indent=2, sort_keys=True, default=str))


def echo_lines(lines: list[str]) -> None:
    for line in lines:
        click.echo(line)


def print_findings(findings: list[Finding], as_json: bool) -> None:
    """Findings as text (and GitHub annotations under Actions) or JSON; exit 1 when any."""
    if as_json:
        emit_json({"ok": not findings, "findings": findings})
    else:
        for finding in findings:
            click.echo(finding.format())
            if under_github_actions():
                click.echo(finding.annotation())
    if findings:
        raise CheckFailed(f"{len(findings)} finding(s)")


def progress_display() -> AbstractContextManager[Callable[[str], None] | None]:
    """A one-line live status on stderr for long runs (builds stream their last line);
    nothing when stderr is not a terminal, so logs and CI output stay clean."""
    if not sys.stderr.isatty():
        return contextlib.nullcontext(None)
    from rich.console import Console

    status = Console(stderr=True).status("starting")

    @contextlib.contextmanager
    def shown() -> Iterator[Callable[[str], None]]:
        with status:
            yield lambda line: status.update(line[:150] or "working")

    return shown()
