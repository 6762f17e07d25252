"""The README's quick start is what CI runs, and every command it documents exists."""

from __future__ import annotations

import re
from pathlib import Path

import click

from patchctl.cli import cli

ROOT = Path(__file__).resolve().parents[2]


def quick_start_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.+?)\n```", section, flags=re.S)


def test_quick_start_has_exactly_two_commands_and_ci_runs_the_test_one() -> None:
    commands = quick_start_commands()
    assert len(commands) == 2 and all("\n" not in c for c in commands)
    main_job, tests = commands
    assert main_job.startswith("python -m pip install -e '.[engine]' && ")
    assert "pytest" in tests
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert tests in ci, ".ci/run must run the README's test command verbatim"
    # ... inside a fresh virtual environment, activated before it, as most users run it.
    made = next(i for i, line in enumerate(ci) if line.startswith('if ! python3 -m venv "$VENV"'))
    activated = ci.index('. "$VENV/bin/activate"')
    assert made < activated < ci.index(tests)


def test_every_command_has_help_and_a_readme_example() -> None:
    text = (ROOT / "README.md").read_text()
    ctx = click.Context(cli)
    names = cli.list_commands(ctx)
    assert {"apply", "lint", "matrix"} <= set(names)
    for name in names:
        command = cli.get_command(ctx, name)
        assert command is not None, name
        assert command.help and "Example" in command.help, f"{name} --help needs an explanation and an example"
        assert f"patchctl {name}" in text, f"README has no example of `patchctl {name}`"
