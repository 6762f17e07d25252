"""The flash-attention rules of llama.cpp, through the API, the environment and the engine."""

from __future__ import annotations

import logging

import pytest

from engine.attention.policy import (
    AttentionConfigError,
    FlashAttnSupport,
    flash_attention_support,
    requested_flash_attn_mode,
    resolve_attention,
)
from engine.model.llama import LlamaConfig, LlamaModel, random_weights
from engine.runtime.llm_engine import EngineConfig, LLMEngine
from engine.runtime.sampling import SamplingParams

SUPPORTED = FlashAttnSupport(True)
UNSUPPORTED = FlashAttnSupport(False, "head_dim 96 is not a power of two between 16 and 256, the paged kernels' tile")


def test_auto_uses_flash_where_supported() -> None:
    plan = resolve_attention("auto", "q8_0", "q8_0", SUPPORTED)
    assert (plan.flash_attn, plan.k_format.name, plan.v_format.name, plan.warning) == (True, "q8_0", "q8_0", None)


def test_auto_without_support_falls_back_to_f16_kv_with_a_warning() -> None:
    plan = resolve_attention("auto", "q4_0", "q8_0", UNSUPPORTED)
    assert (plan.flash_attn, plan.k_format.name, plan.v_format.name) == (False, "f16", "f16")
    assert plan.warning is not None and "head_dim 96" in plan.warning and "q8_0" in plan.warning


def test_auto_without_support_keeps_a_float_v_cache_and_quantized_k() -> None:
    plan = resolve_attention("auto", "q8_0", "f16", UNSUPPORTED)
    assert (plan.flash_attn, plan.k_format.name, plan.v_format.name, plan.warning) == (False, "q8_0", "f16", None)


def test_enabled_without_support_names_the_cause() -> None:
    with pytest.raises(AttentionConfigError, match=r"flash attention is enabled but not supported here: head_dim 96"):
        resolve_attention("enabled", "f16", "f16", UNSUPPORTED)


def test_disabled_with_a_quantized_v_cache_names_the_cause() -> None:
    with pytest.raises(AttentionConfigError, match=r"quantized V cache \(q5_1\) requires flash attention"):
        resolve_attention("disabled", "f16", "q5_1", SUPPORTED)
    plan = resolve_attention("disabled", "q8_0", "bf16", SUPPORTED)
    assert (plan.flash_attn, plan.k_format.name, plan.v_format.name) == (False, "q8_0", "bf16")


@pytest.mark.parametrize("mode", ["on", "Auto", "", "true"])
def test_unknown_modes_list_the_valid_ones(mode: str) -> None:
    with pytest.raises(AttentionConfigError, match=r"valid modes: auto, enabled, disabled"):
        resolve_attention(mode, "f16", "f16", SUPPORTED)


def test_unknown_kv_types_list_the_valid_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown KV cache type 'q8'; valid types: f32, f16, bf16, q8_0"):
        resolve_attention("auto", "f16", "q8", SUPPORTED)
    with pytest.raises(ValueError, match=r"unknown KV cache type 'fp16'"):
        resolve_attention("disabled", "fp16", "f16", SUPPORTED)


def test_mode_comes_from_the_api_then_the_environment_then_auto() -> None:
    assert requested_flash_attn_mode(None, {}) == "auto"
    assert requested_flash_attn_mode(None, {"FLASH_ATTN": "disabled"}) == "disabled"
    assert requested_flash_attn_mode("enabled", {"FLASH_ATTN": "disabled"}) == "enabled"
    with pytest.raises(AttentionConfigError, match=r"FLASH_ATTN: unknown flash attention mode 'yes'"):
        requested_flash_attn_mode(None, {"FLASH_ATTN": "yes"})


def test_support_depends_on_head_dim_and_backend() -> None:
    assert flash_attention_support(32, "torch").supported
    assert not flash_attention_support(96, "torch").supported
    assert not flash_attention_support(8, "torch").supported
    no_interpreter = flash_attention_support(64, "triton", "cpu", environ={})
    assert not no_interpreter.supported and "TRITON_INTERPRET=1" in no_interpreter.reason
    assert flash_attention_support(64, "triton", "cpu", environ={"TRITON_INTERPRET": "1"}).supported
    with pytest.raises(AttentionConfigError, match="valid backends: triton, torch"):
        flash_attention_support(64, "cuda-graphs")


def odd_head_model() -> LlamaModel:
    """head_dim 96: valid for the model and for ggml blocks, not for the paged kernels."""
    config = LlamaConfig(
        vocab_size=98, hidden_size=64, intermediate_size=64, num_layers=1, num_heads=2, num_kv_heads=1, head_dim=96
    )
    return LlamaModel(config, random_weights(config, seed=5))


def test_engine_falls_back_once_and_keeps_serving(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FLASH_ATTN", raising=False)
    with caplog.at_level(logging.WARNING, logger="engine"):
        engine = LLMEngine(
            odd_head_model(), EngineConfig(cache_type_k="q8_0", cache_type_v="q8_0", block_size=4, num_blocks=32)
        )
        outputs = engine.generate(["abc", "hello"], SamplingParams(max_tokens=5, ignore_eos=True))
    assert [len(o.token_ids) for o in outputs] == [5, 5]
    assert (engine.plan.flash_attn, engine.plan.k_format.name, engine.plan.v_format.name) == (False, "f16", "f16")
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "falls back to f16" in warnings[0].getMessage()


def test_engine_reads_flash_attn_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLASH_ATTN", "enabled")
    with pytest.raises(AttentionConfigError, match="not supported here: head_dim 96"):
        LLMEngine(odd_head_model(), EngineConfig(block_size=4, num_blocks=32))
    monkeypatch.setenv("FLASH_ATTN", "disabled")
    engine = LLMEngine(LlamaModel.tiny(), EngineConfig(block_size=4, num_blocks=64))
    assert not engine.plan.flash_attn
    with pytest.raises(AttentionConfigError, match=r"quantized V cache \(q4_0\) requires flash attention"):
        LLMEngine(LlamaModel.tiny(), EngineConfig(cache_type_v="q4_0", block_size=4, num_blocks=64))
