"""Start-up: a command imports only what it uses (patchctl.lazy). `--help` lists every
command from its registered summary, identical to the command's own help, without importing
any command module; a command imports its own module and not the others'. No timing here:
bench/startup_bench.py measures it."""

from __future__ import annotations

import ast
import gc
import json
import re
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

from .conftest import Project, Repo, make_patch, numbered, run_cli
from .fixtures_sync import main_c, write_config
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
    "patchctl.patterns",
    "patchctl.records",
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


@pytest.mark.parametrize(
    "args",
    [
        ["pin-sync", "--drop"],
        ["pin-sync", "--continue", "--abort"],
        ["canary", "--rev", "HEAD", "--latest"],
        ["export", "llama.cpp", "--from-vendor", "--check"],
        ["matrix", "changed", "--all", "README.md"],
        ["init", "--file", "Makefile"],
    ],
    ids=" ".join,
)
def test_a_usage_error_of_patchctl_imports_no_domain_module(
    tmp_path: Path, click_modules: set[str], args: list[str]
) -> None:
    """What a command refuses before it does anything (exit 2) is said as fast as --help."""
    (tmp_path / "matrix.yaml").write_text("version: 1\n")
    modules = probe_modules(tmp_path, f"from patchctl.cli import main\nassert main({args!r}) == 2\n")
    allowed = START_UP_CORE | {"patchctl.commands", COMMAND_MODULES[args[0]]} | COMMAND_EXTRAS.get(args[0], set())
    assert sorted(m for m in modules - click_modules - START_UP_STDLIB if m not in allowed) == []


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


# ---------------------------------------------------------------- nothing built at import


def test_a_lazy_pattern_compiles_at_its_first_use_and_then_is_the_compiled_one() -> None:
    from patchctl.patterns import lazy

    named = lazy(r"(?P<number>\d+)-(?P<slug>[a-z]+)", re.IGNORECASE)
    assert named.pattern == r"(?P<number>\d+)-(?P<slug>[a-z]+)"
    assert "match" not in vars(named)  # not compiled yet
    match = named.match("0001-Fix")
    assert match is not None and match["number"] == "0001" and match["slug"] == "Fix"
    compiled = re.compile(named.pattern, re.IGNORECASE)
    assert vars(named)["match"].__self__ == compiled  # the compiled pattern's own method from now on
    assert (named.flags, named.groups, named.groupindex) == (compiled.flags, compiled.groups, compiled.groupindex)
    assert named.sub(r"\g<slug>", "7-a 8-b") == "a b"
    assert [m.group() for m in lazy("b+").finditer("abbcb")] == ["bb", "b"]
    assert lazy(rb"\x00").search(b"a\x00") is not None
    with pytest.raises(AttributeError):
        named.no_such_method  # noqa: B018
    with pytest.raises(re.error):
        lazy("(").match("")  # a bad pattern fails where it is first used


def lazy_pattern_names(tree: ast.Module) -> set[str]:
    """The module-level names of TREE bound to `lazy(...)`, directly or in a dict's values."""
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            calls = [node.value] if isinstance(node.value, ast.Call) else getattr(node.value, "values", [])
            if isinstance(target, ast.Name) and any(
                isinstance(c, ast.Call) and getattr(c.func, "id", None) == "lazy" for c in calls
            ):
                names.add(target.id)
    return names


def test_no_module_hands_a_lazy_pattern_to_re() -> None:
    """A lazy pattern is not a re.Pattern: `re.sub(PATTERN, ...)` would take it for a string.
    Its methods are what modules use (`PATTERN.sub(...)`)."""
    package = COMMANDS_DIR.parent
    trees = {path: ast.parse(path.read_text(), str(path)) for path in package.rglob("*.py")}
    lazy_names = set().union(*(lazy_pattern_names(tree) for tree in trees.values()))
    assert {"_ESCAPED", "_NAME_RE"} <= lazy_names  # (escape.py, config.py: what the check looks at)
    misuse = []
    for path, tree in trees.items():
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and getattr(node.func.value, "id", None) == "re"
            ):
                for arg in [*node.args, *(k.value for k in node.keywords)]:
                    if isinstance(arg, ast.Name) and arg.id in lazy_names:
                        misuse.append(f"{path.relative_to(package)}:{node.lineno}: re.{node.func.attr}({arg.id}")
    assert misuse == []


