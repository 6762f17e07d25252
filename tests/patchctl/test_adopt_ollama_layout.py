"""Adopting a vendoring project laid out as Ollama's was (issue 32), on the fixture in
`fixtures/ollama_layout/`: `upstream/` is a tree laid out as llama.cpp's (a root `LICENSE`,
none in `ggml/`, directories no filter takes); `project/` is the vendoring side as Ollama kept
it: a `Makefile.sync` whose two rsync lines copy `$(addprefix $<,/LICENSE /)` and
`$(addprefix $<,/LICENSE /ggml/)`, their `.rsync-filter` files (Ollama's, trimmed), a series of
three format-patch files and the two vendored directories exactly as that Makefile's `make
apply-patches` and rsync made them (`test_the_fixture_is_what_the_makefiles_own_rsync_copies`
runs them again and compares).

The bar: `init --from makefile-sync` maps it with the filter files as they are (no globs) and
the root LICENSE as a `files:` item; `lint` and `vendor --check` pass on the unmodified
checkout; an edited vendored file is named (exit 1); `vendor`, `export --from-vendor` and
`pin-sync` handle the single file."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from patchctl import git

from .conftest import ok, run_cli

FIXTURE = Path(__file__).parent / "fixtures" / "ollama_layout"
COPIES = ("llama/llama.cpp", "ml/backend/ggml/ggml")
OWN_FILES = {  # the project's own files in the copies: its filters protect them
    "llama/llama.cpp/.rsync-filter",
    "llama/llama.cpp/llama.go",
    "ml/backend/ggml/ggml/.rsync-filter",
    "ml/backend/ggml/ggml/ggml.go",
    "ml/backend/ggml/ggml/src/ggml-metal/ggml-metal-embed.metal",
}
NEEDS_RSYNC = pytest.mark.skipif(not (shutil.which("rsync") and shutil.which("make")), reason="needs rsync and make")


def build_upstream(into: Path) -> str:
    """The fixture's llama.cpp-like tree as a git repository of one commit: the pin."""
    shutil.copytree(FIXTURE / "upstream", into)
    git.init_repo(into)
    return git.commit_all(into, "llama.cpp, laid out as the fixture has it")


def checkout(root: Path, upstream: Path, pin: str) -> Path:
    """The vendoring project as committed (its Makefile.sync naming UPSTREAM and PIN)."""
    shutil.copytree(FIXTURE / "project", root)
    makefile = root / "Makefile.sync"
    makefile.write_text(makefile.read_text().replace("@UPSTREAM@", str(upstream)).replace("@FETCH_HEAD@", pin))
    git.init_repo(root)
    git.commit_all(root, "a vendoring project laid out as ollama's")
    return root


def files_under(root: Path, directories: tuple[str, ...] = COPIES) -> dict[str, tuple[bytes, bool]]:
    """Repository path -> (bytes, executable) of every file in DIRECTORIES."""
    found = {}
    for directory in directories:
        for path in sorted((root / directory).rglob("*")):
            if path.is_file():
                found[path.relative_to(root).as_posix()] = (path.read_bytes(), bool(path.stat().st_mode & 0o111))
    return found


@pytest.fixture
def adopted(tmp_path: Path) -> tuple[Path, Path, str]:
    """(project, upstream, pin): the fixture checkout after `init --from makefile-sync`."""
    upstream = tmp_path / "llama.cpp"
    pin = build_upstream(upstream)
    root = checkout(tmp_path / "ollama", upstream, pin)
    before = files_under(root, ("Makefile.sync", "llama", "ml"))
    out = ok("-C", root, "init", "--from", "makefile-sync")
    assert "found: 1 of 3 patch(es) without a subject or a description" in out
    unmapped = [line for line in out.splitlines() if line.startswith("not mapped:")]
    assert all(line.startswith("not mapped: workflows: action:") for line in unmapped), unmapped
    assert files_under(root, ("Makefile.sync", "llama", "ml")) == before  # adopting moves and edits nothing
    git.commit_all(root, "adopt patchctl")
    return root, upstream, pin


