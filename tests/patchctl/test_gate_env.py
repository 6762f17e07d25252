"""Gates and build steps run with a scrubbed environment: secrets in patchctl's own
environment never reach a command from matrix.yaml unless its `pass_env:` names them.
Each test runs a real gate or build step that dumps `env` to a file."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchctl.project import gate_env

from .conftest import Project, Repo
from .fixtures_sync import add_hello_patch, add_line20_patch, main_c, write_config
from .test_runners import toolchain_image  # noqa: F401  (the session fixture: an image, or a skip)

SECRETS = {
    "GITHUB_TOKEN": "ghp_secret_token",
    "AWS_SECRET_ACCESS_KEY": "aws-secret",
    "PATCHCTL_DEPLOY_KEY": "inherited-patchctl-name",  # PATCHCTL_* from outside is not ours to pass
    "SSH_AUTH_SOCK": "/run/agent.sock",
}


def dumped(path: Path) -> dict[str, str]:
    """`env -0` output as a mapping."""
    entries = [e for e in path.read_bytes().decode().split("\0") if e]
    return dict(e.split("=", 1) for e in entries)


@pytest.fixture
def secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("BUILD_TOKEN", "listed-in-pass-env")
    monkeypatch.setenv("LC_ALL", "C")
    monkeypatch.setenv("CCACHE_DIR", "/tmp/ccache")


def assert_scrubbed(env: dict[str, str], *, passed: bool = True) -> None:
    for name in SECRETS:
        assert name not in env, f"{name} reached the command"
    assert ("BUILD_TOKEN" in env) == passed
    if passed:
        assert env["BUILD_TOKEN"] == "listed-in-pass-env"


def test_gate_sees_the_allowlist_its_variables_and_pass_env_only(
    project: Project, upstream: Repo, secrets, tmp_path: Path, cli
) -> None:
    add_line20_patch(project, upstream, upstream.head)
    listed, unlisted = tmp_path / "listed.env", tmp_path / "unlisted.env"
    write_config(
        project,
        upstream.head,
        series_extra=f"""\
        gates:
          - name: dump-listed
            command: env -0 > {listed}
            pass_env: [BUILD_TOKEN]
          - name: dump-unlisted
            command: env -0 > {unlisted}
        """,
    )
    assert cli("-C", project.path, "apply").exit_code == 0
    result = cli("-C", project.path, "gate", "main")
    assert result.exit_code == 0, result.output
    env = dumped(listed)
    assert_scrubbed(env)
    assert_scrubbed(dumped(unlisted), passed=False)  # pass_env is per gate
    assert env["PATCHCTL_SERIES"] == "main" and env["PATCHCTL_TREE"].endswith(".patchctl/trees/main")
    assert {"PATCHCTL_ROOT", "PATCHCTL_OUT", "PATCHCTL_PYTHON", "PATH", "HOME"} <= env.keys()
    assert env["LC_ALL"] == "C" and env["CCACHE_DIR"] == "/tmp/ccache"


def test_pin_sync_dry_run_builds_and_gates_are_scrubbed(
    project: Project, upstream: Repo, secrets, tmp_path: Path, cli
) -> None:
    pin = upstream.head
    add_line20_patch(project, upstream, pin)
    build, gate = tmp_path / "build.env", tmp_path / "gate.env"
    write_config(
        project,
        pin,
        series_extra=f"""\
        build:
          - name: dump-build
            command: env -0 > {build}
            env: {{STEP_VALUE: from-matrix}}
            pass_env: [BUILD_TOKEN]
        gates:
          - name: dump-gate
            command: env -0 > {gate}
        """,
    )
    upstream.commit({"src/main.c": main_c(prepend=2)}, "Shift")
    upstream.commit({"src/util.c": "util rewritten\n"}, "Rewrite util")
    result = cli("-C", project.path, "pin-sync", "up", "--latest", "--dry-run")
    assert result.exit_code == 0, result.output
    build_env = dumped(build)
    assert_scrubbed(build_env)
    assert build_env["STEP_VALUE"] == "from-matrix"
    assert_scrubbed(dumped(gate), passed=False)


@pytest.mark.docker
def test_canary_compile_container_gets_the_scrubbed_set(
    toolchain_image: str,  # noqa: F811
    project: Project,
    upstream: Repo,
    secrets,
    cli,
) -> None:
    add_hello_patch(project, upstream, upstream.head, name="0001-add-hello.patch")
    write_config(
        project,
        upstream.head,
        series_extra="""\
        build:
          - name: dump
            command: env
            env: {STEP_VALUE: from-matrix}
            pass_env: [BUILD_TOKEN]
        """,
        tail=f"""\
        canary:
          upstream: up
          toolchains:
            - name: bookworm
              tag-suffix: -cpu-test
              cuda-major-version: ''
              image: {toolchain_image}
        """,
    )
    work = project.path.parent / "work"
    result = cli("-C", project.path, "canary", "--compile", "--work-dir", work)
    assert result.exit_code == 0, result.output
    [log] = list((work / "logs").rglob("*dump.log"))
    env = dict(line.split("=", 1) for line in log.read_text().splitlines() if "=" in line)
    assert_scrubbed(env)
    assert env["LC_ALL"] == "C" and env["HOME"] == "/tmp" and env["STEP_VALUE"] == "from-matrix"
    assert "CCACHE_DIR" not in env  # the host's toolchain settings stay on the host


def test_container_set_keeps_the_image_paths() -> None:
    source = {"PATH": "/host/bin", "HOME": "/home/me", "TMPDIR": "/host/tmp", "CC": "/host/cc", "LANG": "C.UTF-8"}
    env = gate_env.container(source, pass_env=["NOT_SET"], extra={"X": "1"})
    assert env == {"HOME": "/tmp", "LANG": "C.UTF-8", "X": "1"}


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("'A=B'", "no '=' or NUL"),
        ('"A\\0B"', "no '=' or NUL"),
        ("''", "non-empty variable names"),
        ("42", "non-empty variable names"),
        ("'1ABC'", "not starting with a digit"),
    ],
)
@pytest.mark.parametrize("where", ["gates", "build"])
def test_bad_pass_env_is_a_located_config_error(
    project: Project, upstream: Repo, cli, entry: str, message: str, where: str
) -> None:
    write_config(
        project,
        upstream.head,
        series_extra=f"""\
        {where}:
          - name: step
            command: 'true'
            pass_env:
              - OK_NAME
              - {entry}
        """,
    )
    result = cli("-C", project.path, "lint", "--no-apply")
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output
    assert "matrix.yaml:" in lines[0] and "pass_env" in lines[0] and message in lines[0], lines[0]


def test_pass_env_must_be_a_list(project: Project, upstream: Repo, cli) -> None:
    write_config(
        project, upstream.head, series_extra="gates:\n  - name: g\n    command: 'true'\n    pass_env: GITHUB_TOKEN\n"
    )
    result = cli("-C", project.path, "lint", "--no-apply")
    assert result.exit_code == 2 and "pass_env" in result.stderr and "Traceback" not in result.output
