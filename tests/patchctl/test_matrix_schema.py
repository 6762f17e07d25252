"""Schema of the build-matrix sections: `config.load` validates them, and every error is
one line naming the file, the key path and the line (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchctl.errors import ConfigError
from patchctl.matrix import from_config
from patchctl.matrix.sources import load_localai_matrix, load_project
from patchctl.project import yamlloc

from .matrix_fixtures import GOOD


def test_load_project_runs_the_matrix_validator(tmp_path: Path) -> None:
    path = tmp_path / "matrix.yaml"
    path.write_text(GOOD.read_text().replace("    platforms: linux/arm64\n", "    platforms: arm64\n", 1))
    with pytest.raises(ConfigError) as err:
        load_project(path)
    assert (
        str(err.value)
        == f"{path}:32: include[1].platforms: invalid platform 'arm64' (expected os/arch, e.g. linux/amd64)"
    )


def test_the_good_fixture_loads_into_rows_index_canary_and_paths() -> None:
    matrix = from_config(load_project(GOOD))
    assert [r.tag_suffix for r in matrix.linux_rows()] == [
        "-cpu-llama-cpp",
        "-cpu-llama-cpp",
        "-gpu-nvidia-cuda-13-llama-cpp",
        "-cpu-whisper",
    ]
    assert matrix.linux_rows()[2].values["cuda-major-version"] == "13" and matrix.linux_rows()[2].line == 41
    assert list(matrix.linux_rows()[0].values)[:3] == ["build-type", "cuda-major-version", "cuda-minor-version"]
    assert matrix.darwin_rows()[0].platform == "darwin/arm64"
    assert matrix.canary is not None and matrix.canary.schedule == "0 5 * * 2"
    assert matrix.canary.toolchains[0].image == "nvidia/cuda:13.0.0-devel-ubuntu24.04"
    assert matrix.backends["whisper"].shared == ("backend/backend.proto", "**/*.mk")
    assert matrix.index_output == "backend/index.yaml" and len(matrix.variants) == 8


@pytest.mark.parametrize(
    "old, new, where",
    [
        (
            "    tag-latest: auto\n    tag-suffix: -cpu-whisper\n",
            "    tag-latest: auto\n",
            "include[3]: missing required key 'tag-suffix'",
        ),
        (
            "    context: ./\n\nincludeDarwin",
            "    context: ./\n    color: red\n\nincludeDarwin",
            "include[3].color: unknown key",
        ),
        (
            "tag-suffix: -cpu-whisper",
            "tag-suffix: cpu-whisper",
            "include[3].tag-suffix: tag-suffix must start with '-'",
        ),
        (
            "cuda-major-version: '13'",
            "cuda-major-version: 'thirteen'",
            "include[2].cuda-major-version: must be a number or empty",
        ),
        (
            "cuda-major-version: '13'",
            "cuda-major-version: [13]",
            "include[2].cuda-major-version: must be a string, got a list",
        ),
        ("    backend: whisper\n", "    backend: ''\n", "include[3].backend: must not be empty"),
        (
            "  upstream: llama.cpp\n  schedule",
            "  upstream: whisper.cpp\n  schedule",
            "canary.upstream: unknown upstream 'whisper.cpp'",
        ),
        ("  schedule: '0 5 * * 2'", "  schedule: 'weekly'", "canary.schedule: must be a 5-field cron expression"),
        (
            "    - name: cuda-13\n      tag-suffix: -gpu-nvidia-cuda-13-llama-cpp\n      cuda-major-version: '13'\n"
            "      image: nvidia/cuda:13.0.0-devel-ubuntu24.04\n",
            "    - {name: host, tag-suffix: -cpu-llama-cpp}\n",
            "canary.toolchains[0].tag-suffix: tag-suffix is for a toolchain that compiles in a shipped row's image",
        ),
        (
            "      image: nvidia/cuda:13.0.0-devel-ubuntu24.04\n",
            "      image: nvidia/cuda:13.0.0-devel-ubuntu24.04\n    - {name: host, dockerfile: x/Dockerfile}\n",
            "canary.toolchains[1].dockerfile: dockerfile is for a toolchain that compiles in a shipped row's image",
        ),
        (
            "      image: nvidia/cuda:13.0.0-devel-ubuntu24.04\n",
            "      image: nvidia/cuda:13.0.0-devel-ubuntu24.04\n    - {runs-on: ubuntu-latest}\n",
            "canary.toolchains[1]: missing required key 'name'",
        ),
        ("        default: cpu-whisper\n", "", "index.metas[1].capabilities: must be a non-empty mapping"),
        ("  output: backend/index.yaml", "  output: ../index.yaml", "index.output: must be a relative .yaml path"),
        (
            "    paths: ['backend/go/whisper/**']",
            "    paths: ['/etc/**']",
            "backends.whisper.paths[0]: paths are relative",
        ),
        (
            "    paths: ['backend/go/whisper/**']\n    shared: ['backend/backend.proto', '**/*.mk']",
            "    paths: []",
            "backends.whisper: list at least one path",
        ),
    ],
)
def test_schema_errors_name_file_key_and_line(cli, tmp_path: Path, old: str, new: str, where: str) -> None:
    text = GOOD.read_text()
    assert old in text
    path = tmp_path / "matrix.yaml"
    path.write_text(text.replace(old, new, 1))
    result = cli("--config", path, "matrix", "check")
    assert result.exit_code == 2
    assert result.stderr.startswith(f"patchctl: error: {path}:")
    assert where in result.stderr
    assert len(result.stderr.splitlines()) == 1


CANARY = GOOD.read_text()[
    GOOD.read_text().index("canary:") : GOOD.read_text().index("\n\n", GOOD.read_text().index("canary:"))
]


@pytest.mark.parametrize("toolchains", ["", "  toolchains: []\n"])
def test_a_canary_without_toolchains_applies_only_and_needs_no_image_row(tmp_path: Path, toolchains: str) -> None:
    """No toolchain, no row: the weekly canary applies the series to the tip and compiles nothing."""
    path = tmp_path / "matrix.yaml"
    path.write_text(GOOD.read_text().replace(CANARY, "canary:\n  upstream: llama.cpp\n" + toolchains.rstrip("\n")))
    matrix = from_config(load_project(path))
    assert matrix.canary is not None and matrix.canary.toolchains == ()
    assert matrix.canary.schedule == "17 3 * * 1"  # the default
    path.write_text(GOOD.read_text().replace(CANARY, "canary:\n  upstream: llama.cpp\n  toolchains: none"))
    with pytest.raises(ConfigError, match="canary.toolchains: must be a list, got a string"):
        load_project(path)


def test_a_runner_toolchain_needs_no_image_and_stands_for_no_row(tmp_path: Path) -> None:
    path = tmp_path / "matrix.yaml"
    runner = (
        "    - {name: host, runs-on: macos-15, command: 'cmake -B build && cmake --build build'}\n    - {name: bare}\n"
    )
    path.write_text(GOOD.read_text().replace(CANARY, CANARY + "\n" + runner.rstrip("\n")))
    host, bare = from_config(load_project(path)).canary.toolchains[1:]
    assert (host.on_runner, host.build_image, host.image, host.tag_suffix) == (True, None, "", "")
    assert (host.runs_on, host.command) == ("macos-15", "cmake -B build && cmake --build build")
    assert (bare.on_runner, bare.runs_on, bare.command) == (True, "", "")


def test_other_commands_reject_a_bad_build_matrix_too(cli, tmp_path: Path) -> None:
    path = tmp_path / "matrix.yaml"
    path.write_text(GOOD.read_text().replace("runs-on: ubuntu-24.04-arm", "runs-on: 'ubuntu ${{ x }}'"))
    result = cli("--config", path, "lint", "--no-apply")
    assert result.exit_code == 2 and "include[1].runs-on: unsafe value" in result.stderr


def test_localai_matrix_needs_rows(cli, tmp_path: Path) -> None:
    path = tmp_path / "backend-matrix.yml"
    path.write_text("jobs: {}\n")
    result = cli("matrix", "check", "--matrix", path)
    assert result.exit_code == 2 and "neither 'include:' nor 'includeDarwin:' found" in result.stderr


def test_localai_loader_reports_yaml_errors_with_a_line(tmp_path: Path) -> None:
    path = tmp_path / "index.yaml"
    path.write_text("- name: a\n  uri: [unclosed\n")
    with pytest.raises(ConfigError, match=r"index.yaml:\d+: invalid YAML"):
        yamlloc.load(path, merge_keys=True)


def test_localai_rows_accept_numbers_and_booleans_as_strings(tmp_path: Path) -> None:
    path = tmp_path / "backend-matrix.yml"
    path.write_text(
        "include:\n  - {build-type: cublas, cuda-major-version: 12, cuda-minor-version: 8, platforms: linux/amd64, "
        "tag-latest: auto,"
        " tag-suffix: -gpu-nvidia-cuda-12-a, runs-on: ubuntu-latest, base-image: 'ubuntu:24.04', skip-drivers: false,"
        " backend: a, dockerfile: ./Dockerfile, context: ./}\n"
    )
    row = load_localai_matrix(path, tmp_path).rows[0]
    assert row.values["cuda-major-version"] == "12" and row.values["skip-drivers"] == "false"


GOOD_ACTION = "  action: patchctl/patchctl@89abcdef0123456789abcdef0123456789abcdef\n"


@pytest.mark.parametrize(
    "section, message",
    [
        ("  action: OWNER/patchctl@v1.2.3\n", "workflows.action: must be ./ (in patchctl's own repository) or"),
        ("  action: 'OWNER/patchctl@${{ x }}'\n", "workflows.action: unsafe value"),
        ("  pin_sync: {github_app: {client_id_var: APP_ID}}\n", "workflows.pin_sync.github_app: missing required key"),
        (
            "  pin_sync: {github_app: {client_id_var: 'APP ID', private_key_secret: KEY}}\n",
            "workflows.pin_sync.github_app.client_id_var: must be a variable or secret name",
        ),
        (
            "  pin_sync: {github_app: {client_id_var: APP_ID, private_key_secret: GITHUB_KEY}}\n",
            "workflows.pin_sync.github_app.private_key_secret: GitHub reserves names that start with GITHUB_",
        ),
        ("  pin_sync: {token: X}\n", "workflows.pin_sync.token: unknown key"),
        ("  pin_sync: {automerge: ff}\n", "workflows.pin_sync.automerge: must be one of merge, squash, rebase"),
        ("  pin_sync: {automerge: true}\n", "workflows.pin_sync.automerge: must be one of merge, squash, rebase"),
        ("  extras: engine\n", "workflows.extras: must be a list, got a string"),
        ("  extras: [torch]\n", "workflows.extras[0]: unknown extra 'torch': the workflows can install engine, health"),
        ("  extras: [test]\n", "workflows.extras[0]: unknown extra 'test'"),
        ("  extras: [engine, engine]\n", "workflows.extras[1]: engine is listed twice"),
    ],
)
def test_the_workflows_section_is_validated(tmp_path: Path, section: str, message: str) -> None:
    path = tmp_path / "matrix.yaml"
    path.write_text(GOOD.read_text().replace(GOOD_ACTION, section))
    with pytest.raises(ConfigError) as err:
        load_project(path)
    assert message in str(err.value) and str(err.value).startswith(f"{path}:")


def test_the_workflows_section_loads(tmp_path: Path) -> None:
    path = tmp_path / "matrix.yaml"
    app = "  pin_sync:\n    github_app: {client_id_var: APP_ID, private_key_secret: APP_KEY}\n"
    path.write_text(GOOD.read_text() + app)
    settings = from_config(load_project(path)).workflows
    assert settings.action == GOOD_ACTION.split(": ")[1].strip()
    assert (settings.github_app.client_id_var, settings.github_app.private_key_secret) == ("APP_ID", "APP_KEY")
    assert settings.automerge is None  # off unless asked for
    path.write_text(GOOD.read_text() + app + "    automerge: rebase\n")
    assert from_config(load_project(path)).workflows.automerge == "rebase"
    path.write_text(GOOD.read_text().replace(GOOD_ACTION, "  action: ./\n"))
    assert from_config(load_project(path)).workflows.action == "./"
    assert settings.extras is None  # not set: the gates decide (extras.resolved_extras)
    path.write_text(GOOD.read_text() + "  extras: [health, engine]\n")
    settings = from_config(load_project(path)).workflows
    assert settings.extras == ("health", "engine") and settings.extras_line == len(GOOD.read_text().splitlines()) + 1
    path.write_text(GOOD.read_text() + "  extras: []\n")
    assert from_config(load_project(path)).workflows.extras == ()  # patchctl alone, said so
