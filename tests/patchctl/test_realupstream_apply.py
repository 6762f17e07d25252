"""The real-upstream tier: llama.cpp trees vendored by llama-cpp-python 0.3.30 and 0.3.33
on PyPI, turned into a reproducible local upstream (downloads cached across runs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from patchctl import git
from patchctl.upstream.store import Store

from .conftest import REAL_PIN, REAL_TIP, REAL_URL, Project, Repo

pytestmark = pytest.mark.realupstream


@pytest.fixture
def mirror_path() -> Path:
    return Store().mirror(REAL_URL).path  # the session-wide cache (see conftest)


def test_sdist_upstream_is_reproducible(mirror_path: Path) -> None:
    assert git.rev_parse(mirror_path, "refs/tags/v0.3.30") == REAL_PIN
    assert git.rev_parse(mirror_path, "refs/tags/v0.3.33") == REAL_TIP
    assert git.rev_parse(mirror_path, "refs/heads/main") == REAL_TIP
    files = git.run(["ls-tree", "-r", "--name-only", REAL_PIN], mirror_path).stdout.split()
    assert "src/llama-kv-cache.cpp" in files and "CMakeLists.txt" in files and len(files) > 1000


def test_apply_export_round_trip_on_real_llama_cpp(tmp_path: Path, mirror_path: Path, cli) -> None:
    fake_upstream = Repo.__new__(Repo)
    fake_upstream.path = mirror_path
    project = Project(tmp_path / "project", fake_upstream, REAL_PIN, series="llama.cpp")
    config = (project.path / "matrix.yaml").read_text().replace(f"url: {mirror_path}", f"url: '{REAL_URL}'")
    # The series starts empty on purpose and is filled by export below (empty fails closed otherwise).
    config = config.replace("dir: patches/llama.cpp\n", "dir: patches/llama.cpp\n    allow_empty: true\n", 1)
    (project.path / "matrix.yaml").write_text(config)
    work = tmp_path / "work"
    assert cli("-C", project.path, "apply", "--into", work).exit_code == 0
    kv = work / "src" / "llama-kv-cache.cpp"
    kv.write_text(
        kv.read_text().replace(
            '#include "llama-kv-cache.h"\n', '#include "llama-kv-cache.h"\n// downstream marker\n', 1
        )
    )
    Repo(work).commit({}, "Mark the KV cache\n\nA one-line downstream change.")
    assert cli("-C", project.path, "export", "llama.cpp", "--from", work).exit_code == 0
    assert project.patch_names() == ["0001-Mark-the-KV-cache.patch"]
    assert cli("-C", project.path, "lint").exit_code == 0
    # The same patch at the newer upstream: applies (with or without offset) or is
    # classified precisely; either way the JSON says which.
    result = cli("-C", project.path, "apply", "--rev", "v0.3.33", "--into", tmp_path / "tip", "--json")
    status = json.loads(result.stdout)["results"][0]["patches"][0]["status"]
    assert (result.exit_code, status) in {(0, "applied"), (0, "applied-with-offset"), (1, "context-drift")}
