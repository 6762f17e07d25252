"""The model gate's parts that need no llama.cpp build: the source mirror that keeps the
persistent build incremental, the build key, the case file and the paged/stock comparison.
The whole gate (a real libllama build) runs in the slow tier: tests/patchctl/test_model_gate.py."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from engine.llamacpp.build import CMAKE_OPTIONS, BuildError, build_key, mirror_tree
from engine.llamacpp.model_gate import CASES, DecodeCase, DriverRun, compare_paged, streams_md5, write_cases


def git_tree(path: Path, files: dict[str, str]) -> Path:
    path.mkdir()
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    (path / ".gitignore").write_text("build/\n")
    subprocess.run(["git", "-C", str(path), "add", "-A"], check=True)
    return path


def test_mirror_rewrites_only_what_changed(tmp_path: Path) -> None:
    tree = git_tree(tmp_path / "tree", {"src/a.cpp": "a", "src/b.cpp": "b", "CMakeLists.txt": "x"})
    (tree / "build").mkdir()
    (tree / "build" / "ignored.o").write_text("object")
    (tree / "untracked.cpp").write_text("new")  # not yet committed: still part of the tree
    mirror = tmp_path / "mirror"
    assert mirror_tree(tree, mirror) == 5
    assert sorted(p.relative_to(mirror).as_posix() for p in mirror.rglob("*") if p.is_file()) == [
        ".gitignore",
        "CMakeLists.txt",
        "src/a.cpp",
        "src/b.cpp",
        "untracked.cpp",
    ]
    old = 1_000_000_000
    for path in mirror.rglob("*"):
        os.utime(path, ns=(old, old))
    (tree / "src" / "b.cpp").write_text("b tampered")
    (tree / "src" / "a.cpp").touch()  # a new timestamp, the same bytes: not rewritten
    (tree / "untracked.cpp").unlink()
    assert mirror_tree(tree, mirror) == 1
    assert (mirror / "src" / "b.cpp").read_text() == "b tampered"
    assert (mirror / "src" / "a.cpp").stat().st_mtime_ns == old
    assert not (mirror / "untracked.cpp").exists()
    assert mirror_tree(tree, mirror) == 0


def test_mirror_needs_a_git_tree(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    with pytest.raises(BuildError, match="cannot list the files"):
        mirror_tree(tmp_path / "plain", tmp_path / "mirror")


def test_build_key_follows_pin_compiler_and_options() -> None:
    pin, other = "296d9b60b97f6eeb1df161fefb921a44c04a1122", "aa601ae300d05a804f5f68940ab6fa75fc9653d3"
    key = build_key(pin, "c++ (Debian 12.2.0-14) 12.2.0", None)
    assert key.startswith("296d9b60b97f-") and key == build_key(pin, "c++ (Debian 12.2.0-14) 12.2.0", None)
    assert (
        len(
            {
                key,
                build_key(other, "c++ 12", None),
                build_key(pin, "clang 16", None),
                build_key(pin, "c++ 12", "/usr/bin/ccache"),
            }
        )
        == 4
    )
    assert build_key(pin, "c++ 12", None, "Ninja") != build_key(pin, "c++ 12", None, "Unix Makefiles")
    assert "-DGGML_NATIVE=OFF" in CMAKE_OPTIONS  # a cached build must run on any machine of the same kind


def test_case_file_is_the_drivers_format(tmp_path: Path) -> None:
    write_cases(tmp_path / "cases.tsv", CASES)
    lines = (tmp_path / "cases.tsv").read_text().splitlines()
    assert len(lines) == len(CASES) >= 5
    name, layout, n_predict, prefix, *suffixes = lines[-1].split("\t")
    assert (layout, int(n_predict), len(suffixes)) == ("streams", 40, 3) and prefix
    assert {c.layout for c in CASES} == {"unified", "streams"}
    assert any(len(c.suffixes) == 1 for c in CASES) and any(c.prefix for c in CASES)
    with pytest.raises(ValueError, match="tabs or newlines"):
        DecodeCase("bad", "unified", 1, "", ("a\tb",)).line()


def test_paged_comparison_names_the_case_and_the_first_difference() -> None:
    cases = [DecodeCase("same", "unified", 3, "", ("a", "b")), DecodeCase("drift", "streams", 3, "", ("a", "b"))]
    stock = DriverRun(tokens={"same": [[1, 2, 3], [4, 5, 6]], "drift": [[1, 2, 3], [4, 5, 6]]})
    paged = DriverRun(tokens={"same": [[1, 2, 3], [4, 5, 6]], "drift": [[1, 2, 3], [4, 9, 6]]})
    same, drift = compare_paged(cases, stock, paged)
    assert same.ok and same.name == "paged/same" and streams_md5([[1, 2, 3], [4, 5, 6]]) in same.detail
    assert not drift.ok and drift.name == "paged/drift"
    assert "sequence 1 differs at token 1 (stock 5, paged 9)" in drift.detail
    failed = compare_paged(cases[:1], DriverRun(failures={"same": "llama_decode returned 1"}), paged)
    assert not failed[0].ok and "llama_decode returned 1" in failed[0].detail


def test_md5_is_of_the_printed_streams() -> None:
    import hashlib

    assert streams_md5([[1, 2], [3]]) == hashlib.md5(b"1 2\n3\n").hexdigest()


def test_engine_comparison_passes_its_own_run_and_names_what_drifts(tmp_path: Path) -> None:
    # llama.cpp's side stood in by the engine's own greedy run, written in the driver's formats:
    # the comparison must pass it, then name the case for a drifted logit, token or prompt.
    import numpy as np
    import torch

    from engine.llamacpp.model_gate import LOGIT_TOLERANCE, compare_engine
    from engine.model.gguf import write_gguf
    from engine.model.gguf_tokenizer import load_tokenizer
    from engine.model.gguf_vocab import llama_spm_vocabulary, tiny_model_for
    from engine.model.reference import contiguous_greedy

    vocab = llama_spm_vocabulary()
    model_path = tmp_path / "tiny.gguf"
    model = tiny_model_for(vocab)
    write_gguf(model_path, model, vocab)
    case = DecodeCase("mini", "unified", 4, "", ("the cat",))
    prompt = load_tokenizer(model_path).encode("the cat")
    run = contiguous_greedy(model, [prompt], case.n_predict)
    logits = torch.stack(run.logits[0]).numpy().astype(np.float32)
    (tmp_path / "logits").mkdir()
    logits.tofile(tmp_path / "logits" / "mini.0.f32")
    stock = DriverRun(prompts={"mini": [prompt]}, tokens={"mini": run.token_ids}, logits_dir=tmp_path / "logits")

    passed = compare_engine(model_path, [case], stock)
    assert [(r.name, r.ok) for r in passed.results] == [("tokenizer/mini", True), ("engine/mini", True)]
    assert passed.max_logit_diff <= LOGIT_TOLERANCE and passed.min_top2_margin > 0

    logits[2, 7] += 10 * LOGIT_TOLERANCE
    logits.tofile(tmp_path / "logits" / "mini.0.f32")
    drifted = compare_engine(model_path, [case], stock).results[1]
    assert not drifted.ok and f"> {LOGIT_TOLERANCE:g}" in drifted.detail

    other_tokens = DriverRun(
        prompts={"mini": [prompt]}, tokens={"mini": [run.token_ids[0][:3] + [5]]}, logits_dir=tmp_path / "logits"
    )
    assert "sequence 0 differs at token 3" in compare_engine(model_path, [case], other_tokens).results[1].detail

    other_prompt = DriverRun(
        prompts={"mini": [[1, 2, 3]]}, tokens={"mini": run.token_ids}, logits_dir=tmp_path / "logits"
    )
    tokenizer_result = compare_engine(model_path, [case], other_prompt).results[0]
    assert not tokenizer_result.ok and "llama.cpp [1, 2, 3]" in tokenizer_result.detail


def test_build_refuses_a_tree_that_is_not_a_git_tree(tmp_path: Path) -> None:
    from engine.llamacpp.build import build_targets

    (tmp_path / "plain").mkdir()
    with pytest.raises(BuildError, match="is not a git work tree"):
        build_targets(tmp_path / "plain", ["llama"], "", tmp_path / "build.log")


def test_listing_a_tree_runs_nothing_its_git_config_sets(tmp_path: Path) -> None:
    """The tree's own config (fsmonitor, hooks) runs nothing when the build lists its files; the
    machine's global excludes do not change the list."""
    tree = git_tree(tmp_path / "tree", {"src/a.cpp": "a"})
    marker, payload = tmp_path / "ran", tmp_path / "payload.sh"
    payload.write_text(f"#!/bin/sh\ntouch {marker}\n")
    payload.chmod(0o755)
    subprocess.run(["git", "config", "--file", str(tree / ".git/config"), "core.fsmonitor", str(payload)], check=True)
    (tree / "untracked.cpp").write_text("new")
    subprocess.run(["git", "status"], cwd=tree, capture_output=True, env={**os.environ, "GIT_DIR": str(tree / ".git")})
    assert marker.exists()  # live: git run plainly there runs it
    marker.unlink()
    assert mirror_tree(tree, tmp_path / "mirror") == 3
    assert not marker.exists()
