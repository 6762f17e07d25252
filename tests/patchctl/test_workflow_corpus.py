"""`matrix check` on the workflows of six real repositories (fixtures/workflow_corpus/README.md):
no false finding, a known amount read, and the exact finding once a file they call is taken
away. Then Ollama's own workflows beside the ones `init` and `matrix render` give it.

Before issue 43, MX801/MX802 read every `run:` line as a bash line run from the repository
root: on this corpus they reported 30 false findings for Ollama (`./scripts/build_windows`, run
by pwsh on a Windows runner, finds `build_windows.ps1`; `dist/...` are build outputs) and 27 for
Electron (its checkout at `path: src/electron`), 105 over all the workflows of these repositories."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from patchctl import git

from .conftest import ok, run_cli
from .test_adopt_ollama_layout import build_upstream, checkout
from .tools import installed_tool
from .workflow_corpus import CORPUS, materialize

BARE_CONFIG = "version: 1\nupstreams: {}\nseries: {}\n"
# What each repository's kept workflows give `matrix check` to read: workflows, `run:` steps, the
# steps whose runner, shell, directory and checkout are known, and lookups of repository files.
READ = {
    "ollama/ollama": (5, 92, 70, 26),
    "mudler/LocalAI": (9, 29, 29, 31),
    "electron/electron": (8, 49, 41, 59),
    "abetlen/llama-cpp-python": (4, 22, 16, 14),
    "conda-forge/llama.cpp-feedstock": (1, 5, 4, 9),
    "openwrt/packages": (2, 0, 0, 0),
}


def check(root: Path) -> dict:
    result = run_cli("-C", root, "matrix", "check", "--json")
    payload = json.loads(result.stdout)
    assert result.exit_code == (1 if payload["findings"] else 0), result.output
    return payload


def findings(payload: dict) -> list[str]:
    return [f"{f['file']}:{f['line']}: {f['rule']}: {f['subject']}" for f in payload["findings"]]


@pytest.mark.parametrize("repository", sorted(CORPUS))
def test_real_workflows_get_no_finding(tmp_path: Path, repository: str) -> None:
    root = materialize(repository, tmp_path / "repo")
    (root / "matrix.yaml").write_text(BARE_CONFIG)
    payload = check(root)
    assert findings(payload) == []
    tally = payload["workflows"]
    assert (tally["files"], tally["run_steps"], tally["read"], tally["references"]) == READ[repository]
    files, steps, read, references = READ[repository]
    summary = ok("-C", root, "matrix", "check").strip()
    assert summary.endswith(
        f"; {files} workflow(s), {read} of {steps} run step(s) read, {references} reference(s) to repository files "
        "checked"
    )


# A file the workflows call, taken away: exactly the steps that call it are reported.
REMOVED = {
    # pwsh on the `windows` runner: `./scripts/build_windows` and `./scripts/build_windows.ps1` both
    # need it; Linux and macOS steps never call it.
    ("ollama/ollama", "scripts/build_windows.ps1"): [
        ".github/workflows/release.yaml:299: MX802: ./scripts/build_windows.ps1",
        ".github/workflows/release.yaml:371: MX802: ./scripts/build_windows",
        ".github/workflows/release.yaml:449: MX802: ./scripts/build_windows.ps1",
        ".github/workflows/test-llamacpp-update.yaml:447: MX802: ./scripts/build_windows.ps1",
        ".github/workflows/test-llamacpp-update.yaml:517: MX802: ./scripts/build_windows.ps1",
        ".github/workflows/test-llamacpp-update.yaml:580: MX802: ./scripts/build_windows.ps1",
    ],
    ("ollama/ollama", "scripts/build_darwin.sh"): [
        ".github/workflows/release.yaml:79: MX802: ./scripts/build_darwin.sh",
        ".github/workflows/test-llamacpp-update.yaml:59: MX802: ./scripts/build_darwin.sh",
    ],
    ("mudler/LocalAI", ".github/workflows/backend_build.yml"): [
        f".github/workflows/backend.yml:{line}: MX801: ./.github/workflows/backend_build.yml"
        for line in (93, 129, 160, 191, 222)
    ],
    ("mudler/LocalAI", ".github/actions/configure-apt-mirror/action.yml"): [
        f".github/workflows/{where}: MX801: ./.github/actions/configure-apt-mirror"
        for where in (
            "backend_build.yml:108",
            "build-test.yaml:85",
            "checksum_checker.yaml:12",
            "image_build.yml:85",
            "release.yaml:67",
            "tests-e2e.yml:35",
        )
    ],
    # Called through the checkout at `path: src/electron`.
    ("electron/electron", "script/actions/restore-artifacts.sh"): [
        f".github/workflows/{where}: MX802: ./src/electron/script/actions/restore-artifacts.sh"
        for where in ("pipeline-segment-electron-test-64k.yml:50", "pipeline-segment-electron-test.yml:252")
    ],
    ("electron/electron", ".github/actions/install-dependencies/action.yml"): [
        f".github/workflows/{where}: MX801: ./src/electron/.github/actions/install-dependencies"
        for where in ("pipeline-electron-lint.yml:41", "pipeline-segment-electron-build.yml:148")
    ],
    # conda-forge's .gitignore ignores `*` and its files are added anyway: that rule says nothing.
    ("conda-forge/llama.cpp-feedstock", ".scripts/run_osx_build.sh"): [
        ".github/workflows/conda-build.yml:205: MX802: ./.scripts/run_osx_build.sh",
    ],
    ("abetlen/llama-cpp-python", "scripts/releases-to-pep-503.sh"): [
        ".github/workflows/generate-index-from-release.yaml:37: MX802: ./scripts/releases-to-pep-503.sh",
    ],
}


@pytest.mark.parametrize(("repository", "removed"), sorted(REMOVED), ids=[f"{r}:{p}" for r, p in sorted(REMOVED)])
def test_a_file_taken_away_is_reported_where_it_is_called(tmp_path: Path, repository: str, removed: str) -> None:
    root = materialize(repository, tmp_path / "repo")
    (root / "matrix.yaml").write_text(BARE_CONFIG)
    (root / removed).unlink()
    assert findings(check(root)) == REMOVED[(repository, removed)]


# ---------------------------------------------------------------- Ollama after `init`


def test_ollama_adopted_by_init_renders_and_checks_clean_beside_its_own_workflows(tmp_path: Path) -> None:
    """The Ollama layout (fixtures/ollama_layout) with Ollama's real workflows: `init --from
    makefile-sync --action` then `matrix render`: `matrix check` reads both, the rendered and
    Ollama's own, and finds nothing; the rendered ones pass actionlint and zizmor."""
    upstream = tmp_path / "llama.cpp"
    layout = checkout(tmp_path / "layout", upstream, build_upstream(upstream))
    root = materialize("ollama/ollama", tmp_path / "ollama")  # its workflows, and what they call
    shutil.copytree(layout, root, ignore=shutil.ignore_patterns(".git"), dirs_exist_ok=True)
    git.commit_all(root, "ollama's vendoring, laid out as the fixture has it")
    action = "patchctl/patchctl@" + "c0ffee00" * 5  # a commit this checkout does not hold: not judged
    out = ok("-C", root, "init", "--from", "makefile-sync", "--action", action)
    assert f"chose: workflows: action: {action} (--action)" in out
    assert "chose: canary: upstream llama.cpp, weekly, apply-only" in out
    rendered = ok("-C", root, "matrix", "render")
    assert rendered.splitlines() == [
        "wrote     .github/workflows/canary.yml",
        "wrote     .github/workflows/ci.yml",
        "wrote     .github/workflows/pin-sync.yml",
    ]  # no image row, so no backend.yml; the apply-only canary is rendered
    payload = check(root)
    assert findings(payload) == []
    assert payload["workflows"]["files"] == 5 + 3 and payload["workflows"]["read"] > READ["ollama/ollama"][2]
    names = [root / ".github/workflows" / n for n in ("canary.yml", "ci.yml", "pin-sync.yml")]
    lint = subprocess.run([installed_tool("actionlint"), "-no-color", *map(str, names)], capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    for persona in ("regular", "pedantic"):
        audit = subprocess.run(
            [installed_tool("zizmor"), "--offline", "--persona", persona, *map(str, names)],
            capture_output=True,
            text=True,
        )
        assert audit.returncode == 0, audit.stdout + audit.stderr