def test_init_keeps_the_filter_files_and_maps_the_root_license_as_a_single_file(adopted) -> None:
    root, _, _ = adopted
    vendor = yaml.safe_load((root / "matrix.yaml").read_text())["series"]["llama"]["vendor"]
    assert vendor == [
        {"from": "", "to": "llama/llama.cpp", "filter": ["include LICENSE", "merge llama/llama.cpp/.rsync-filter"]},
        {
            "from": "ggml",
            "to": "ml/backend/ggml/ggml",
            "filter": ["include LICENSE", "merge ml/backend/ggml/ggml/.rsync-filter"],
            "files": [{"from": "LICENSE", "to": "ml/backend/ggml/ggml/LICENSE"}],
        },
    ]
    text = (root / "matrix.yaml").read_text()
    section = text[text.index("    vendor:") : text.index("\n\n", text.index("    vendor:"))]
    assert len(section.splitlines()) <= 12, section  # as short as the Makefile's own two rsync lines


def test_lint_and_vendor_check_pass_on_the_unmodified_checkout_and_vendor_writes_nothing(adopted) -> None:
    root, _, pin = adopted
    assert "lint: no findings" in ok("-C", root, "lint")  # the three patches apply strictly to the pin
    out = ok("-C", root, "vendor", "--check")
    assert out.splitlines() == [f"llama: 30 vendored file(s) from {pin[:12]} + series: up to date"]
    before = files_under(root)
    assert "up to date (nothing written)" in ok("-C", root, "vendor")
    assert files_under(root) == before  # the LICENSE in ml/backend/ggml/ggml/ stays: it is upstream's root LICENSE
    ok("-C", root, "export", "llama", "--check")


def test_an_edited_vendored_file_is_caught_and_named(adopted) -> None:
    root, _, pin = adopted
    ggml = root / "ml/backend/ggml/ggml"
    (ggml / "src/ggml.c").write_bytes((ggml / "src/ggml.c").read_bytes() + b"// a local edit\n")
    (ggml / "LICENSE").write_text("edited\n")
    (root / "llama/llama.cpp/LICENSE").unlink()
    (ggml / "src/ggml-cuda/stale.cu").write_text("left over\n")
    (ggml / "ggml.go").write_text("package ggml // the project's own: never compared\n")
    result = run_cli("-C", root, "vendor", "--check")
    assert result.exit_code == 1, result.output
    assert result.stdout.splitlines() == [
        "llama/llama.cpp/LICENSE: missing (pin + series has it)",
        "ml/backend/ggml/ggml/LICENSE: differs from pin + series",
        "ml/backend/ggml/ggml/src/ggml-cuda/stale.cu: not in pin + series (a stale file the copy manages)",
        "ml/backend/ggml/ggml/src/ggml.c: differs from pin + series",
        f"llama: 30 vendored file(s) from {pin[:12]} + series: 4 differ",
    ]
    assert result.stderr == (
        "patchctl: error: 4 vendored file(s) differ from pin + series: run `patchctl vendor` to rewrite them\n"
    )
    assert "wrote 3, deleted 1" in ok("-C", root, "vendor")
    assert "up to date" in ok("-C", root, "vendor", "--check")
    assert (ggml / "LICENSE").read_bytes() == (FIXTURE / "upstream/LICENSE").read_bytes()
    assert (ggml / "ggml.go").read_text() == "package ggml // the project's own: never compared\n"


def test_export_from_vendor_takes_an_edit_of_the_single_file_back_to_the_upstreams_root(adopted) -> None:
    root, _, _ = adopted
    license_text = (root / "ml/backend/ggml/ggml/LICENSE").read_text().replace("2023-2024", "2023-2025")
    (root / "ml/backend/ggml/ggml/LICENSE").write_text(license_text)
    result = run_cli("-C", root, "export", "llama", "--from-vendor", "-m", "License: 2025\n\nThe year moved.")
    assert result.exit_code == 0, result.output
    patch = (root / "llama/patches/0004-license-2025.patch").read_text()
    assert "diff --git a/LICENSE b/LICENSE" in patch and "+Copyright (c) 2023-2025 The ggml authors" in patch
    assert "ggml/LICENSE" not in patch  # llama.cpp has no ggml/LICENSE: the copy's file is the root's
    # The other copy holds the same upstream file: pin + series now has the edit there too.
    result = run_cli("-C", root, "vendor", "--check")
    assert result.exit_code == 1 and result.stdout.splitlines()[0] == (
        "llama/llama.cpp/LICENSE: differs from pin + series"
    ), result.output
    assert "wrote 1, deleted 0" in ok("-C", root, "vendor")
    assert (root / "llama/llama.cpp/LICENSE").read_text() == license_text
    ok("-C", root, "export", "llama", "--check")


