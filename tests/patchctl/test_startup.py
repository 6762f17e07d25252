"""Start-up: a command imports only what it uses (patchctl.lazy). `--help` lists every
command from its registered summary, identical to the command's own help, without importing
any command module; a command imports its own module and not the others'. No timing here:
bench/startup_bench.py measures it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import click
import pytest

from patchctl import git
from patchctl.cli import cli
from patchctl.lazy import LazyGroup

from .matrix_fixtures import GOOD, REPO

# Every command, by name, and its module (`patchctl.commands.NAME`, with - for _).
COMMAND_MODULES = {name: lazy.target.partition(":")[0] for name, lazy in cli.lazy_commands.items()}
COMMANDS_DIR = Path(__file__).resolve().parents[2] / "patchctl" / "commands"
# Third-party and standard-library modules no start-up needs: each belongs to some commands' work.
HEAVY = ("docker", "jinja2", "rich", "git", "yaml", "filelock", "urllib.request", "unidiff", "tarfile")


def modules_after(tmp_path: Path, *args: str) -> tuple[int, set[str], str]:
    """Run `patchctl ARGS` in a fresh interpreter in TMP_PATH; (exit code, the modules it imported, output)."""
    probe = (
        "import json, sys\n"
        "from patchctl.cli import main\n"
        f"code = main({list(args)!r})\n"
        "print('MODULES=' + json.dumps(sorted(sys.modules)))\n"
        "sys.exit(code)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True)
    out, _, modules = done.stdout.rpartition("MODULES=")
    assert modules, done.stdout + done.stderr
    return done.returncode, set(json.loads(modules)), out + done.stderr


def test_every_command_is_registered_lazily_with_its_own_summary() -> None:
    assert isinstance(cli, LazyGroup)
    ctx = click.Context(cli)
    assert cli.list_commands(ctx)[:7] == ["apply", "export", "lint", "gate", "matrix", "pin-sync", "canary"]
    assert cli.list_commands(ctx) == list(cli.lazy_commands), "register commands with cli.add_lazy_command"
    modules = {f"patchctl.commands.{p.stem}" for p in COMMANDS_DIR.glob("*.py") if p.stem != "__init__"}
    assert set(COMMAND_MODULES.values()) == modules
    for name, lazy in cli.lazy_commands.items():
        assert COMMAND_MODULES[name] == f"patchctl.commands.{name.replace('-', '_')}"
        command = lazy.load()
        assert command.name == name
        stand_in = click.Command(name, help=lazy.summary)
        for limit in (30, 45, 80, 1000):
            assert stand_in.get_short_help_str(limit) == command.get_short_help_str(limit), (name, limit)


def test_help_lists_the_commands_as_an_eager_group_would() -> None:
    lazy = LazyGroup("patchctl", params=cli.params, help=cli.help)
    eager = click.Group("patchctl", params=cli.params, help=cli.help)
    for name, command in cli.lazy_commands.items():
        lazy.add_lazy_command(name, command.target, command.summary)
        eager.add_command(command.load(), name)
    eager.list_commands = lambda ctx: list(eager.commands)  # type: ignore[method-assign]  # definition order
    for width in (60, 80, 100, 200):
        helps = []
        for group in (lazy, eager):
            with click.Context(group, info_name="patchctl", terminal_width=width, max_content_width=width) as ctx:
                helps.append(group.get_help(ctx))
        assert helps[0] == helps[1], width
    assert not lazy.commands  # listed, never imported


def test_help_and_version_import_no_command_and_nothing_heavy(tmp_path: Path) -> None:
    for args in (["--help"], ["--version"], ["matrix", "--help"]):
        code, modules, output = modules_after(tmp_path, *args)
        assert code == 0, output
        loaded_commands = {m for m in COMMAND_MODULES.values() if m in modules}
        expected = {"patchctl.commands.matrix"} if args[0] == "matrix" else set()
        assert loaded_commands == expected, (args, loaded_commands)
        heavy = [m for m in HEAVY if m in modules and args[0] != "matrix"]
        assert heavy == [], (args, heavy)


@pytest.mark.parametrize(
    ("args", "own", "never"),
    [
        # No apply, no upstream, no temporary directory; no manifest reader where none is declared.
        (
            ["lint", "--no-apply"],
            "lint",
            (
                *("docker", "jinja2", "rich", "git", "urllib.request", "tempfile", "platformdirs"),
                *("patchctl.series.applier", "patchctl.confined.scratch", "patchctl.project.manifests"),
            ),
        ),
        (["matrix", "check"], "matrix", ("docker", "jinja2", "rich", "git", "urllib.request")),
        # What pin-sync imports, every --continue round pays: no archive or index-page reader.
        (["pin-sync", "--help"], "pin-sync", ("docker", "jinja2", "rich", "urllib.request", "tarfile", "html.parser")),
    ],
)
def test_a_read_only_command_imports_its_module_only(
    tmp_path: Path, args: list[str], own: str, never: tuple[str, ...]
) -> None:
    if own == "lint":  # lint fails closed on a matrix.yaml without series: this repository's own
        shutil.copy(REPO / "matrix.yaml", tmp_path / "matrix.yaml")
        shutil.copytree(REPO / "patches", tmp_path / "patches")
        git.init_repo(tmp_path)  # committed, as a downstream keeps them
        git.commit_all(tmp_path, "project")
    else:
        shutil.copy(GOOD, tmp_path / "matrix.yaml")
    code, modules, output = modules_after(tmp_path, *args)
    assert code in (0, 1), output  # findings or none: the command ran
    assert {m for m in COMMAND_MODULES.values() if m in modules} == {COMMAND_MODULES[own]}
    assert [m for m in never if m in modules] == []


# What every command's --help and usage error may import beyond Click's own (its help and
# usage errors, `click_modules`): the group and the wiring every command shares, the command's
# own module, and these few standard modules. A domain module here (a config, a series, the
# store, YAML, Jinja) is paid by every --help and every mistyped option: import it where the
# command runs instead (patchctl/commands/*.py).
START_UP_CORE = {
    "patchctl",
    "patchctl.cli",
    "patchctl.lazy",
    "patchctl.app",
    "patchctl.errors",
    "patchctl.output",
    "patchctl.output.escape",
    "patchctl.output.progress",
    "patchctl.project",
    "patchctl.project.upstream_source",
}
START_UP_STDLIB = {"copy", "dataclasses", "gc", "signal"}
# A command's options may need a constant of its own package, kept light for them.
COMMAND_EXTRAS = {"init": {"patchctl.adopt"}}


def command_paths() -> list[list[str]]:
    """Every command, and every subcommand of a group (`matrix render`)."""
    paths = []
    for name, lazy in cli.lazy_commands.items():
        paths.append([name])
        command = lazy.load()
        if isinstance(command, click.Group):
            paths.extend([name, sub] for sub in command.list_commands(click.Context(command)))
    return paths


def probe_modules(tmp_path: Path, calls: str) -> set[str]:
    """The modules a fresh interpreter holds after CALLS (output silenced, exits caught)."""
    probe = (
        "import contextlib, io, json, sys\n"
        "before = set(sys.modules)\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
        f"{textwrap.indent(calls, '    ')}\n"
        "print('MODULES=' + json.dumps(sorted(set(sys.modules) - before)))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True)
    _, _, modules = done.stdout.rpartition("MODULES=")
    assert done.returncode == 0 and modules, done.stdout + done.stderr
    return set(json.loads(modules))


@pytest.fixture(scope="module")
def click_modules(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    """What Click itself imports to print a subcommand's help and a usage error."""
    calls = (
        "import click\n"
        "@click.group()\n"
        "@click.option('--path', type=click.Path(path_type=__import__('pathlib').Path))\n"
        "def group(path): pass\n"
        "@group.command()\n"
        "@click.argument('names', nargs=-1)\n"
        "@click.option('--flag/--no-flag', envvar='X', show_default=True)\n"
        "def command(names, flag): pass\n"
        "for args in (['--help'], ['command', '--help'], ['command', '--bogus']):\n"
        "    try: group.main(args)\n"
        "    except SystemExit: pass\n"
    )
    return probe_modules(tmp_path_factory.mktemp("click"), calls)


