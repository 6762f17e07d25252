"""The llama decoder against an independent formulation, and GGUF loading with validation."""

from __future__ import annotations

import struct
from pathlib import Path

import gguf
import numpy as np
import pytest
import torch

from engine.__main__ import main as engine_main
from engine.model.gguf import GGUFError, load_gguf, write_gguf
from engine.model.llama import TINY_CONFIG, LlamaConfig, LlamaModel, apply_rope, random_weights
from engine.runtime.llm_engine import EngineConfig, LLMEngine
from engine.runtime.sampling import SamplingParams


def independent_forward(model: LlamaModel, ids: torch.Tensor) -> torch.Tensor:
    """Causal llama written differently: RoPE as complex rotation, GQA by repeating KV heads."""
    c, w = model.config, model.weights
    n = ids.shape[0]
    x = w["token_embd.weight"][ids].double()

    def norm(t: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return t / torch.sqrt((t * t).mean(-1, keepdim=True) + c.rms_eps) * weight.double()

    freqs = torch.tensor([c.rope_theta ** (-2.0 * i / c.head_dim) for i in range(c.head_dim // 2)], dtype=torch.float64)
    rot = torch.polar(
        torch.ones(n, c.head_dim // 2, dtype=torch.float64), torch.arange(n, dtype=torch.float64)[:, None] * freqs
    )

    def rope(t: torch.Tensor) -> torch.Tensor:
        as_complex = torch.view_as_complex(t.reshape(n, t.shape[1], -1, 2).contiguous())
        return torch.view_as_real(as_complex * rot[:, None, :]).reshape(t.shape)

    for i in range(c.num_layers):
        h = norm(x, w[f"blk.{i}.attn_norm.weight"])
        q = rope((h @ w[f"blk.{i}.attn_q.weight"].double().T).view(n, c.num_heads, c.head_dim))
        k = rope((h @ w[f"blk.{i}.attn_k.weight"].double().T).view(n, c.num_kv_heads, c.head_dim))
        v = (h @ w[f"blk.{i}.attn_v.weight"].double().T).view(n, c.num_kv_heads, c.head_dim)
        rep = c.num_heads // c.num_kv_heads
        k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
        scores = torch.einsum("qhd,khd->hqk", q, k) / c.head_dim**0.5
        scores = scores + torch.full((n, n), float("-inf"), dtype=torch.float64).triu(1)
        attn = torch.einsum("hqk,khd->qhd", scores.softmax(-1), v).reshape(n, -1)
        x = x + attn @ w[f"blk.{i}.attn_output.weight"].double().T
        h = norm(x, w[f"blk.{i}.ffn_norm.weight"])
        a, b = h @ w[f"blk.{i}.ffn_gate.weight"].double().T, h @ w[f"blk.{i}.ffn_up.weight"].double().T
        x = x + (a * torch.sigmoid(a) * b) @ w[f"blk.{i}.ffn_down.weight"].double().T
    return norm(x, w["output_norm.weight"]) @ w["output.weight"].double().T


def plain_attend(config: LlamaConfig):  # type: ignore[no-untyped-def]
    def attend(layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        rep = config.num_heads // config.num_kv_heads
        scores = torch.einsum("qhd,khd->hqk", q, k.repeat_interleave(rep, 1)) * config.head_dim**-0.5
        scores = scores.masked_fill(torch.ones_like(scores[0], dtype=torch.bool).triu(1), float("-inf"))
        return torch.einsum("hqk,khd->qhd", scores.softmax(-1), v.repeat_interleave(rep, 1))

    return attend


def test_model_matches_an_independent_llama() -> None:
    model = LlamaModel.tiny()
    ids = torch.tensor([0, 40, 41, 3, 77, 90, 12, 5, 60])
    ours = model.logits(model.forward(ids, torch.arange(len(ids)), plain_attend(model.config)))
    torch.testing.assert_close(ours.double(), independent_forward(model, ids), rtol=1e-4, atol=1e-4)


def test_rope_depends_only_on_relative_position() -> None:
    q, k = torch.randn(1, 1, 32), torch.randn(1, 1, 32)
    dots = [
        float((apply_rope(q, torch.tensor([m]), 10000.0) * apply_rope(k, torch.tensor([m - 3]), 10000.0)).sum())
        for m in (3, 10, 50)
    ]
    assert dots[0] == pytest.approx(dots[1], rel=1e-5) == pytest.approx(dots[2], rel=1e-5)
    assert torch.equal(apply_rope(q, torch.tensor([0]), 10000.0), q)


def test_tiny_model_is_seeded_and_deterministic() -> None:
    a, b, other = LlamaModel.tiny(), LlamaModel.tiny(), LlamaModel.tiny(seed=99)
    assert all(torch.equal(a.weights[n], b.weights[n]) for n in a.weights)
    assert not torch.equal(a.weights["output.weight"], other.weights["output.weight"])
    assert a.config == TINY_CONFIG and a.tokens is not None and len(a.tokens) == TINY_CONFIG.vocab_size


def test_gguf_round_trip_keeps_weights_config_and_tokens(tmp_path: Path) -> None:
    model = LlamaModel.tiny()
    path = tmp_path / "tiny.gguf"
    write_gguf(path, model)
    assert [p.name for p in tmp_path.iterdir()] == ["tiny.gguf"], "the temp file was left behind"
    loaded = load_gguf(path)
    assert loaded.config == model.config and loaded.tokens == model.tokens
    assert all(torch.equal(loaded.weights[n], model.weights[n]) for n in model.weights)
    params = SamplingParams(max_tokens=6, ignore_eos=True)
    cfg = EngineConfig(block_size=4, num_blocks=32)
    assert (
        LLMEngine(loaded, cfg).generate(["hi"], params)[0].token_ids
        == LLMEngine(model, cfg).generate(["hi"], params)[0].token_ids
    )


def small_model() -> LlamaModel:
    config = LlamaConfig(
        vocab_size=98, hidden_size=32, intermediate_size=48, num_layers=1, num_heads=2, num_kv_heads=1, head_dim=16
    )
    return LlamaModel(config, random_weights(config, seed=3))


def test_truncated_file_with_intact_header_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "model.gguf"
    write_gguf(path, small_model())
    data = path.read_bytes()
    reader = gguf.GGUFReader(path)
    data_start = min(t.data_offset for t in reader.tensors)
    del reader
    for cut in (len(data) - 1, data_start + 10):
        truncated = tmp_path / f"cut{cut}.gguf"
        truncated.write_bytes(data[:cut])
        with pytest.raises(GGUFError, match=r"needs bytes \d+\.\.\d+ but the file ends at \d+: the file is truncated"):
            load_gguf(truncated)


def test_header_damage_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "model.gguf"
    write_gguf(path, small_model())
    data = path.read_bytes()
    cases = {
        "magic.gguf": (b"GGML" + data[4:], r"not a GGUF file"),
        "version.gguf": (data[:4] + struct.pack("<I", 99) + data[8:], r"GGUF version 99 is not supported"),
        "header.gguf": (data[:40], r"damaged GGUF metadata|truncated"),
        "empty.gguf": (b"", r"not a GGUF file"),
    }
    for name, (content, message) in cases.items():
        (tmp_path / name).write_bytes(content)
        with pytest.raises(GGUFError, match=message):
            load_gguf(tmp_path / name)
    with pytest.raises(GGUFError, match="no such file"):
        load_gguf(tmp_path / "absent.gguf")


def write_custom(path: Path, config: LlamaConfig, tensors: dict[str, np.ndarray], arch: str = "llama") -> None:
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_block_count(config.num_layers)
    writer.add_context_length(config.max_position)
    writer.add_embedding_length(config.hidden_size)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.num_heads)
    writer.add_head_count_kv(config.num_kv_heads)
    writer.add_layer_norm_rms_eps(config.rms_eps)
    for name, array in tensors.items():
        writer.add_tensor(name, array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def test_missing_and_misshapen_tensors_are_rejected(tmp_path: Path) -> None:
    model = small_model()
    arrays = {n: w.numpy() for n, w in model.weights.items()}
    missing = dict(arrays)
    del missing["blk.0.ffn_up.weight"]
    write_custom(tmp_path / "missing.gguf", model.config, missing)
    with pytest.raises(GGUFError, match="missing tensor blk.0.ffn_up.weight"):
        load_gguf(tmp_path / "missing.gguf")
    wrong = dict(arrays)
    wrong["blk.0.attn_q.weight"] = np.zeros((16, 32), dtype=np.float32)
    write_custom(tmp_path / "wrong.gguf", model.config, wrong)
    with pytest.raises(
        GGUFError, match=r"tensor blk.0.attn_q.weight has shape \(16, 32\), the config needs \(32, 32\)"
    ):
        load_gguf(tmp_path / "wrong.gguf")
    write_custom(tmp_path / "arch.gguf", model.config, arrays, arch="gpt2")
    with pytest.raises(GGUFError, match="architecture 'gpt2' is not supported"):
        load_gguf(tmp_path / "arch.gguf")


def test_quantized_weights_load_through_gguf_dequantize(tmp_path: Path) -> None:
    model = small_model()
    arrays = {n: w.numpy() for n, w in model.weights.items()}
    q8 = gguf.quants.quantize(arrays["blk.0.ffn_gate.weight"], gguf.GGMLQuantizationType.Q8_0)
    path = tmp_path / "q8.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    c = model.config
    for add, value in (
        (writer.add_block_count, c.num_layers),
        (writer.add_context_length, c.max_position),
        (writer.add_embedding_length, c.hidden_size),
        (writer.add_feed_forward_length, c.intermediate_size),
        (writer.add_head_count, c.num_heads),
        (writer.add_head_count_kv, c.num_kv_heads),
    ):
        add(value)
    writer.add_layer_norm_rms_eps(c.rms_eps)
    for name, array in arrays.items():
        if name == "blk.0.ffn_gate.weight":
            writer.add_tensor(name, q8, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            writer.add_tensor(name, array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    loaded = load_gguf(path)
    expected = gguf.quants.dequantize(q8, gguf.GGMLQuantizationType.Q8_0)
    assert np.array_equal(loaded.weights["blk.0.ffn_gate.weight"].numpy(), expected)


def test_generate_cli_reports_a_truncated_model_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "model.gguf"
    write_gguf(path, small_model())
    path.write_bytes(path.read_bytes()[:-100])
    assert engine_main(["generate", "--model", str(path), "hi"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("engine generate: error: ") and "truncated" in err


def test_generate_cli_runs_a_gguf_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "tiny.gguf"
    write_gguf(path, LlamaModel.tiny())
    assert engine_main(["generate", "--model", str(path), "--max-tokens", "8", "--ignore-eos", "Hello"]) == 0
    out = capsys.readouterr().out
    expected = LLMEngine().generate(["Hello"], SamplingParams(max_tokens=8, ignore_eos=True))[0].text
    assert out == f"Hello{expected}\n"
