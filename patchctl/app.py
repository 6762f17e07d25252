"""What every Click command shares: the application context (-C, --config, --upstream-url,
--debug), JSON and findings output, the command group class and the live progress line."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from .errors import CheckFailed, PatchctlError, UsageError
from .output import progress
from .output.escape import log_block, log_line
from .records import dataclass

# Imported where used, not here: every command imports this module, and `patchctl --help` or
# `lint` must not pay for the store's, the lock's or the recovery's imports (patchctl.lazy).
if TYPE_CHECKING:
    from .output.findings import Finding
    from .project import config as config_mod
    from .state.lock import ProjectLock
    from .upstream.store import Store


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
        """Hold the project's lock (`.git/patchctl/lock`) until this command ends. Every command
        that writes calls this first, before `config`, so recovery and loading happen under it."""
        if self._lock is not None:  # taken again after `unlock_project`
            self._lock.acquire()
            return
        from .project import config as config_mod
        from .state.lock import ProjectLock, lock_timeout

        ctx = click.get_current_context()
        command = ctx.command_path.partition(" ")[2] or ctx.command_path
        path = config_mod.find_config(self.directory, self.config_file)
        self._lock = ProjectLock(path.parent, command, lock_timeout())
        self._lock.acquire()
        ctx.call_on_close(self._lock.release)

    def unlock_project(self) -> None:
        """Let go of the lock for a while (`pin-sync --wait` waiting for the user); `lock_project`
        takes it again."""
        if self._lock is not None:
            self._lock.release()

    def reload_config(self) -> None:
        """Read matrix.yaml again on the next use of `config`: what a new run would read."""
        self._config = None

    @property
    def config(self) -> config_mod.Config:
        if self._config is None:
            from .matrix.sources import load_project
            from .project import config as config_mod
            from .state.lock import ProjectLock, lock_timeout
            from .state.recovery import recover_project

            path = config_mod.find_config(self.directory, self.config_file)
            # A killed run's half-written state is put right before anything reads the repository.
            lock = self._lock or ProjectLock(path.parent, "recovery", lock_timeout())
            for line in recover_project(path, lock):
                click.echo(log_line(f"patchctl: {line}"), err=True)
            loaded = load_project(path)
            loaded = loaded.with_upstream_source(self.upstream_source)
            self._config = loaded.with_url_overrides(config_mod.parse_url_overrides(self.url_overrides))
        return self._config

    @property
    def store(self) -> Store:
        if self._store is None:
            from .upstream.store import Store

            self._store = Store()
        return self._store

    @property
    def root(self) -> Path:
        """The directory of matrix.yaml (found as `config` finds it), without loading it."""
        from .project import config as config_mod

        return config_mod.find_config(self.directory, self.config_file).parent

    @property
    def workdir(self) -> Path:
        """-C DIR, or the directory patchctl started in (absolute since `cli` made it so), resolved."""
        return (self.directory or Path.cwd()).resolve()

    def path(self, value: Path | None) -> Path | None:
        """A path option, relative to -C DIR like git's."""
        return None if value is None else (self.workdir / value).resolve()

    def output(self, value: Path | None) -> Path | None:
        """A file option the command writes (`--json-file`, `--html`), relative to -C DIR, its links
        not resolved: one that lies in the repository as written is written there through no link."""
        return None if value is None else self.workdir / value


pass_app = click.make_pass_decorator(AppContext)


class CommandGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)  # in definition order: the order a user meets them


