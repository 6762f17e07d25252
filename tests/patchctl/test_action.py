"""The composite action (action.yml): its inputs, and its scripts run for real with bash the
way the runner runs them (inputs as environment variables, outputs through $GITHUB_OUTPUT)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from .matrix_fixtures import REPO

ACTION = yaml.safe_load((REPO / "action.yml").read_text())


def step(name: str) -> dict:
    return next(s for s in ACTION["runs"]["steps"] if s.get("name") == name)


def run_step(name: str, cwd: Path, env: dict[str, str], tmp_path: Path) -> tuple[subprocess.CompletedProcess, dict]:
    output = tmp_path / "github_output"
    output.write_text("")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    # `patchctl` on PATH is this checkout's CLI, as pip would install it from the action's path.
    shim = bin_dir / "patchctl"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m patchctl "$@"\n')
    shim.chmod(0o755)
    full_env = {
        **os.environ,
        **env,
        "GITHUB_OUTPUT": str(output),
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(REPO),
        "PATCHCTL_CACHE": str(tmp_path / "cache"),
    }
    result = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", step(name)["run"]],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
    )
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines() if "=" in line)
    return result, outputs


def test_inputs_and_their_defaults() -> None:
    inputs = ACTION["inputs"]
    assert set(inputs) == {"command", "args", "python-version", "cache", "working-directory"}
    assert {name: spec.get("default") for name, spec in inputs.items()} == {
        "command": "",
        "args": "",
        "python-version": "3.11",
        "cache": "true",
        "working-directory": ".",
    }
    assert ACTION["runs"]["using"] == "composite"
    install = step("install patchctl")
    assert install["env"] == {"PATCHCTL_SOURCE": "${{ github.action_path }}"}
    assert '"$PATCHCTL_SOURCE"' in install["run"]


def test_command_and_args_run_patchctl_without_a_shell_evaluating_them(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "matrix.yaml").write_text((REPO / "tests/patchctl/fixtures/matrix/good/matrix.yaml").read_text())
    (project / "templates").symlink_to(REPO / "templates")
    env = {"PATCHCTL_COMMAND": "matrix render", "PATCHCTL_ARGS": "--check"}
    result, _ = run_step("patchctl", project, env, tmp_path)
    # Nothing is rendered yet: --check reports drift (exit 1), and wrote nothing.
    assert result.returncode == 1, result.stdout + result.stderr
    assert "out of date" in result.stderr and not (project / ".github").exists()

    marker = tmp_path / "injected"
    env = {"PATCHCTL_COMMAND": "matrix render", "PATCHCTL_ARGS": f"--check;touch {marker} $(touch {marker})"}
    result, _ = run_step("patchctl", project, env, tmp_path)
    assert result.returncode == 2 and not marker.exists(), result.stderr


def test_cache_key_follows_the_pins(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    matrix = (REPO / "matrix.yaml").read_text()
    (project / "matrix.yaml").write_text(matrix)
    env = {"RUNNER_OS_NAME": "Linux"}
    result, first = run_step("cache key", project, env, tmp_path)
    assert result.returncode == 0, result.stderr
    assert first["path"] == str(tmp_path / "cache")
    assert first["key"].startswith("patchctl-v1-Linux-") and len(first["key"]) == len("patchctl-v1-Linux-") + 16
    assert first["restore-key"] == "patchctl-v1-Linux-"
    _, again = run_step("cache key", project, env, tmp_path)
    assert again["key"] == first["key"]
    old_pin = "296d9b60b97f6eeb1df161fefb921a44c04a1122"
    (project / "matrix.yaml").write_text(matrix.replace(old_pin, "aa601ae300d05a804f5f68940ab6fa75fc9653d3"))
    _, moved = run_step("cache key", project, env, tmp_path)
    assert moved["key"] != first["key"] and moved["key"].startswith(first["restore-key"])
