"""`python -m engine export-gguf`: the tiny model as a GGUF file that the engine and llama.cpp load.

llama.cpp itself loading and running the file is proven in the slow tier by the model gate
(tests/engine/test_model_gate.py); here: the file round-trips through the engine's loader, its
tokenizer metadata is what llama.cpp reads, and bad input is one line with exit 2.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import gguf
import pytest
import torch

from engine.__main__ import main as engine_main
from engine.model.gguf import load_gguf, write_gguf
from engine.model.gguf_tokenizer import SPACE_ESCAPE, load_tokenizer, read_metadata, read_vocabulary
from engine.model.gguf_vocab import BYTE, CONTROL, UNKNOWN, llama_spm_vocabulary, tiny_model_for
from engine.model.llama import TINY_CONFIG, LlamaModel


def export(tmp_path: Path, *args: str, name: str = "out.gguf") -> Path:
    out = tmp_path / name
    assert engine_main(["export-gguf", str(out), *args]) == 0
    return out


def test_llama_spm_vocabulary_layout() -> None:
    vocab = llama_spm_vocabulary()
    assert vocab.tokens[:3] == ["<unk>", "<s>", "</s>"]
    assert vocab.token_types[:3] == [UNKNOWN, CONTROL, CONTROL]
    assert vocab.tokens[3:259] == [f"<0x{b:02X}>" for b in range(256)]
    assert set(vocab.token_types[3:259]) == {BYTE}
    assert SPACE_ESCAPE in vocab.tokens and all(chr(c) in vocab.tokens for c in range(0x21, 0x7F))
    assert len(set(vocab.tokens)) == len(vocab.tokens) == len(vocab.scores) == len(vocab.token_types)
    # merged pieces score below zero, in priority order
    merged = [s for t, s in zip(vocab.tokens, vocab.scores) if len(t) > 1 and not t.startswith("<")]
    assert merged == sorted(merged, reverse=True) and max(merged) < 0


def test_spm_export_round_trips_through_the_loader(tmp_path: Path) -> None:
    out = export(tmp_path, "--vocab", "llama-spm")
    vocab = llama_spm_vocabulary()
    expected = tiny_model_for(vocab)
    loaded = load_gguf(out)
    assert loaded.config == expected.config
    assert loaded.config.vocab_size == len(vocab.tokens) != TINY_CONFIG.vocab_size
    assert loaded.tokens == tuple(vocab.tokens)
    for name, weight in expected.weights.items():
        assert torch.equal(loaded.weights[name], weight), name
    # the whole vocabulary survives, as llama.cpp's loader reads it
    assert read_vocabulary(out) == replace(vocab, general_name="engine tiny llama")
    metadata = read_metadata(out)
    assert metadata["general.architecture"] == "llama"
    assert metadata["llama.rope.dimension_count"] == TINY_CONFIG.head_dim
    assert metadata["llama.context_length"] == TINY_CONFIG.max_position
    assert metadata["tokenizer.ggml.unknown_token_id"] == 0
    assert metadata["general.file_type"] == int(gguf.LlamaFileType.ALL_F32)
    tokenizer = load_tokenizer(out)
    ids = tokenizer.encode("the cat sat on the mat")
    assert ids[0] == 1 and vocab.tokens.index(f"{SPACE_ESCAPE}the") in ids
    assert tokenizer.decode(ids, remove_special=True).lstrip() == "the cat sat on the mat"
    # a character outside printable ASCII falls back to its UTF-8 bytes
    assert tokenizer.encode("é", add_special=False) == [vocab.tokens.index(SPACE_ESCAPE), 3 + 0xC3, 3 + 0xA9]


def test_export_is_deterministic(tmp_path: Path) -> None:
    first = export(tmp_path, "--vocab", "llama-spm", name="a.gguf")
    second = export(tmp_path, "--vocab", "llama-spm", name="b.gguf")
    other_seed = export(tmp_path, "--vocab", "llama-spm", "--seed", "7", name="c.gguf")
    assert first.read_bytes() == second.read_bytes() != other_seed.read_bytes()


def test_default_export_is_the_embedded_model(tmp_path: Path) -> None:
    loaded = load_gguf(export(tmp_path))
    tiny = LlamaModel.tiny()
    assert loaded.config == tiny.config and loaded.tokens == tiny.tokens
    assert all(torch.equal(loaded.weights[n], w) for n, w in tiny.weights.items())
    assert read_metadata(tmp_path / "out.gguf")["tokenizer.ggml.model"] == "engine-chars"


def test_f16_export_and_re_export_of_a_loaded_model(tmp_path: Path) -> None:
    source = export(tmp_path, "--vocab", "llama-spm", name="src.gguf")
    half = export(tmp_path, "--model", str(source), "--type", "f16", name="half.gguf")
    reader = gguf.GGUFReader(half)
    types = {t.name: t.tensor_type for t in reader.tensors}
    assert types["blk.0.attn_q.weight"] == gguf.GGMLQuantizationType.F16
    assert types["blk.0.attn_norm.weight"] == gguf.GGMLQuantizationType.F32
    assert read_vocabulary(half) == read_vocabulary(source)
    original, loaded = load_gguf(source), load_gguf(half)
    for name, weight in original.weights.items():
        expected = weight.half().float() if weight.dim() == 2 else weight
        assert torch.equal(loaded.weights[name], expected), name
    assert half.stat().st_size < source.stat().st_size


def test_write_refuses_a_vocabulary_of_another_size(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="the vocabulary has 392 tokens, the model 98"):
        write_gguf(tmp_path / "x.gguf", LlamaModel.tiny(), llama_spm_vocabulary())
    assert list(tmp_path.iterdir()) == []  # nothing half-written


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--model", "missing.gguf"], "missing.gguf: no such file"),
        (["--vocab", "llama-spm", "--model", "{src}"], "--model keeps the file's own vocabulary"),
        (["--type", "q4_0"], "invalid choice: 'q4_0'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    source = export(tmp_path, name="src.gguf")
    capsys.readouterr()
    args = [a.replace("{src}", str(source)) for a in args]
    assert engine_main(["export-gguf", str(tmp_path / "out.gguf"), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "out.gguf").exists()


def test_missing_output_directory_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert engine_main(["export-gguf", str(tmp_path / "no" / "x.gguf")]) == 2
    assert capsys.readouterr().err == f"engine export-gguf: error: no such directory: {tmp_path / 'no'}\n"