def complete_series(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    """Shell completion of SERIES arguments: the series matrix.yaml defines."""
    return _complete_names(ctx, "series", incomplete)


def complete_upstreams(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    """Shell completion of UPSTREAM arguments: the upstreams matrix.yaml defines."""
    return _complete_names(ctx, "upstreams", incomplete)


def _complete_names(ctx: click.Context, section: str, incomplete: str) -> list[str]:
    """The keys of SECTION in the matrix.yaml that -C/--config (or the walk up) finds. A
    completion never fails: nothing to offer when the file is missing or broken."""
    from .project import config as config_mod

    params = ctx.find_root().params
    try:
        path = config_mod.find_config(params.get("directory"), params.get("config_file"))
        import yaml  # only completion reads the file this loosely

        from .confined import Root

        text = (Root(path.parent).read_bytes(path.name, 16 * 1024 * 1024) or b"").decode("utf-8")
        data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        names = sorted(str(name) for name in (data.get(section) or {}))
    except Exception:  # noqa: BLE001 - a shell completion must never print a traceback
        return []
    return [name for name in names if name.startswith(incomplete)]


def json_options(upstream: str | None, as_json: bool, json_file: Path | None) -> tuple[bool, Path | None]:
    """`--json` (a flag: JSON on stdout, as in every command) and `--json-file FILE` ('-' is
    stdout) of canary and pin-sync. `--json FILE`, their old spelling, leaves FILE as the
    UPSTREAM argument: that is said in one line instead of "unknown upstream"."""
    if as_json and upstream and upstream.endswith(".json"):
        raise UsageError(
            f"--json is a flag (JSON on stdout, as in every command); to write the report to {upstream}, "
            f"use --json-file {upstream}"
        )
    if json_file is not None and str(json_file) == "-":
        return True, None
    return as_json, json_file


def emit_json(payload: Any) -> None:
    """PAYLOAD (dataclasses included) as indented JSON with sorted keys."""
    import json

    from .output.jsonout import to_json

    click.echo(json.dumps(to_json(payload), indent=2, sort_keys=True, default=str))


def echo_lines(lines: list[str], *, err: bool = False) -> None:
    """LINES of plain output, each one line that no upstream name can split or turn into a
    workflow command (patchctl.output.escape.log_line)."""
    for line in lines:
        click.echo(log_line(line), err=err)


def echo_report(markdown: str) -> None:
    """A Markdown report on stdout, as plain text (`terminal_text`: Markdown's escapes are for
    the Markdown outputs, --report and the summaries). It quotes upstream text verbatim in its
    code blocks (a build log's tail): under GitHub Actions, with workflow commands off while it prints."""
    from .output.escape import terminal_text
    from .output.findings import under_github_actions

    text = terminal_text(markdown)
    click.echo(log_block(text) if under_github_actions() else text, nl=False)


def publish_report(
    payload: dict, markdown: str, *, markdown_file: Path | None, json_file: Path | None, as_json: bool
) -> None:
    """A report (PAYLOAD, and MARKDOWN made of it) written where the command was asked to write
    it, then printed: as JSON with --json, else as plain text (`echo_report`)."""
    from .confined import named

    repository = _repository_of_outputs()
    if markdown_file:
        named.write_text(markdown_file, markdown, repository)
    if json_file:
        named.write_json(json_file, payload, repository)
    if as_json:
        emit_json(payload)
    else:
        echo_report(markdown)


def _repository_of_outputs() -> Path | None:
    """The repository of the running command (where a file it is asked to write goes through no
    link), or None outside one."""
    ctx = click.get_current_context(silent=True)
    app = ctx.find_object(AppContext) if ctx is not None else None
    if app is None:
        return None
    try:
        return app.root
    except PatchctlError:
        return None


def print_findings(findings: list[Finding], as_json: bool, bases: tuple[Path, ...] = ()) -> None:
    """Findings as text (and GitHub annotations under Actions) or JSON; exit 1 when any.
    BASES: where the findings' relative paths start (annotations need repository paths)."""
    from .output.findings import under_github_actions

    if as_json:
        emit_json({"ok": not findings, "findings": findings})
    else:
        for finding in findings:
            click.echo(log_line(finding.format()))
            if under_github_actions():
                click.echo(finding.annotation(bases))
    if findings:
        raise CheckFailed(f"{len(findings)} finding(s)")


def progress_display() -> AbstractContextManager[Callable[[str], None] | None]:
    """The `progress` callback of pin-sync and canary: their milestones as progress lines
    (live on a terminal, timestamped in logs; see `patchctl.output.progress`), nothing with -q."""
    return contextlib.nullcontext(progress.say)
