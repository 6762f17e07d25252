"""MX302's capability names: matrix.yaml's `index: capabilities:` list, else LocalAI's current set."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from patchctl.matrix.conventions import KNOWN_CAPABILITIES

from .matrix_fixtures import GOOD, write_build_inputs

INDEX_HEADER = "index:\n  output: backend/index.yaml\n"


def with_capabilities(tmp_path: Path, listing: str, extra_key: str = "") -> Path:
    """The good fixture with LISTING under `index:` and EXTRA_KEY added to llama-cpp's capabilities."""
    text = GOOD.read_text()
    assert INDEX_HEADER in text
    text = text.replace(INDEX_HEADER, INDEX_HEADER + listing)
    if extra_key:
        text = text.replace(
            "        metal: metal-llama-cpp\n", f"        metal: metal-llama-cpp\n        {extra_key}\n"
        )
    path = tmp_path / "matrix.yaml"
    path.write_text(text)
    write_build_inputs(tmp_path, path)
    return path


def mx302(result) -> list[dict]:
    return [f for f in json.loads(result.stdout)["findings"] if f["rule"] == "MX302"]


def test_localai_current_names_are_the_default() -> None:
    assert set(KNOWN_CAPABILITIES) == {
        "default",
        "cpu",
        "nvidia",
        "nvidia-cuda-12",
        "nvidia-cuda-13",
        "nvidia-l4t",
        "nvidia-l4t-cuda-12",
        "nvidia-l4t-cuda-13",
        "amd",
        "intel",
        "vulkan",
        "metal",
        "metal-darwin-arm64",
        "darwin-x86",
    }


def test_default_set_accepts_localai_names_and_flags_others(cli, tmp_path: Path) -> None:
    accepted = with_capabilities(tmp_path, "", "metal-darwin-arm64: metal-llama-cpp")
    assert cli("--config", accepted, "matrix", "check").exit_code == 0
    (tmp_path / "other").mkdir()
    refused = with_capabilities(tmp_path / "other", "", "nvidia-cuda-14: cuda13-llama-cpp")
    result = cli("--config", refused, "matrix", "check", "--json")
    assert result.exit_code == 1
    [finding] = mx302(result)
    assert "unknown capability 'nvidia-cuda-14'" in finding["message"] and "metal-darwin-arm64" in finding["message"]


def test_the_list_in_matrix_yaml_replaces_the_default(cli, tmp_path: Path) -> None:
    listing = "  capabilities: [default, nvidia, nvidia-cuda-13, nvidia-cuda-14, metal]\n"
    path = with_capabilities(tmp_path, listing, "nvidia-cuda-14: cuda13-llama-cpp")
    result = cli("--config", path, "matrix", "check", "--json")
    assert mx302(result) == [] and result.exit_code == 0, result.output

    (tmp_path / "narrow").mkdir()
    narrow = with_capabilities(tmp_path / "narrow", "  capabilities: [default, nvidia, nvidia-cuda-13]\n")
    result = cli("--config", narrow, "matrix", "check", "--json")
    assert result.exit_code == 1
    [finding] = mx302(result)
    assert finding["message"] == (
        "meta backend llama-cpp: unknown capability 'metal' (known: default, nvidia, nvidia-cuda-13)"
    )


@pytest.mark.parametrize(
    ("listing", "message"),
    [
        ("  capabilities: nvidia\n", "index.capabilities: must be a list"),
        ("  capabilities: []\n", "list at least one capability name"),
        ("  capabilities: [nvidia, nvidia]\n", "duplicate capability 'nvidia'"),
        ("  capabilities: ['${{ x }}']\n", "unsafe value"),
    ],
)
def test_invalid_lists_are_configuration_errors(cli, tmp_path: Path, listing: str, message: str) -> None:
    result = cli("--config", with_capabilities(tmp_path, listing), "matrix", "check")
    assert result.exit_code == 2
    assert message in result.stderr and "matrix.yaml:" in result.stderr and "Traceback" not in result.output
