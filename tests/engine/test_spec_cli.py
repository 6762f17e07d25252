"""Speculative decoding from the command line: generate, gate0's speculative checks, bench spec,
and one-line errors for bad combinations, truncated and incompatible draft files."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from engine.__main__ import main as engine_main
from engine.model.gguf import write_gguf
from engine.model.llama import LlamaModel, random_weights
from engine.runtime.spec_decode import rejection_sampler
from engine.runtime.spec_decode.draft_models import standalone_draft
from engine.tools.gate0 import Gate0Config, run_gate0

PROMPT = "the cat sat on the mat. the cat sat"
BASE = ["generate", PROMPT, "--max-tokens", "20", "--ignore-eos", "--cache-type-k", "f32", "--cache-type-v", "f32"]


def generate(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = engine_main(BASE + args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("method", ["ngram", "self", "draft"])
def test_generate_speculative_prints_the_same_text_and_the_acceptance(
    method: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, plain, _ = generate([], capsys)
    assert code == 0
    code, out, err = generate(["--speculative", method, "--num-speculative-tokens", "3"], capsys)
    assert code == 0 and out == plain
    assert f"speculative {method}, k=3:" in err and "draft tokens accepted" in err and err.count("\n") == 1


def test_generate_with_a_gguf_draft_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "draft.gguf"
    write_gguf(path, standalone_draft(LlamaModel.tiny()))
    _, plain, _ = generate([], capsys)
    code, out, err = generate(["--speculative", "draft", "--draft-model", str(path)], capsys)
    assert code == 0 and out == plain and "k=4" in err


def test_a_truncated_draft_model_is_rejected_before_use(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "draft.gguf"
    write_gguf(path, standalone_draft(LlamaModel.tiny()))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 1000])
    code, out, err = generate(["--speculative", "draft", "--draft-model", str(path)], capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("engine generate: error: ") and "truncated" in err
    assert str(path) in err


def test_a_draft_with_another_vocabulary_is_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tiny = LlamaModel.tiny()
    config = replace(tiny.config, vocab_size=40, num_layers=1)
    path = tmp_path / "other.gguf"
    write_gguf(path, LlamaModel(config, random_weights(config)))
    code, out, err = generate(["--speculative", "draft", "--draft-model", str(path)], capsys)
    assert code == 2 and out == ""
    assert err == "engine generate: error: the draft model's vocabulary has 40 tokens, the target's 98\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--speculative", "ngram", "--num-speculative-tokens", "0"], "num_speculative_tokens must be in [1, 32]"),
        (["--speculative", "ngram", "--num-speculative-tokens", "-3"], "got -3"),
        (["--num-speculative-tokens", "2"], "--num-speculative-tokens and --draft-model need --speculative"),
        (["--speculative", "medusa"], "unknown speculative method 'medusa'; valid methods: ngram, draft, self"),
        (["--speculative", "self", "--draft-layers", "2"], "fewer layers than the target's 2"),
        (["--speculative", "ngram", "--draft-model", "x.gguf"], "--draft-model is used only with --speculative draft"),
        (["--speculative", "ngram", "--prompt-lookup-min", "3", "--prompt-lookup-max", "2"], "prompt_lookup_min"),
    ],
)
def test_bad_speculative_settings_are_one_error_line(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = generate(args, capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("engine generate: error: ") and message in err


def test_gate0_speculative_checks_pass(capsys: pytest.CaptureFixture[str]) -> None:
    results = run_gate0(Gate0Config(max_batch=3, max_tokens=8, checks="speculative"))
    failed = [f"{r.name}: {r.detail}" for r in results if not r.passed]
    assert not failed, failed
    names = " | ".join(r.name for r in results)
    for method in ("ngram", "draft", "self"):
        for k in (1, 4):
            assert f"speculative {method} k={k}: greedy tokens == contiguous reference" in names
    assert "copy of the target" in names and "preemption" in names and "prefix caching" in names


def test_gate0_fails_when_verification_accepts_every_draft(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def accepts_everything(target_logits, draft_token_ids):  # type: ignore[no-untyped-def]
        return [*draft_token_ids, int(target_logits[-1].argmax())]

    monkeypatch.setattr(rejection_sampler.RejectionSampler, "_greedy", staticmethod(accepts_everything))
    assert engine_main(["gate0", "--checks", "speculative", "--max-batch", "2", "--max-tokens", "6"]) == 1
    out = capsys.readouterr().out
    assert "FAIL  speculative draft k=4: greedy tokens == contiguous reference" in out
    assert "PASS" not in out.split("copy of the target")[0].split("ngram k=1")[0]


def test_bench_spec_prints_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["bench", "spec", "--spec-ks", "1,2", "--spec-tokens", "8", "--spec-runs", "1"]
    assert engine_main(args) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "accept" in lines[1] and "tok/fwd" in lines[1] and "speed-up" in lines[1]
    rows = [line.split() for line in lines[2:]]
    assert [(r[0], r[1]) for r in rows] == [("none", "-")] + [
        (m, k) for m in ("ngram", "draft", "self") for k in ("1", "2")
    ]
    assert all(r[-1] == "yes" and r[-2].endswith("x") for r in rows)
    assert rows[0][4] == "1.00"  # non-speculative: one token per target pass


@pytest.mark.parametrize("value", ["1,x", "0,2"])
def test_bench_spec_rejects_bad_k_lists(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert engine_main(["bench", "spec", "--spec-ks", value]) == 2
    assert "--spec-ks" in capsys.readouterr().err
