"""The README is a front door (the quick start is what CI runs), and every command has an example
in the manual under docs/."""

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
    # pip gives up on an index it cannot reach at once (no 5 retries per package), and the main
    # job says first which torch it got (issue 45).
    install = "python -m pip install --retries 1 --timeout 15 -e "
    assert main_job.startswith(install + "'.[engine]' && python -m engine preflight && ")
    assert tests.startswith(install + "'.[engine,test]' && ") and "pytest" in tests
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert tests in ci, ".ci/run must run the README's test command verbatim"
    # ... inside a fresh virtual environment, activated before it, as most users run it.
    made = next(i for i, line in enumerate(ci) if line.startswith('if ! python3 -m venv "$VENV"'))
    activated = ci.index('. "$VENV/bin/activate"')
    assert made < activated < ci.index(tests)


def test_the_readme_is_a_front_door() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 300, "README.md is the front door; the manual lives in docs/"
    # The virtual environment, and torch from PyTorch's CPU index as CI takes it.
    assert "python3 -m venv .venv && . .venv/bin/activate" in text
    ci = (ROOT / ".github/workflows/ci.yml").read_text()
    assert "PIP_EXTRA_INDEX_URL: https://download.pytorch.org/whl/cpu" in ci
    assert "export PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu" in text
    # The Debian packages .ci/run installs for the tests are the ones the README names.
    for package in re.findall(r"apt-get install -y -qq ([a-z0-9. -]+?) >/dev/null", (ROOT / ".ci/run").read_text()):
        for name in package.split():
            assert re.search(rf"apt-get install -y [^\n]*\b{re.escape(name)}\b", text), f"README: no {name}"
    for page in re.findall(r"\]\((docs/[^)#]+)", text):
        assert (ROOT / page).is_file(), f"README links to a missing page: {page}"


def test_every_command_has_help_and_an_example_in_the_manual() -> None:
    ctx = click.Context(cli)
    names = cli.list_commands(ctx)
    assert {"apply", "lint", "matrix"} <= set(names)
    for name in names:
        command = cli.get_command(ctx, name)
        assert command is not None, name
        assert command.help and "Example" in command.help, f"{name} --help needs an explanation and an example"
        page = (ROOT / "docs/reference" / f"{name}.md").read_text()
        assert f"$ patchctl {name}" in page, f"docs/reference/{name}.md has no example of `patchctl {name}`"


def test_the_readmes_pip_gives_up_at_once_on_an_index_it_cannot_reach(tmp_path: Path) -> None:
    """The README's install, against an index nobody answers (a closed port here; PyTorch's CPU
    index where it cannot be reached, issue 45): one retry per package, not pip's five."""
    import os
    import shlex
    import socket
    import subprocess
    import sys

    main_job, tests = quick_start_commands()
    words = shlex.split(main_job.split(" && ", 1)[0])
    options = words[words.index("install") + 1 : words.index("-e")]
    assert options and options == shlex.split(tests.split(" && ", 1)[0])[4:-2]
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1")
    index = ["--index-url", f"http://127.0.0.1:{port}/simple/"]
    run = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "-d", tmp_path, *index, *options, "no-such-package"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert run.returncode == 1 and "No matching distribution found for no-such-package" in run.stderr, run.stderr
    assert run.stderr.count("WARNING: Retrying") == 1, run.stderr