def test_the_start_up_lint_and_pin_sync_modules_compile_no_pattern_at_import(tmp_path: Path) -> None:
    """Importing the start-up core, what `lint --no-apply` imports and what every `pin-sync
    --continue` imports compiles no regular expression of patchctl's (but the diff parser's):
    each is compiled where it is first matched (patchctl.patterns)."""
    probe = (
        "import re, sys, json\n"
        "compiled = []\n"
        "original = re._compile\n"
        "def counting(pattern, flags):\n"
        "    caller = sys._getframe(2).f_globals.get('__name__', '')\n"
        "    if caller.startswith('patchctl') and sys._getframe(2).f_code.co_name == '<module>':\n"
        "        compiled.append(f'{caller}: {pattern!r}'[:120])\n"
        "    return original(pattern, flags)\n"
        "re._compile = counting\n"
        "import patchctl.cli, patchctl.commands.lint, patchctl.commands.pin_sync, patchctl.loop.sync\n"
        f"for name in {sorted(LINT_MODULES)!r}:\n"
        "    __import__(name)\n"
        f"compiled = [c for c in compiled if c.partition(':')[0] not in {sorted(PARSER_MODULES)!r}]\n"
        "print('COMPILED=' + json.dumps(compiled))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True)
    _, _, compiled = done.stdout.rpartition("COMPILED=")
    assert compiled, done.stdout + done.stderr
    assert json.loads(compiled) == []


# The diff parser's patterns are compiled at import: every command that imports it reads a
# series and matches them at once, line by line, where a compiled pattern is cheapest.
PARSER_MODULES = {"patchctl.series.diffblocks", "patchctl.series.patchset"}
# What `lint --no-apply` imports that has patterns of its own (test above).
LINT_MODULES = {
    "patchctl.git",
    "patchctl.output.escape",
    "patchctl.output.progress",
    "patchctl.confined.names",
    "patchctl.project.config",
    "patchctl.project.gate_env",
    "patchctl.project.series_keys",
    "patchctl.project.upstream_checks",
    "patchctl.project.version_keys",
    "patchctl.series.naming",
    "patchctl.series.patchlist",
    "patchctl.state.recovery",
    "patchctl.state.treeswap",
}


def test_dashboard_help_states_the_label_and_the_bot() -> None:
    """dashboard's --help writes out the label and the author the dashboard issue is found by
    (its module is not imported for --help): the two stay one."""
    from patchctl.commands import dashboard
    from patchctl.loop import dashboard_issue

    assert (dashboard.LABEL, dashboard.DEFAULT_AUTHOR) == (dashboard_issue.LABEL, dashboard_issue.DEFAULT_AUTHOR)


# ---------------------------------------------------------------- a pin-sync --continue round


# What a `pin-sync --continue` that stops again never needs: every one is paid by each stop of
# a bump run a process per stop (issue 46). Temporary directories (tempfile, shutil: where an
# index or a hunk is merged aside), the manifests of a release pin (only where pin_files name a
# file), the sdist reader (only for an sdist URL), the export and the gates (at the end only),
# the near-name suggestion (difflib: an error message), and whatever other commands use.
NOT_AT_A_STOP = (
    *("tempfile", "shutil", "difflib", "tarfile", "zipfile", "email", "urllib.request", "html.parser"),
    *("concurrent.futures", "logging"),  # threads beside: patchctl.beside
    *("jinja2", "docker", "rich", "platformdirs"),
    *("patchctl.confined.scratch", "patchctl.project.manifests", "patchctl.upstream.sdist"),
    *("patchctl.series.exporter", "patchctl.loop.gates", "patchctl.loop.runners"),
    *("patchctl.loop.versionpin", "patchctl.loop.archives", "patchctl.loop.canary", "patchctl.loop.status"),
)


def stopped_twice(project: Project, upstream: Repo) -> Path:
    """A bump of two patches that both conflict, stopped at the first one and resolved (its file
    written and `git add`-ed in the sync tree): the next `--continue` stops at the second."""
    pin = upstream.head
    project.add_patch("0001-main.patch", make_patch(upstream, pin, {"src/main.c": main_c({20: "MAIN 20"})}, "Main"))
    util = numbered(10, "decl")
    ours = util.replace("decl 6\n", "D6\n")
    project.add_patch("0002-util.patch", make_patch(upstream, pin, {"include/util.h": ours}, "Util"))
    write_config(project, pin)
    git.commit_all(project.path, "project")
    upstream.commit({"src/main.c": main_c({20: "main 20 up"}), "include/util.h": util.replace("decl 6\n", "d6\n")})
    result = run_cli("-C", project.path, "pin-sync", "up", "--latest")
    assert result.exit_code == 1 and "0001-main.patch" in result.stderr, result.output
    tree = project.path / ".patchctl" / "sync" / "up" / "main"
    (tree / "src" / "main.c").write_text(main_c({20: "MAIN 20"}))
    git.run(["add", "src/main.c"], tree)
    return tree


def test_a_continue_that_stops_again_imports_only_what_a_stop_needs(project: Project, upstream: Repo) -> None:
    """`pin-sync --continue`, run as a user runs it (its own interpreter), carries the resolved
    patch and stops at the next: it imports none of NOT_AT_A_STOP, and its modules compile no
    pattern at import (test below) -- it is the start-up a bump pays at every stop."""
    stopped_twice(project, upstream)
    code, modules, output = modules_after(project.path, "pin-sync", "--continue")
    assert code == 1 and "0002-util.patch" in output, output  # the round ran: carried one, stopped at the next
    assert {"patchctl.loop.sync", "patchctl.loop.stopcause", "patchctl.output.report"} <= modules  # explained
    assert [m for m in NOT_AT_A_STOP if m in modules] == []


def test_the_program_collects_cycles_less_often_than_the_default(tmp_path: Path) -> None:
    """`patchctl` (`cli.run`) raises the cyclic collector's first threshold for the command it
    runs (3 to 10 ms of a `--continue`, docs/benchmarks.md); `main`, which tests call, leaves it."""
    probe = (
        "import atexit, gc, sys\n"
        "from patchctl.cli import run\n"
        "atexit.register(lambda: print('THRESHOLD=%d' % gc.get_threshold()[0]))\n"
        "sys.argv = ['patchctl', '--version']\n"
        "run()\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.rpartition("THRESHOLD=")[2]) >= 10_000
    from patchctl.cli import main

    before = gc.get_threshold()
    assert main(["--version"]) == 0 and gc.get_threshold() == before
