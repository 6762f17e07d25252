"""A Click group that imports a subcommand's module only when that subcommand runs.

`patchctl --help` lists every command from a summary registered beside it (the first
paragraph of its help, which tests/patchctl/test_startup.py checks against the command), so
listing them imports none; `patchctl lint` imports `patchctl.commands.lint` and what it uses,
never `canary`'s or `matrix`'s modules (Docker, Jinja, Rich, ...). This keeps the start-up
of every command to what it needs (bench/startup_bench.py measures it).
"""

from __future__ import annotations

import click


class LazyCommand:
    """A command known by name until it runs. (A plain class: a dataclass costs every start.)"""

    __slots__ = ("summary", "target")

    def __init__(self, target: str, summary: str) -> None:
        self.target = target  # "package.module:attribute"
        self.summary = summary  # the first paragraph of the command's help, as `--help` lists it

    def load(self) -> click.Command:
        module, _, attribute = self.target.partition(":")
        # The import statement's own path, not importlib.import_module: `python -X importtime`
        # reports only imports made that way, and this one is what a command's start-up adds.
        command = getattr(__import__(module, fromlist=[attribute]), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{self.target} is not a Click command")
        return command


class LazyGroup(click.Group):
    """Commands added with `add_lazy_command` are imported on first use (`get_command`);
    `--help` and `list_commands` show them in the order they were added, without importing."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.lazy_commands: dict[str, LazyCommand] = {}

    def add_lazy_command(self, name: str, target: str, summary: str) -> None:
        self.lazy_commands[name] = LazyCommand(target, summary)

    def list_commands(self, ctx: click.Context) -> list[str]:
        # In the order they were added: the order a user meets them.
        return [*self.lazy_commands, *(name for name in self.commands if name not in self.lazy_commands)]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy_commands:
            command = self.lazy_commands[cmd_name].load()
            if command.name != cmd_name:
                raise ValueError(f"{self.lazy_commands[cmd_name].target} is named {command.name!r}, not {cmd_name!r}")
            self.add_command(command, cmd_name)
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """Click's own listing, with the registered summary of every command not yet imported."""
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows = []
        for name in names:
            if name in self.commands:
                command = self.commands[name]
                if command.hidden:
                    continue
                rows.append((name, command.get_short_help_str(limit)))
            else:
                # Click's own shortening, applied to the summary (a command is not imported for it).
                rows.append(
                    (name, click.Command(name, help=self.lazy_commands[name].summary).get_short_help_str(limit))
                )
        with formatter.section("Commands"):
            formatter.write_dl(rows)
