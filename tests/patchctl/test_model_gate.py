"""The model gate on this repository's series (slow tier: it builds libllama with the series).

`patchctl gate` runs `python -m engine model-gate` in the applied tree: the tiny model, exported
as a GGUF file llama.cpp loads, decoded greedily by the series' driver with LLAMA_KV_PAGED off
and on, and by the engine. The build lives in the persistent cache (keyed by pin and compiler),
so only the first run pays for it (about 7 minutes on two cores); a tampered tree recompiles
the one file it changes.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from engine.__main__ import main as engine_main
from engine.llamacpp.build import build_targets
from engine.llamacpp.model_gate import CASES, DRIVER, run_driver, write_cases
from engine.model.gguf_tokenizer import load_tokenizer
from engine.model.gguf_vocab import llama_spm_vocabulary

from .conftest import REAL_PIN

pytestmark = [pytest.mark.realupstream, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def applied(tmp_path: Path, cli) -> Path:
    """This repository's matrix.yaml and series, applied in a scratch project."""
    shutil.copy(ROOT / "matrix.yaml", tmp_path / "matrix.yaml")
    shutil.copytree(ROOT / "patches", tmp_path / "patches")
    result = cli("-C", tmp_path, "apply", "llama.cpp", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["results"][0]["rev"] == REAL_PIN
    return tmp_path


def test_paged_equals_stock_and_the_engine_equals_llama_cpp(applied: Path, cli) -> None:
    result = cli("-C", applied, "gate", "llama.cpp", "--json")
    assert result.exit_code == 0, result.output
    gate = {g["name"]: g for g in json.loads(result.stdout)["gates"]}["model-gate"]
    cases = {c["name"]: c for c in gate["cases"]}
    for case in CASES:
        paged, engine = cases[f"paged/{case.name}"], cases[f"engine/{case.name}"]
        assert paged["ok"] and engine["ok"] and cases[f"tokenizer/{case.name}"]["ok"]
        md5 = paged["detail"].split()[1]
        assert len(md5) == 32 and f"md5 {md5}," in engine["detail"]  # llama.cpp's tokens are the engine's
    assert len(cases) == 3 * len(CASES) and all(c["ok"] for c in cases.values())
    # where the paged placement puts cells elsewhere (sequences interleaved in one cache) the logits
    # may differ in the last bits; with a stream per sequence the cells land where stock puts them
    assert "logits bit-identical" in cases["paged/parallel-streams"]["detail"]


def test_a_tampered_placement_fails_the_gate_naming_the_case(applied: Path, cli) -> None:
    # The hook in llama-kv-cache.cpp (patch 0003) treats the sequence's own cells as free, so the
    # paged placement overwrites live KV cells. The block manager's vectors cannot see this: only
    # decoding a model can.
    source = applied / ".patchctl" / "trees" / "llama.cpp" / "src" / "llama-kv-cache.cpp"
    text = source.read_text()
    hook = "[&](uint32_t i) { return cells.is_empty(i); },"
    assert text.count(hook) == 1
    source.write_text(text.replace(hook, "[&](uint32_t i) { return cells.is_empty(i) || cells.seq_has(i, seq_id); },"))
    # Gate runs on pin + series only (issue 45): the tampering is committed and exported first.
    who = ["-c", "user.name=Dana", "-c", "user.email=dana@example.invalid"]
    message = "Free the sequence's own cells\n\nA placement that overwrites live KV cells."
    subprocess.run(["git", *who, "commit", "-qam", message], cwd=source.parents[1], check=True)
    assert cli("-C", applied, "export", "llama.cpp").exit_code == 0
    result = cli("-C", applied, "gate", "llama.cpp", "--json")
    assert result.exit_code == 1
    gates = {g["name"]: g for g in json.loads(result.stdout)["gates"]}
    assert gates["paged-blocks-bitexact"]["ok"] and not gates["model-gate"]["ok"]
    failed = [c for c in gates["model-gate"]["cases"] if not c["ok"]]
    assert failed and all(c["name"].startswith("paged/") for c in failed)
    assert "!= stock" in failed[0]["detail"] and "differs at token" in failed[0]["detail"]
    assert "gate model-gate of series llama.cpp failed: exit 1, first failing case paged/" in result.stderr


def test_engine_generate_cli_prints_llama_cpps_greedy_tokens(applied: Path, tmp_path: Path) -> None:
    # The same GGUF file and prompt through `python -m engine generate --model`: its greedy text is
    # the text of llama.cpp's tokens (issue 18: engine == llama.cpp on the same file and token ids).
    out = tmp_path / "gate"
    tree = applied / ".patchctl" / "trees" / "llama.cpp"
    gate = subprocess.run(
        [
            sys.executable,
            "-m",
            "engine",
            "model-gate",
            "--tree",
            str(tree),
            "--out",
            str(out),
            "--upstream-rev",
            REAL_PIN,
        ],
        capture_output=True,
        text=True,
    )
    assert gate.returncode == 0, gate.stdout + gate.stderr
    [single] = [c for c in CASES if c.name == "single"]
    [line] = [
        x for x in (out / "logits-stock" / "driver.out").read_text().splitlines() if x.startswith("TOKENS single ")
    ]
    llama_tokens = [int(t) for t in line.split()[3:]]
    assert len(llama_tokens) == single.n_predict
    model = out / "tiny-llama-spm.gguf"
    prompt = single.suffixes[0]
    generated = subprocess.run(
        [
            sys.executable,
            "-m",
            "engine",
            "generate",
            "--model",
            str(model),
            prompt,
            "--max-tokens",
            str(single.n_predict),
            "--ignore-eos",
            "--cache-type-k",
            "f32",
            "--cache-type-v",
            "f32",
        ],
        capture_output=True,
    )
    assert generated.returncode == 0, generated.stderr
    expected = prompt + load_tokenizer(model).decode(llama_tokens)
    assert generated.stdout.decode("utf-8", "surrogateescape").rstrip("\n") == expected


def test_llama_cpp_runs_the_f16_export(applied: Path, tmp_path: Path) -> None:
    # f16 weights load and decode in llama.cpp. They are not gated against the engine: llama.cpp
    # rounds activations to f16 for f16 matrix products, the engine computes in f32, and the logits
    # then differ by ~2e-3, as much as the smallest top-2 gap (docs/reference/gate.md, "The model gate").
    model = tmp_path / "tiny-f16.gguf"
    assert engine_main(["export-gguf", str(model), "--vocab", "llama-spm", "--type", "f16"]) == 0
    tree = applied / ".patchctl" / "trees" / "llama.cpp"
    built = build_targets(tree, ["llama", DRIVER], REAL_PIN, tmp_path / "build.log")
    write_cases(tmp_path / "cases.tsv", CASES)
    run = run_driver(built.build_dir / "bin" / DRIVER, model, tmp_path / "cases.tsv", tmp_path / "logits", False, 600)
    assert not run.failures
    for case in CASES:
        assert [len(ids) for ids in run.tokens[case.name]] == [case.n_predict] * len(case.suffixes)
        assert run.logits(case.name, 0, len(llama_spm_vocabulary().tokens)).shape == (case.n_predict, 392)
