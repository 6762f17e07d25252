"""LLMEngine end to end: continuous batching, chunked prefill, preemption, prefix reuse,
sampling, quantized KV, and the Triton kernels wired in (interpreted)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

import pytest
import torch

from engine.__main__ import main as engine_main
from engine.model.llama import LlamaModel
from engine.model.reference import contiguous_greedy
from engine.runtime.llm_engine import EngineConfig, LLMEngine, RequestOutput
from engine.runtime.sampling import SamplingParams
from engine.tools.generate import DEFAULT_PROMPT

MODEL = LlamaModel.tiny()
PROMPTS = ["Paged attention", "x", "The quick brown fox jumps over", "0123456789abcdef!"]
GREEDY = SamplingParams(max_tokens=10, ignore_eos=True)


def exact_engine(**overrides: object) -> LLMEngine:
    config = dict(
        block_size=4,
        num_blocks=128,
        cache_type_k="f32",
        cache_type_v="f32",
        attention_backend="torch",
        flash_attn="enabled",
    )
    config.update(overrides)
    return LLMEngine(MODEL, EngineConfig(**config))  # type: ignore[arg-type]


@cache
def reference_tokens(prompt_token_ids: tuple[int, ...], max_tokens: int) -> list[int]:
    return contiguous_greedy(MODEL, [list(prompt_token_ids)], max_tokens).token_ids[0]


def assert_matches_reference(outputs: Sequence[RequestOutput], max_tokens: int = 10) -> None:
    for output in outputs:
        expected = reference_tokens(tuple(output.prompt_token_ids), max_tokens)
        assert output.token_ids == expected, f"{output.request_id} diverged from the contiguous reference"


def test_batched_greedy_generation_matches_the_contiguous_reference() -> None:
    engine = exact_engine(block_shuffle_seed=1)
    outputs = engine.generate(PROMPTS, GREEDY)
    assert [o.finish_reason for o in outputs] == ["length"] * 4
    assert all(len(o.token_ids) == 10 and o.text for o in outputs)
    assert_matches_reference(outputs)


def test_chunked_prefill_mixes_with_decode_under_the_token_budget() -> None:
    engine = exact_engine(max_num_batched_tokens=6)
    outputs = engine.generate(PROMPTS, GREEDY)
    stats = engine.stats
    assert stats.max_step_tokens <= 6
    assert stats.chunked_prefills > 0 and stats.mixed_steps > 0
    assert_matches_reference(outputs)


def test_preemption_by_recompute_when_blocks_run_out() -> None:
    # 4 requests of up to ~41 tokens need 11 blocks each; 14 usable blocks force preemption
    engine = exact_engine(num_blocks=15)
    outputs = engine.generate(PROMPTS, GREEDY)
    assert engine.stats.preemptions > 0
    assert sum(o.num_preemptions for o in outputs) == engine.stats.preemptions
    assert_matches_reference(outputs)
    assert engine.kv_manager.get_num_free_blocks() == 14, "blocks leaked"


def test_prefix_cache_is_reused_across_requests() -> None:
    engine = exact_engine()
    prefix = "A shared system prompt that spans blocks. "
    first = engine.generate([prefix + "one"], GREEDY)
    later = engine.generate([prefix + "two", prefix + "three"], GREEDY)
    assert first[0].num_cached_tokens == 0
    assert all(o.num_cached_tokens >= 40 for o in later)
    assert engine.stats.prefix_hit_tokens >= 80
    assert_matches_reference(first + later)
    no_cache = exact_engine(enable_prefix_caching=False).generate([prefix + "two"], GREEDY)
    assert no_cache[0].num_cached_tokens == 0 and no_cache[0].token_ids == later[0].token_ids


def test_seeded_sampling_is_reproducible_and_batch_independent() -> None:
    params = SamplingParams(max_tokens=12, temperature=0.9, top_k=40, top_p=0.95, seed=7, ignore_eos=True)
    alone = exact_engine().generate(["sample me"], params)[0].token_ids
    batched = exact_engine().generate(["other", "sample me", "x"], [GREEDY, params, GREEDY])[1].token_ids
    other_seed = (
        exact_engine()
        .generate(["sample me"], SamplingParams(max_tokens=12, temperature=0.9, seed=8, ignore_eos=True))[0]
        .token_ids
    )
    assert alone == batched
    assert alone != other_seed
    assert len(set(alone)) > 1


@pytest.mark.parametrize("kv_type", ["q8_0", "q4_1", "bf16"])
def test_quantized_kv_cache_serves_close_to_f32(kv_type: str) -> None:
    exact = exact_engine(record_logits=True).generate(PROMPTS[:2], GREEDY)
    quantized = exact_engine(cache_type_k=kv_type, cache_type_v=kv_type, record_logits=True).generate(
        PROMPTS[:2], GREEDY
    )
    tolerance = {"q8_0": 0.1, "q4_1": 1.0, "bf16": 0.1}[kv_type]
    first_step = max(float((e.logits[0] - q.logits[0]).abs().max()) for e, q in zip(exact, quantized))
    assert 0 < first_step <= tolerance


def test_triton_kernels_serve_the_engine_in_interpreter_mode() -> None:
    params = SamplingParams(max_tokens=3, ignore_eos=True)
    prompts = ["Hi there", "abc"]
    triton_out = exact_engine(
        attention_backend="triton",
        cache_type_k="q8_0",
        cache_type_v="q8_0",
        record_logits=True,
        max_num_batched_tokens=5,
    ).generate(prompts, params)
    torch_out = exact_engine(
        cache_type_k="q8_0", cache_type_v="q8_0", record_logits=True, max_num_batched_tokens=5
    ).generate(prompts, params)
    for a, b in zip(triton_out, torch_out):
        assert a.token_ids == b.token_ids
        for x, y in zip(a.logits, b.logits):
            torch.testing.assert_close(x, y, rtol=1e-4, atol=1e-4)


def test_non_flash_path_matches_the_reference() -> None:
    engine = exact_engine(flash_attn="disabled", cache_type_k="q8_0", record_logits=True)
    outputs = engine.generate(PROMPTS[:2], GREEDY)
    assert not engine.plan.flash_attn
    flash = exact_engine(cache_type_k="q8_0", record_logits=True).generate(PROMPTS[:2], GREEDY)
    for a, b in zip(outputs, flash):
        torch.testing.assert_close(a.logits[0], b.logits[0], rtol=1e-4, atol=1e-4)
    assert_matches_reference(exact_engine(flash_attn="disabled").generate(PROMPTS[:2], GREEDY))


def test_eos_stops_a_request_unless_ignored() -> None:
    eos_model = LlamaModel.tiny()
    eos_model.weights["output.weight"][1] = 50.0 * eos_model.weights["output.weight"][1].sign()  # EOS (id 1) wins often
    config = EngineConfig(block_size=4, num_blocks=64)
    stopped = LLMEngine(eos_model, config).generate(["hello"], SamplingParams(max_tokens=8))[0]
    kept = LLMEngine(eos_model, config).generate(["hello"], SamplingParams(max_tokens=8, ignore_eos=True))[0]
    assert stopped.finish_reason == "stop" and stopped.token_ids[-1] == 1 and len(stopped.token_ids) < 8
    assert kept.finish_reason == "length" and len(kept.token_ids) == 8


def test_progress_reports_until_every_token_is_generated() -> None:
    seen: list[tuple[int, int]] = []
    exact_engine().generate(PROMPTS[:2], GREEDY, progress=lambda done, total: seen.append((done, total)))
    assert seen[-1] == (20, 20) and all(a[0] <= b[0] for a, b in zip(seen, seen[1:]))


def test_impossible_requests_are_refused_up_front() -> None:
    engine = exact_engine(num_blocks=8)
    with pytest.raises(ValueError, match="needs more than the cache's 7 blocks"):
        engine.add_request("x" * 40, GREEDY)
    with pytest.raises(ValueError, match=r"in \[0, 98\)"):
        engine.add_request([0, 500], GREEDY)
    with pytest.raises(ValueError, match="max_tokens must be >= 1"):
        SamplingParams(max_tokens=0)


def test_generate_cli_produces_text_from_the_embedded_model(capsys: pytest.CaptureFixture[str]) -> None:
    assert engine_main(["generate", "--max-tokens", "12", "--ignore-eos"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(DEFAULT_PROMPT) and len(out.rstrip("\n")) > len(DEFAULT_PROMPT)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--cache-type-k", "q3_0"], "valid types: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1"),
        (["--flash-attn", "maybe"], "valid modes: auto, enabled, disabled"),
        (["--cache-type-v", "q8_0", "--flash-attn", "disabled"], "requires flash attention"),
        (["--temperature", "-1"], "argument --temperature: must be a finite number >= 0.0, got -1"),
    ],
)
def test_generate_cli_rejects_bad_settings_in_one_line(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert engine_main(["generate", *args, "hi"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err