def test_pin_sync_moves_the_single_file_with_the_pin(adopted, tmp_path: Path) -> None:
    root, upstream, old = adopted
    (upstream / "LICENSE").write_text((upstream / "LICENSE").read_text() + "\nA new paragraph upstream.\n")
    (upstream / "ggml/src/ggml-cuda/fattn.cu").write_text("// new upstream kernel\n")
    (upstream / "ggml/src/ggml-sycl/new.cpp").write_text("// not vendored\n")
    new = git.commit_all(upstream, "upstream moves")
    report = tmp_path / "report.json"
    result = run_cli("-C", root, "pin-sync", "--to", new, "--json-file", report)
    assert result.exit_code == 0, result.output
    changed = set(json.loads(report.read_text())["files_changed"])
    assert {
        "matrix.yaml",
        "Makefile.sync",
        "llama/llama.cpp/LICENSE",
        "ml/backend/ggml/ggml/LICENSE",
        "ml/backend/ggml/ggml/src/ggml-cuda/fattn.cu",
    } <= changed
    assert not any("sycl" in path for path in changed)
    assert f"FETCH_HEAD={new}\n" in (root / "Makefile.sync").read_text() and old != new
    assert (root / "ml/backend/ggml/ggml/LICENSE").read_text().endswith("A new paragraph upstream.\n")
    assert f"llama: 31 vendored file(s) from {new[:12]} + series: up to date" in ok("-C", root, "vendor", "--check")


@NEEDS_RSYNC
def test_the_fixture_is_what_the_makefiles_own_rsync_copies(tmp_path: Path) -> None:
    """Ollama's own flow on the fixture: clone the upstream into WORKDIR, check out the pin, `git
    am` the series, rsync both copies; what rsync leaves is the committed vendored tree, file
    for file. Then init + vendor --check agree on that tree."""
    upstream = tmp_path / "llama.cpp"
    pin = build_upstream(upstream)
    root = checkout(tmp_path / "ollama", upstream, pin)
    committed = files_under(root)
    for path in set(committed) - OWN_FILES:
        (root / path).unlink()  # the copies as before a first sync: only the project's own files
    git.run(["clone", "-q", str(upstream), "llama/vendor"], root)
    for target in ("checkout", "apply-patches", *COPIES):
        subprocess.run(["make", "-s", "-f", "Makefile.sync", target], cwd=root, check=True, capture_output=True)
    assert files_under(root) == committed
    shutil.rmtree(root / "llama/vendor")
    for marker in (root / "llama/patches").glob(".*.patched"):
        marker.unlink()
    ok("-C", root, "init", "--from", "makefile-sync")
    assert "up to date" in ok("-C", root, "vendor", "--check")


def test_a_short_fetch_head_moves_with_the_pin_as_short(tmp_path: Path) -> None:
    """Ollama's Makefile.sync named its pin abbreviated (`FETCH_HEAD=ec98e2002`): init expands it
    through the upstream and keeps the line as a 9-digit pin_files entry; pin-sync writes the new
    pin there abbreviated as long, beside the full pin in matrix.yaml."""
    upstream = tmp_path / "llama.cpp"
    pin = build_upstream(upstream)
    root = checkout(tmp_path / "ollama", upstream, pin[:9])
    out = ok("-C", root, "init", "--from", "makefile-sync")
    assert f"found: pin: {pin} (Makefile.sync: FETCH_HEAD)" in out
    assert "found: pin file: Makefile.sync:3 (FETCH_HEAD, the pin abbreviated to 9)" in out
    git.commit_all(root, "adopt patchctl")
    (upstream / "ggml/src/ggml-cuda/fattn.cu").write_text("// new upstream kernel\n")
    new = git.commit_all(upstream, "upstream moves")
    result = run_cli("-C", root, "pin-sync", "--to", new)
    assert result.exit_code == 0, result.output
    text = (root / "Makefile.sync").read_text()
    assert f"FETCH_HEAD={new[:9]}\n" in text and pin[:9] not in text
    assert yaml.safe_load((root / "matrix.yaml").read_text())["upstreams"]["llama.cpp"]["pin"] == new
    assert "lint: no findings" in ok("-C", root, "lint", "--no-apply")
