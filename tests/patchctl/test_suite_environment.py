"""The README's test command passes on a machine without a Docker engine: every test that needs
one skips, saying why, and fails instead only where `.ci/run` promised an engine
(PATCHCTL_REQUIRE_DOCKER=1). Run for real: pytest itself, on the suite's Docker tests, with the
engine out of reach (DOCKER_HOST names a socket that does not exist)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .docker_image import REQUIRE_ENV

REPO = Path(__file__).resolve().parents[2]
NO_ENGINE = "unix:///nonexistent/docker.sock"


# Ollama's week needs no engine (no image row: act runs its jobs on the host), so without one it
# runs for real, for minutes: the suite runs it once already, and it has no engine to miss here.
RUNS_WITHOUT_AN_ENGINE = "tests/journeys/test_week_act.py::test_week_for_ollama_adopted_by_init"


def pytest_in_a_machine_without_docker(*args: str, require: bool) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in (REQUIRE_ENV, "PYTEST_XDIST_WORKER", "PYTEST_ADDOPTS")}
    env["DOCKER_HOST"] = NO_ENGINE
    if require:
        env[REQUIRE_ENV] = "1"
    pytest = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "0", "-q", "-rsfE"]
    return subprocess.run(
        [*pytest, "--deselect", RUNS_WITHOUT_AN_ENGINE, *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_every_docker_test_skips_with_its_reason_when_no_engine_answers() -> None:
    run = pytest_in_a_machine_without_docker("-m", "docker", "tests", require=False)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    summary = run.stdout.strip().splitlines()[-1]
    assert "skipped" in summary and "failed" not in summary and "error" not in summary, run.stdout[-4000:]
    # The act week tests among them (they used to call pytest.fail), each with a reason a reader understands.
    reasons = [line for line in run.stdout.splitlines() if line.startswith("SKIPPED") and "test_week_act" in line]
    assert len(reasons) == 2 and all("need a Docker engine: no reachable Docker engine" in r for r in reasons), reasons


@pytest.mark.parametrize("test", ["tests/journeys/test_week_act.py", "tests/patchctl/test_runners.py"])
def test_where_ci_promised_an_engine_a_docker_test_fails_instead(test: str) -> None:
    run = pytest_in_a_machine_without_docker("-m", "docker", test, require=True)
    assert run.returncode == 1, run.stdout[-4000:] + run.stderr[-2000:]
    assert f"{REQUIRE_ENV}=1 but" in run.stdout and "need a Docker engine" in run.stdout, run.stdout[-4000:]
    assert " skipped" not in run.stdout.strip().splitlines()[-1], run.stdout[-4000:]
