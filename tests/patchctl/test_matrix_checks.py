"""`patchctl matrix check`: every invariant fails on its own fixture at the marked lines,
the good fixture and this repository pass, LocalAI-format files work, and the allowlist
silences exactly what it names."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from patchctl.matrix import checks, from_config
from patchctl.matrix.sources import attach_localai_index, load_localai_matrix
from patchctl.project import config as config_mod

from .matrix_fixtures import GOOD, INVARIANTS, LOCALAI, REPO, check_args, expected_markers

CASES = sorted(p for p in INVARIANTS.iterdir() if p.is_dir())


def test_every_rule_has_a_failing_fixture() -> None:
    covered = {rule for case in CASES for (_, _, rule) in expected_markers(case)}
    assert covered == set(checks.RULES)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_invariant_fixture_reports_exactly_the_marked_findings(case: Path, cli) -> None:
    result = cli("matrix", "check", *check_args(case), "--json")
    assert result.exit_code == 1, result.output
    payload = json.loads(result.stdout)
    found = Counter((Path(f["file"]).name, f["line"], f["rule"]) for f in payload["findings"])
    assert found == expected_markers(case)
    assert all(f["subject"] for f in payload["findings"])


def test_good_fixture_passes(cli) -> None:
    result = cli("--config", GOOD, "matrix", "check")
    assert result.exit_code == 0, result.output
    assert "5 row(s) and 8 index variant(s), no findings" in result.stdout


def test_this_repository_passes(cli) -> None:
    result = cli("-C", REPO, "matrix", "check")
    assert result.exit_code == 0, result.output


def test_text_output_is_file_line_rule(cli) -> None:
    case = INVARIANTS / "MX303-hardware"
    result = cli("matrix", "check", *check_args(case))
    assert result.exit_code == 1
    first = result.stdout.splitlines()[0]
    assert first.endswith(
        "index.yaml:7: MX303: meta backend a: capability nvidia-cuda-12 points at gpu-nvidia-cuda-13-a, a CUDA 13 "
        "image (-gpu-nvidia-cuda-13-a)"
    )
    assert "patchctl: error: 2 finding(s)" in result.stderr


def test_github_actions_annotations(cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    case = INVARIANTS / "MX103-arm-runner"
    result = cli("matrix", "check", *check_args(case))
    annotations = [line for line in result.stdout.splitlines() if line.startswith("::error ")]
    assert len(annotations) == 2
    assert annotations[0].startswith("::error file=") and ",line=4,title=MX103::" in annotations[0]


def test_localai_files_report_their_drift(cli) -> None:
    matrix, index = LOCALAI / ".github" / "backend-matrix.yml", LOCALAI / "backend" / "index.yaml"
    result = cli("-C", LOCALAI, "matrix", "check", "--matrix", matrix, "--index", index, "--json")
    assert result.exit_code == 1
    payload = json.loads(result.stdout)
    assert payload["rows"] == 10 and payload["variants"] == 20
    found = sorted((f["file"], f["line"], f["rule"], f["subject"]) for f in payload["findings"])
    assert found == [
        (".github/backend-matrix.yml", 106, "MX101", "-nvidia-l4t-whisper"),
        (".github/backend-matrix.yml", 120, "MX101", "-onnx-universal"),
        ("backend/index.yaml", 29, "MX303", "llama-cpp-development/nvidia-cuda-12"),
        ("backend/index.yaml", 91, "MX202", "cuda11-whisper"),
        ("backend/index.yaml", 94, "MX202", "cuda11-whisper-development"),
    ]


def test_localai_index_merge_keys_are_resolved() -> None:
    matrix = load_localai_matrix(LOCALAI / ".github" / "backend-matrix.yml", LOCALAI)
    attach_localai_index(matrix, LOCALAI / "backend" / "index.yaml", LOCALAI)
    assert [m.name for m in matrix.metas] == ["llama-cpp", "llama-cpp-development", "whisper"]
    development = matrix.metas[1]
    assert (
        development.capabilities["default"] == "cpu-llama-cpp-development"
    )  # the explicit map wins over the merged one
    assert matrix.variant("cuda12-llama-cpp").uri.endswith(":latest-gpu-nvidia-cuda-12-llama-cpp")
    assert matrix.variant("cpu-llama-cpp").mirrors == ("example/ai-backends:latest-cpu-llama-cpp",)
    assert matrix.linux_rows()[0].values["platforms"] == "linux/amd64"
    assert matrix.darwin_rows()[0].line == 136  # the "- backend:" line


def test_allowlist_silences_by_rule_and_subject_glob(cli) -> None:
    matrix, index = LOCALAI / ".github" / "backend-matrix.yml", LOCALAI / "backend" / "index.yaml"
    result = cli(
        "-C", LOCALAI, "matrix", "check", "--matrix", matrix, "--index", index, "--allow", LOCALAI / "allow.yaml"
    )
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        "allow.yaml:12: note: allowlist entry MX304 'legacy-*' matched nothing; delete it",
        "backend/index.yaml:29: MX303: meta backend llama-cpp-development: capability nvidia-cuda-12 points at "
        "cuda13-llama-cpp-development, a CUDA 13 image (-gpu-nvidia-cuda-13-llama-cpp)",
    ]


def test_allowlist_can_make_the_check_pass(cli, tmp_path: Path) -> None:
    allow = tmp_path / "allow.yaml"
    allow.write_text(
        (LOCALAI / "allow.yaml").read_text()
        + "  - {rule: MX303, subject: 'llama-cpp-development/*', reason: fixed upstream next release}\n"
    )
    matrix, index = LOCALAI / ".github" / "backend-matrix.yml", LOCALAI / "backend" / "index.yaml"
    result = cli("-C", LOCALAI, "matrix", "check", "--matrix", matrix, "--index", index, "--allow", allow, "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["ok"] and len(payload["silenced"]) == 5
    assert {s["allowed_by"]["rule"] for s in payload["silenced"]} == {"MX101", "MX202", "MX303"}


def test_allowlist_a_different_subject_does_not_silence(cli, tmp_path: Path) -> None:
    allow = tmp_path / "allow.yaml"
    allow.write_text(
        "allow:\n  - {rule: MX103, subject: -cpu-b, reason: not this one}\n  - {rule: MX101, subject: -cpu-a, "
        "reason: wrong rule}\n"
    )
    result = cli("matrix", "check", *check_args(INVARIANTS / "MX103-arm-runner"), "--allow", allow, "--json")
    assert result.exit_code == 1
    assert len(json.loads(result.stdout)["findings"]) == 2


@pytest.mark.parametrize(
    "text, message",
    [
        ("allow:\n  - {rule: MX999, subject: x, reason: y}\n", "allow[0].rule: unknown rule 'MX999'"),
        ("allow:\n  - {rule: MX101, subject: x}\n", "allow[0].reason: reason must be a non-empty string"),
        ("deny: []\n", "an allowlist is a mapping with one key"),
    ],
)
def test_bad_allowlist_is_a_located_usage_error(cli, tmp_path: Path, text: str, message: str) -> None:
    allow = tmp_path / "allow.yaml"
    allow.write_text(text)
    result = cli("--config", GOOD, "matrix", "check", "--allow", allow)
    assert result.exit_code == 2
    assert message in result.stderr and str(allow) in result.stderr


def test_pin_rules_read_the_config() -> None:
    config = config_mod.load(INVARIANTS / "MX501-MX502-pins" / "matrix.yaml")
    findings = checks.run_checks(from_config(config), config)
    assert [(f.rule, f.subject) for f in findings] == [("MX501", "whisper.cpp-ggml"), ("MX502", "whisper.cpp-ggml")]
    assert "pins fedcba987654, not 0123456789ab" in findings[0].message


@pytest.mark.parametrize("command", [(), ("render",), ("check",), ("changed",)])
def test_help_texts_carry_examples(cli, command: tuple[str, ...]) -> None:
    result = cli("matrix", *command, "--help")
    assert result.exit_code == 0 and "Examples:\n  patchctl matrix" in result.stdout.replace(
        "Examples:\n    ", "Examples:\n  "
    )


def test_gpu_capabilities_may_fall_back_to_vulkan_but_not_to_another_cuda() -> None:
    from patchctl.matrix.conventions import Toolchain, capability_accepts

    assert capability_accepts("nvidia-cuda-12", Toolchain("vulkan")) and capability_accepts("amd", Toolchain("vulkan"))
    assert not capability_accepts("metal", Toolchain("vulkan")) and not capability_accepts("cpu", Toolchain("vulkan"))
    assert not capability_accepts("nvidia-cuda-12", Toolchain("cuda", "13"))
    assert capability_accepts("nvidia-l4t-cuda-13", Toolchain("l4t", "13"))
