"""This repository's own llama.cpp series, on the real llama.cpp trees (0.3.30 and 0.3.33):
it applies strictly to its pin, lints clean, and the gate proves the C++ port bit-exact
against the engine's conformance vectors. The pin is the one of the upstream source the session
follows (conftest.SESSION_UPSTREAM_SOURCE: `ci` in CI's test job, see test_own_series.py)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from patchctl.project import config as config_mod

from .conftest import SESSION_UPSTREAM_SOURCE

pytestmark = pytest.mark.realupstream

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def repo_copy(tmp_path: Path) -> Path:
    """matrix.yaml and patches/ of this repository, so the tests write nothing into it. The model
    gate (a libllama build) is left out here; the slow tier runs it (test_model_gate.py)."""
    data = yaml.safe_load((ROOT / "matrix.yaml").read_text())
    gates = data["series"]["llama.cpp"]["gates"]
    data["series"]["llama.cpp"]["gates"] = [g for g in gates if g["name"] != "model-gate"]
    assert len(data["series"]["llama.cpp"]["gates"]) == len(gates) - 1
    (tmp_path / "matrix.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    shutil.copytree(ROOT / "patches", tmp_path / "patches")
    return tmp_path


@pytest.fixture
def applied(repo_copy: Path, cli) -> Path:
    result = cli("-C", repo_copy, "--upstream-source", SESSION_UPSTREAM_SOURCE, "apply", "llama.cpp", "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)["results"][0]
    followed = config_mod.load(repo_copy / "matrix.yaml").with_upstream_source(SESSION_UPSTREAM_SOURCE)
    assert payload["rev"] == followed.upstreams["llama.cpp"].pin
    own = sorted(p.name for p in (ROOT / "patches" / "llama.cpp").glob("*.patch"))
    assert [p["patch"] for p in payload["patches"]] == own and len(own) >= 4
    assert [p["status"] for p in payload["patches"]] == ["applied"] * len(own)
    return repo_copy


def test_series_lints_clean_against_its_pin(repo_copy: Path, cli) -> None:
    result = cli("-C", repo_copy, "--upstream-source", SESSION_UPSTREAM_SOURCE, "lint")
    assert result.exit_code == 0, result.output


def test_gate_proves_the_port_bit_exact(applied: Path, cli) -> None:
    result = cli("-C", applied, "--upstream-source", SESSION_UPSTREAM_SOURCE, "gate", "llama.cpp", "--json")
    assert result.exit_code == 0, result.output
    gates = {g["name"]: g for g in json.loads(result.stdout)["gates"]}
    assert gates["engine-vectors"]["baseline"] == "match"
    cases = gates["paged-blocks-bitexact"]["cases"]
    vectors = sorted(p.stem for p in (ROOT / "engine" / "conformance" / "vectors").glob("*.txt"))
    assert sorted(c["name"] for c in cases if c["name"] in vectors) == vectors
    assert all(c["ok"] for c in cases)


def test_gate_catches_a_port_that_drifts(applied: Path, cli) -> None:
    # Break the C++ port's eviction order in the applied tree: the gate must name a vector.
    source = applied / ".patchctl" / "trees" / "llama.cpp" / "src" / "llama-paged-blocks.cpp"
    text = source.read_text()
    assert "prepend_n" in text
    tampered = text.replace("queue.prepend_n(unhashed);", "queue.append_n(unhashed);", 1)
    assert tampered != text
    source.write_text(tampered)
    # An edit of the tree is not the series: gate runs on pin + series only (issue 45).
    refused = cli("-C", applied, "--upstream-source", SESSION_UPSTREAM_SOURCE, "gate", "llama.cpp")
    assert refused.exit_code == 2 and "is not pin + series, so gate does not run on it" in refused.stderr
    # Committed and exported, the drift is the series: the gate names the vector that catches it.
    who = ["-c", "user.name=Dana", "-c", "user.email=dana@example.invalid"]
    message = "Append unhashed blocks\n\nA port that drifts from the engine."
    subprocess.run(["git", *who, "commit", "-qam", message], cwd=source.parents[1], check=True)
    assert cli("-C", applied, "--upstream-source", SESSION_UPSTREAM_SOURCE, "export", "llama.cpp").exit_code == 0
    result = cli("-C", applied, "--upstream-source", SESSION_UPSTREAM_SOURCE, "gate", "llama.cpp")
    assert result.exit_code == 1, result.output
    assert "gate paged-blocks-bitexact of series llama.cpp failed: exit 1, first failing case" in result.stderr


@pytest.mark.slow
def test_full_libllama_build_with_the_series(applied: Path) -> None:
    tree = applied / ".patchctl" / "trees" / "llama.cpp"
    from patchctl.project import config

    build = config.load(applied / "matrix.yaml").get_series("llama.cpp").build[0]
    subprocess.run(["/bin/sh", "-c", build.command], cwd=tree, check=True, timeout=build.timeout)
    assert (tree / "build" / "bin" / "test-paged-blocks").exists()