def test_the_command_paths_are_every_command_and_subcommand() -> None:
    paths = command_paths()
    assert ["lint"] in paths and ["matrix", "render"] in paths and ["matrix", "changed"] in paths
    assert len(paths) == len(cli.lazy_commands) + 3


@pytest.mark.parametrize("path", command_paths(), ids=" ".join)
def test_help_and_usage_errors_import_no_domain_module(
    tmp_path: Path, click_modules: set[str], path: list[str]
) -> None:
    """`patchctl PATH --help` and `patchctl PATH --no-such-option` (one interpreter for both)
    import the start-up core, the command's own module and nothing else but what Click needs."""
    (tmp_path / "matrix.yaml").write_text("version: 1\n")  # a project, so that nothing is refused for its absence
    calls = (
        "from patchctl.cli import main\n"
        f"assert main({[*path, '--help']!r}) == 0\n"
        f"assert main({[*path, '--no-such-option']!r}) == 2\n"
    )
    modules = probe_modules(tmp_path, calls)
    own = COMMAND_MODULES[path[0]]
    allowed = START_UP_CORE | {"patchctl.commands", own} | COMMAND_EXTRAS.get(path[0], set())
    unexpected = sorted(m for m in modules - click_modules - START_UP_STDLIB if m not in allowed)
    assert unexpected == [], f"patchctl {' '.join(path)} --help imports {unexpected}"
    assert own in modules


def test_an_unknown_command_is_still_a_usage_error(tmp_path: Path) -> None:
    code, modules, output = modules_after(tmp_path, "aplly")
    assert code == 2 and "no such command 'aplly'" in output.lower()
    assert not any(m in modules for m in COMMAND_MODULES.values())


def test_export_help_states_the_vendor_default_message() -> None:
    """export's --help writes out what `export --from-vendor` uses without -m (its module is not
    imported for --help): the two stay one."""
    from patchctl.commands import export
    from patchctl.loop import vendor

    assert export.VENDOR_DEFAULT_MESSAGE == vendor.DEFAULT_MESSAGE
