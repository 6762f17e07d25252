"""The README's test command, as a new user runs it (issue 45): in a copy of this checkout (its
tracked and new files, committed in a repository of its own, as a clone of it is), in a new
virtual environment made as the README makes it, under `env -i` with an empty `HOME`, the
README's variables exported, a login shell's PATH, and no Docker engine (DOCKER_HOST names a
socket that does not exist; nothing that runs here is stopped). It must exit 0, with every
Docker test skipped and saying why.

Slow tier (`--run-slow`), not `.ci/run`: it installs the test extra into a new virtual
environment (with an empty HOME, pip's cache is empty: everything is downloaded again) and
runs the whole suite a second time, which on CI's two cores would take the suite past its 15
minutes. What CI does check of it every run: the Docker tests skip without an engine
(test_suite_environment.py), the tests read no pip setting of the user's (test_action.py), and
.ci/run runs the README's command verbatim (test_readme.py)."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest

from tests.journeys.week_fixtures import copy_checkout

from .test_readme import ROOT, quick_start_commands

pytestmark = pytest.mark.slow
LOGIN_PATH = "/usr/local/bin:/usr/bin:/bin"


def readme_variables() -> dict[str, str]:
    """The `export NAME=VALUE` lines of the README's install section."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Install", 1)[1].split("\n## ", 1)[0]
    return dict(re.findall(r"^\$ export ([A-Z_]+)=(\S+)$", section, flags=re.M))


def fresh_copy(destination: Path) -> Path:
    """This checkout's files (tracked and new, not ignored), committed in a repository of their own."""
    copy_checkout(ROOT, destination)
    who = ["-c", "user.name=README check", "-c", "user.email=readme@example.invalid"]
    for command in (["init", "-q"], ["add", "-A"], [*who, "commit", "-qm", "A clone of the checkout"]):
        subprocess.run(["git", *command], cwd=destination, check=True, capture_output=True)
    return destination


def test_the_readme_test_command_passes_on_a_fresh_machine_without_docker(tmp_path: Path) -> None:
    _, command = quick_start_commands()
    variables = readme_variables()
    assert variables.get("PIP_EXTRA_INDEX_URL") == "https://download.pytorch.org/whl/cpu", variables
    checkout = fresh_copy(tmp_path / "patchctl")
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home), "PATH": LOGIN_PATH, "DOCKER_HOST": "unix:///nonexistent/docker.sock", **variables}
    script = f"set -e\npython3 -m venv .venv && . .venv/bin/activate\n{command}\n"
    start = time.monotonic()
    run = subprocess.run(["bash", "-c", script], cwd=checkout, env=env, capture_output=True, text=True, timeout=5400)
    minutes = (time.monotonic() - start) / 60
    tail = run.stdout[-6000:] + run.stderr[-3000:]
    assert run.returncode == 0, f"exit {run.returncode} after {minutes:.1f} min:\n{tail}"
    summary = run.stdout.strip().splitlines()[-1]
    assert " passed" in summary and "failed" not in summary and "error" not in summary, tail
    skipped_docker = [line for line in run.stdout.splitlines() if "need a Docker engine: no reachable" in line]
    assert any("test_week_act.py" in line for line in skipped_docker), tail
    print(f"README test command, fresh: {summary} in {minutes:.1f} min")
