"""Hostile model files and arguments for `python -m engine`: one error line, a documented exit
code, never a traceback, never a model computed from garbage."""

from __future__ import annotations

import dataclasses
import re
import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import gguf
import numpy as np
import pytest
import torch

from engine.__main__ import main as engine_main
from engine.core import limits
from engine.core.block_pool import BlockPool
from engine.core.limits import InsufficientMemory
from engine.kv.storage import KVCacheStorage, kv_cache_bytes
from engine.model.gguf import GGUFError, load_gguf, write_gguf
from engine.model.gguf_tokenizer import TokenizerError, read_metadata
from engine.model.llama import HyperparameterError
from engine.runtime.llm_engine import EngineConfig, LLMEngine
from engine.runtime.model_runner import NonFiniteLogits
from engine.runtime.sampling import SamplingParams, sample, sampling_probs

from .hostile_gguf import (
    DEEP_NESTING,
    GGUFTally,
    kv_entry,
    nested_array_entry,
    run_gguf_cases,
    string_payload,
    value_position,
    with_metadata,
    with_value,
)
from .test_model_gguf import small_model, write_custom


def valid_file(tmp_path: Path) -> tuple[Path, bytes]:
    path = tmp_path / "model.gguf"
    write_gguf(path, small_model())
    return path, path.read_bytes()


def tensor_offset_position(data: bytes, name: str) -> int:
    """Where the data offset of tensor NAME sits in the tensor-info section (name, dims, type, offset)."""
    encoded = name.encode()
    start = data.index(struct.pack("<Q", len(encoded)) + encoded) + 8 + len(encoded)
    n_dims = struct.unpack_from("<I", data, start)[0]
    return start + 4 + 8 * n_dims + 4


def test_a_misaligned_tensor_offset_is_refused(tmp_path: Path) -> None:
    path, data = valid_file(tmp_path)
    at = tensor_offset_position(data, "output_norm.weight")
    offset = struct.unpack_from("<Q", data, at)[0]
    damaged = bytearray(data)
    struct.pack_into("<Q", damaged, at, offset + 4)  # still inside the file: only alignment gives it away
    path.write_bytes(bytes(damaged))
    with pytest.raises(GGUFError, match=r"tensor output_norm.weight data offset \d+ is not a multiple of .*32"):
        load_gguf(path)


def test_a_tensor_reading_another_tensors_bytes_is_refused(tmp_path: Path) -> None:
    path, data = valid_file(tmp_path)
    damaged = bytearray(data)
    struct.pack_into("<Q", damaged, tensor_offset_position(data, "output_norm.weight"), 0)  # token_embd's bytes
    path.write_bytes(bytes(damaged))
    with pytest.raises(GGUFError, match=r"tensor output_norm.weight data offset 0, expected \d+ .tensors overlap"):
        load_gguf(path)


def test_a_tensor_type_without_a_dequantizer_is_refused(tmp_path: Path) -> None:
    # Found by the fuzz run: the last tensor's type set to Q8_1 keeps the layout valid, and gguf-py
    # raised NotImplementedError from its dequantizer.
    path, data = valid_file(tmp_path)
    damaged = bytearray(data)
    struct.pack_into("<I", damaged, tensor_offset_position(data, "output.weight") - 4, gguf.GGMLQuantizationType.Q8_1)
    path.write_bytes(bytes(damaged))
    with pytest.raises(GGUFError, match="tensor output.weight is Q8_1, a type this loader cannot read"):
        load_gguf(path)


def test_seeded_hostile_files_are_loaded_or_refused_never_a_traceback(tmp_path: Path) -> None:
    tally = run_gguf_cases(tmp_path, 200, seed=11, tally=GGUFTally())
    assert tally.cases == 200
    assert tally.ok, tally.summary() + "\n" + "\n".join(tally.examples)
    refused = sum(n for outcome, n in tally.outcomes.items() if outcome.endswith(":refused"))
    assert refused > 150  # the generator reaches the checks, not only harmless bytes


def test_a_tensor_the_model_does_not_use_is_refused(tmp_path: Path) -> None:
    model = small_model()
    arrays = {n: w.numpy() for n, w in model.weights.items()}
    arrays["rope_freqs.weight"] = np.ones(8, dtype=np.float32)
    write_custom(tmp_path / "extra.gguf", model.config, arrays)
    with pytest.raises(GGUFError, match="tensor.s. this llama model does not use: rope_freqs.weight"):
        load_gguf(tmp_path / "extra.gguf")


def test_a_float_where_an_integer_belongs_is_refused(tmp_path: Path) -> None:
    model = small_model()
    c = model.config
    path = tmp_path / "float.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_float32("llama.block_count", float(c.num_layers))  # 1.0 layers
    writer.add_context_length(c.max_position)
    writer.add_embedding_length(c.hidden_size)
    writer.add_feed_forward_length(c.intermediate_size)
    writer.add_head_count(c.num_heads)
    writer.add_head_count_kv(c.num_kv_heads)
    writer.add_layer_norm_rms_eps(c.rms_eps)
    for name, weight in model.weights.items():
        writer.add_tensor(name, weight.numpy())
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(GGUFError, match="metadata key llama.block_count holds FLOAT32, expected an integer"):
        load_gguf(path)


@pytest.mark.parametrize(
    "key, value, message",
    [
        # Found by the fuzz run: 2**31 - 1 layers made the loader list 19 billion tensor names (24 GB, OOM kill).
        ("llama.block_count", 2**31 - 1, r"llama.block_count is 2147483647; it must be in \[1, 1024\]"),
        # in range, but more layers than the file has tensors for
        ("llama.block_count", 50, "llama.block_count is 50 but the file holds only 12 tensors"),
        ("llama.attention.value_length", 8, "llama.attention.value_length is 8; only 16 .the head size."),
    ],
)
def test_hostile_hyperparameters_are_refused(tmp_path: Path, key: str, value: int, message: str) -> None:
    path, data = valid_file(tmp_path)
    damaged = bytearray(data)
    struct.pack_into("<I", damaged, value_position(data, key), value)
    path.write_bytes(bytes(damaged))
    with pytest.raises(GGUFError, match=message):
        load_gguf(path)


def test_a_metadata_string_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    path, data = valid_file(tmp_path)
    key = b"general.architecture"
    value_at = data.index(struct.pack("<Q", len(key)) + key) + 8 + len(key) + 4 + 8
    assert data[value_at : value_at + 5] == b"llama"
    path.write_bytes(data[:value_at] + b"ll\xffma" + data[value_at + 5 :])
    with pytest.raises(GGUFError, match="a metadata string is not UTF-8"):
        load_gguf(path)


def test_a_file_shorter_than_the_header_says_so(tmp_path: Path) -> None:
    path = tmp_path / "six.gguf"
    path.write_bytes(b"GGUF\x03\x00")
    with pytest.raises(GGUFError, match="truncated GGUF header: the file is 6 bytes"):
        load_gguf(path)


def engine(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "engine", *args], capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize(
    "args, message",
    [
        (["generate", "--device", "bogus", "hi"], "argument --device: not a torch device: 'bogus'"),
        (["gate0", "--device", "nope:x"], "argument --device: not a torch device: 'nope:x'"),
        (["capacity", "--num-blocks", "1"], "1 blocks cannot hold one max-context reservation"),
        (["capacity", "--output-tokens", "-5"], "argument --output-tokens: must be in [0, 16777216], got -5"),
        (["capacity", "--tenants", "0"], "argument --tenants: must be >= 1, got 0"),
    ],
)
def test_bad_arguments_are_one_line_and_exit_2(args: list[str], message: str) -> None:
    assert_one_line_exit_2(engine(*args), message)  # usage errors too: no usage block above the line


def test_a_reader_that_goes_away_is_not_a_traceback() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "engine", "capacity"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # as `| head -0` does, before the command writes
    assert proc.wait(timeout=120) == 0
    assert "Traceback" not in proc.stderr.read()


# --- hyperparameters: finite, in the ranges real models have, each named by its key ------------------


def damaged(tmp_path: Path, key: str, packed: bytes) -> Path:
    """The small model's file with KEY's value bytes replaced."""
    path, data = valid_file(tmp_path)
    path.write_bytes(with_value(data, key, packed))
    return path


NAN, INF = float("nan"), float("inf")
ROPE_RANGE = r"it must be a finite number in \(1, 1e\+12\]"
EPS_RANGE = r"it must be a finite number in \(0, 0.125\]"


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("llama.rope.freq_base", NAN, f"llama.rope.freq_base is nan; {ROPE_RANGE}"),
        ("llama.rope.freq_base", -10000.0, f"llama.rope.freq_base is -10000.0; {ROPE_RANGE}"),
        ("llama.rope.freq_base", INF, f"llama.rope.freq_base is inf; {ROPE_RANGE}"),
        ("llama.rope.freq_base", 0.0, f"llama.rope.freq_base is 0.0; {ROPE_RANGE}"),  # was read as "absent": 10000
        ("llama.rope.freq_base", 1.0, f"llama.rope.freq_base is 1.0; {ROPE_RANGE}"),
        ("llama.attention.layer_norm_rms_epsilon", NAN, f"layer_norm_rms_epsilon is nan; {EPS_RANGE}"),
        ("llama.attention.layer_norm_rms_epsilon", -1e-5, f"layer_norm_rms_epsilon is -9.99999974.*e-06; {EPS_RANGE}"),
        ("llama.attention.layer_norm_rms_epsilon", 0.0, f"layer_norm_rms_epsilon is 0.0; {EPS_RANGE}"),
        ("llama.attention.layer_norm_rms_epsilon", -INF, f"layer_norm_rms_epsilon is -inf; {EPS_RANGE}"),
    ],
)
def test_float_hyperparameters_must_be_finite_and_in_range(
    tmp_path: Path, key: str, value: float, message: str
) -> None:
    with pytest.raises(GGUFError, match=message):
        load_gguf(damaged(tmp_path, key, struct.pack("<f", value)))


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("llama.context_length", 0, r"llama.context_length is 0; it must be in \[1, 16777216\]"),
        ("llama.context_length", 2**32 - 1, r"llama.context_length is 4294967295; it must be in \[1, 16777216\]"),
        ("llama.embedding_length", 2**31 - 1, r"llama.embedding_length is 2147483647; it must be in \[1, 65536\]"),
        ("llama.feed_forward_length", 0, r"llama.feed_forward_length is 0; it must be in \[1, 262144\]"),
        ("llama.attention.head_count", 0, r"llama.attention.head_count is 0; it must be in \[1, 1024\]"),
        # 0 KV heads was read as "absent", so as head_count
        ("llama.attention.head_count_kv", 0, r"llama.attention.head_count_kv is 0; it must be in \[1, 1024\]"),
        (
            "llama.attention.head_count_kv",
            3,
            "llama.attention.head_count_kv is 3; it must be a divisor of the head count 2",
        ),
        ("llama.attention.key_length", 15, r"llama.attention.key_length is 15; it must be even \(RoPE rotates pairs\)"),
        ("llama.vocab_size", 2**31 - 1, r"llama.vocab_size is 2147483647; it must be in \[1, 4194304\]"),
        # in range, but not the vocabulary the tensors hold
        ("llama.vocab_size", 97, r"tensor token_embd.weight has shape \(98, 32\), the config needs \(97, 32\)"),
    ],
)
def test_integer_hyperparameters_must_be_in_range(tmp_path: Path, key: str, value: int, message: str) -> None:
    with pytest.raises(GGUFError, match=message):
        load_gguf(damaged(tmp_path, key, struct.pack("<I", value)))


F32, STRING = gguf.GGUFValueType.FLOAT32, gguf.GGUFValueType.STRING


@pytest.mark.parametrize(
    "entries, message",
    [
        ([("llama.rope.scaling.type", STRING, string_payload("yarn"))], "llama.rope.scaling.type is 'yarn'"),
        ([("llama.rope.scaling.factor", F32, struct.pack("<f", 4.0))], "llama.rope.scaling.factor is 4.0"),
        ([("llama.rope.scaling.factor", F32, struct.pack("<f", NAN))], "llama.rope.scaling.factor is nan"),
        ([("llama.rope.scale_linear", F32, struct.pack("<f", -2.0))], "llama.rope.scale_linear is -2.0"),
        (
            [("llama.rope.scaling.type", F32, struct.pack("<f", 1.0))],
            "llama.rope.scaling.type holds FLOAT32, expected a string",
        ),
    ],
)
def test_rope_scaling_the_engine_does_not_compute_is_refused(
    tmp_path: Path, entries: list[tuple[str, gguf.GGUFValueType, bytes]], message: str
) -> None:
    path, _ = valid_file(tmp_path)
    path.write_bytes(with_metadata(path, *(kv_entry(*entry) for entry in entries)))
    with pytest.raises(GGUFError, match=message):
        load_gguf(path)


def test_unscaled_rope_spelled_out_and_a_plain_array_still_load(tmp_path: Path) -> None:
    """The hostile-file helpers produce loadable files: what the tests above refuse is the value alone."""
    path, _ = valid_file(tmp_path)
    entries = [
        kv_entry("llama.rope.scaling.type", STRING, string_payload("linear")),
        kv_entry("llama.rope.scaling.factor", F32, struct.pack("<f", 1.0)),
        kv_entry("general.tags", gguf.GGUFValueType.ARRAY, struct.pack("<IQ", gguf.GGUFValueType.UINT8, 3) + b"abc"),
    ]
    path.write_bytes(with_metadata(path, *entries))
    model = load_gguf(path)
    assert model.config == small_model().config
    assert read_metadata(path)["general.tags"] == [97, 98, 99]


def test_non_finite_weights_are_refused(tmp_path: Path) -> None:
    model = small_model()
    model.weights["blk.0.ffn_up.weight"][3, 5] = NAN
    write_gguf(tmp_path / "nan.gguf", model)
    with pytest.raises(GGUFError, match=r"tensor blk.0.ffn_up.weight holds non-finite values \(NaN or inf\)"):
        load_gguf(tmp_path / "nan.gguf")


# --- metadata arrays: no nesting, no more items than the file holds ----------------------------------


def test_deeply_nested_arrays_are_refused_by_both_parsers(tmp_path: Path) -> None:
    path, _ = valid_file(tmp_path)
    path.write_bytes(with_metadata(path, nested_array_entry("hostile.nest", DEEP_NESTING)))
    with pytest.raises(GGUFError, match=r"the metadata value at byte \d+ is an array of arrays"):
        load_gguf(path)
    with pytest.raises(TokenizerError, match="metadata key hostile.nest holds an array of arrays"):
        read_metadata(path)


def test_an_array_count_past_the_file_is_refused_not_walked(tmp_path: Path) -> None:
    # The stock reader walked a uint8 array of 2**40 items one empty view at a time past the end: a hang.
    path, _ = valid_file(tmp_path)
    entry = kv_entry("hostile.count", gguf.GGUFValueType.ARRAY, struct.pack("<IQ", gguf.GGUFValueType.UINT8, 2**40))
    path.write_bytes(with_metadata(path, entry))
    result = engine("generate", "--model", str(path), "hi")  # a process with a timeout: a hang fails the test
    assert_one_line_exit_2(result, "claims 1099511627776 items; the file cannot hold them")


# --- a key or a tensor that comes twice: every reader refuses the file, as llama.cpp does ------------


@pytest.mark.parametrize(
    "key, payload",
    [
        ("general.architecture", string_payload("llama")),  # the same value again: still refused
        ("tokenizer.ggml.model", string_payload("gpt2")),  # another vocabulary: which one wins is a guess
    ],
)
def test_a_metadata_key_that_comes_twice_is_refused_by_every_reader(
    tmp_path: Path, key: str, payload: bytes, capsys: pytest.CaptureFixture[str]
) -> None:
    from engine.model.gguf_tokenizer import load_tokenizer
    from engine.model.gguf_vocab import llama_spm_vocabulary, tiny_model_for

    path = tmp_path / "model.gguf"
    vocabulary = llama_spm_vocabulary()
    write_gguf(path, tiny_model_for(vocabulary), vocabulary=vocabulary)
    assert load_tokenizer(path) is not None and load_gguf(path) is not None  # the file as written loads
    path.write_bytes(with_metadata(path, kv_entry(key, gguf.GGUFValueType.STRING, payload)))
    twice = rf"metadata key '{re.escape(key)}' appears twice"
    with pytest.raises(GGUFError, match=twice):
        load_gguf(path)
    with pytest.raises(TokenizerError, match=twice):
        read_metadata(path)
    with pytest.raises(TokenizerError, match=twice):
        load_tokenizer(path)  # it took the last of the two before
    assert_one_line_exit_2(run_main(["generate", "--model", str(path), "hi"], capsys), "appears twice")


def test_a_tensor_that_comes_twice_is_refused(tmp_path: Path) -> None:
    path, data = valid_file(tmp_path)
    renamed = data.replace(b"blk.0.attn_k.weight", b"blk.0.attn_q.weight", 1)  # the same length: the layout holds
    assert renamed != data
    path.write_bytes(renamed)
    with pytest.raises(GGUFError, match=r"tensor blk.0.attn_q.weight appears twice"):
        load_gguf(path)


# --- the command line: every case one line on stderr, exit 2, before anything is allocated ----------


def assert_one_line_exit_2(result: subprocess.CompletedProcess[str], message: str) -> None:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.stderr
    assert result.stdout == ""


def run_main(args: list[str], capsys: pytest.CaptureFixture[str]) -> subprocess.CompletedProcess[str]:
    """`python -m engine ARGS` through the in-process main (no interpreter start): its exit code and output."""
    code = engine_main(args)
    captured = capsys.readouterr()
    return subprocess.CompletedProcess(args, code, captured.out, captured.err)


def small_gguf(tmp_path: Path) -> Path:
    path, _ = valid_file(tmp_path)
    return path


@pytest.mark.parametrize(
    "args, message",
    [
        # the KV cache these sizes imply (1 TB for the small model) is weighed against free memory first
        (["--num-blocks", "1000000000"], "engine generate: error: KV cache: 1000000000 blocks of 16 tokens: "),
        (["--block-size", "100000000"], "engine generate: error: argument --block-size: must be in [1, 1024]"),
        (["--temperature", "nan"], "engine generate: error: argument --temperature: must be a finite number >= 0.0"),
    ],
)
def test_hostile_sizes_and_sampling_parameters_in_a_real_run(tmp_path: Path, args: list[str], message: str) -> None:
    result = engine("generate", "--model", str(small_gguf(tmp_path)), *args, "hi")
    assert_one_line_exit_2(result, message)


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("llama.rope.freq_base", NAN, "model.gguf: llama.rope.freq_base is nan; it must be a finite number"),
        ("llama.attention.layer_norm_rms_epsilon", -1e-5, "model.gguf: llama.attention.layer_norm_rms_epsilon is -"),
    ],
)
def test_a_nan_or_negative_hyperparameter_through_the_cli(
    tmp_path: Path, key: str, value: float, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = damaged(tmp_path, key, struct.pack("<f", value))
    assert_one_line_exit_2(run_main(["generate", "--model", str(path), "hi"], capsys), message)


def test_deep_nesting_through_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, _ = valid_file(tmp_path)
    path.write_bytes(with_metadata(path, nested_array_entry("hostile.nest", DEEP_NESTING)))
    assert_one_line_exit_2(run_main(["generate", "--model", str(path), "hi"], capsys), "is an array of arrays")
    # the tokenizer reads metadata with its own parser
    assert_one_line_exit_2(run_main(["tokenize", "--model", str(path), "hi"], capsys), "holds an array of arrays")


@pytest.mark.parametrize(
    "args, message",
    [
        (["--temperature", "inf"], "argument --temperature: must be a finite number >= 0.0, got inf"),
        (["--temperature", "-1"], "argument --temperature: must be a finite number >= 0.0, got -1"),
        (["--top-p", "nan"], r"argument --top-p: must be a finite number in (0.0, 1.0], got nan"),
        (["--top-p", "0"], r"argument --top-p: must be a finite number in (0.0, 1.0], got 0"),
        (["--top-k", "-1"], "argument --top-k: must be >= 0, got -1"),
        (["--seed", "-1"], "argument --seed: must be in [0, 18446744073709551615], got -1"),
        (["--seed", str(2**64)], "argument --seed: must be in [0, 18446744073709551615], got 18446744073709551616"),
        (["--num-blocks", str(2**31)], "argument --num-blocks: must be in [1, 2147483647], got 2147483648"),
        (["--block-size", "0"], "argument --block-size: must be in [1, 1024], got 0"),
        (["--max-tokens", str(2**40)], "argument --max-tokens: must be in [1, 16777216], got 1099511627776"),
        # in range for the parser; the 32 TiB they imply is not there
        (["--num-blocks", str(2**31 - 1), "--block-size", "1024"], "KV cache: 2147483647 blocks of 1024 tokens: "),
    ],
)
def test_generate_refuses_bad_sizes_and_sampling_in_one_line(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    result = run_main(["generate", *args, "hi"], capsys)
    assert_one_line_exit_2(result, message)
    assert result.stderr.startswith("engine generate: error: ")


@pytest.mark.parametrize(
    "args, message",
    [
        (["capacity", "--num-blocks", "1000000000"], "engine capacity: the requests of 90909091 sequences: "),
        (["capacity", "--block-size", "100000000"], "engine capacity: error: argument --block-size: must be in"),
        (["capacity", "--tenants", "100000000"], "engine capacity: the requests of 100000000 tenants: "),
        (["gate0", "--block-size", "100000000"], "engine gate0: error: argument --block-size: must be in [1, 1024]"),
        (["bench", "gpu", "--block-size", "100000000"], "engine bench: error: argument --block-size: must be in"),
        (["bench", "decode", "--batch", "0"], "engine bench: error: argument --batch: must be >= 1, got 0"),
    ],
)
def test_other_commands_bound_their_sizes_in_one_line(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert_one_line_exit_2(run_main(args, capsys), message)


def test_a_model_that_overflows_is_one_line_not_a_sampling_crash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # finite weights (the loader accepts them) whose products overflow float32: every logit inf or NaN
    model = small_model()
    model.weights["output_norm.weight"].fill_(1e30)
    model.weights["output.weight"].fill_(1e30)
    write_gguf(tmp_path / "overflow.gguf", model)
    assert engine_main(["generate", "--model", str(tmp_path / "overflow.gguf"), "--temperature", "0.8", "hi"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == [
        "engine generate: error: the model computed non-finite logits (NaN or inf); its weights are unusable"
    ]


# --- the same checks at library level: each a ValueError naming what is wrong ------------------------


@pytest.mark.parametrize(
    "changes, field, message",
    [
        ({"rope_theta": NAN}, "rope_theta", r"rope_theta is nan; it must be a finite number in \(1, 1e\+12\]"),
        ({"rope_theta": 1e39}, "rope_theta", "rope_theta is inf"),  # past float32: the inf a GGUF would hold
        ({"rms_eps": -1e-5}, "rms_eps", "rms_eps is -9.99"),
        ({"rms_eps": 1e-50}, "rms_eps", "rms_eps is 0.0"),  # float32 holds it as 0
        ({"num_kv_heads": 3}, "num_kv_heads", "num_kv_heads is 3; it must be a divisor of the head count 2"),
        ({"vocab_size": 2**22 + 1}, "vocab_size", r"vocab_size is 4194305; it must be in \[1, 4194304\]"),
        ({"max_position": 0}, "max_position", r"max_position is 0; it must be in \[1, 16777216\]"),
    ],
)
def test_llama_config_refuses_what_no_real_model_has(changes: dict[str, float], field: str, message: str) -> None:
    with pytest.raises(HyperparameterError, match=message) as refused:
        dataclasses.replace(small_model().config, **changes)
    assert refused.value.field == field


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"temperature": NAN}, "temperature must be a finite number >= 0, got nan"),
        ({"temperature": INF}, "temperature must be a finite number >= 0, got inf"),
        ({"top_p": NAN}, r"top_p must be in \(0, 1\], got nan"),
        ({"seed": -1}, r"seed must be in \[0, 2\*\*64 - 1\], got -1"),
        ({"seed": 2**64}, r"seed must be in \[0, 2\*\*64 - 1\], got 18446744073709551616"),
    ],
)
def test_sampling_params_must_be_finite_and_in_range(changes: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SamplingParams(**changes)  # type: ignore[arg-type]


def test_a_tiny_temperature_samples_the_argmax_instead_of_nan() -> None:
    # logits / 1e-300 overflowed float32 to inf and softmax to NaN: torch.multinomial then raised
    logits = torch.tensor([1.0, 3.0, 2.0, -4.0])
    params = SamplingParams(temperature=1e-300)
    assert torch.equal(sampling_probs(logits, params), torch.tensor([0.0, 1.0, 0.0, 0.0]))
    assert sample(logits, params, torch.Generator().manual_seed(0)) == 1


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"block_size": 100_000_000}, r"block_size must be in \[1, 1024\], got 100000000"),
        ({"num_blocks": 2**31}, r"num_blocks must be in \[1, 2147483647\], got 2147483648"),
        ({"num_blocks": 0}, r"num_blocks must be in \[1, 2147483647\], got 0"),
    ],
)
def test_engine_config_bounds_its_sizes(changes: dict[str, int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        EngineConfig(**changes)  # type: ignore[arg-type]


@pytest.fixture
def host_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[int, int | None], None]:
    """Point the host-memory probe at files of our own: MemAvailable and a cgroup v2 limit."""

    def set_memory(mem_available: int, cgroup_left: int | None = None) -> None:
        meminfo = tmp_path / "meminfo"
        meminfo.write_text(f"MemTotal:       99999999 kB\nMemAvailable:   {mem_available // 1024} kB\n")
        monkeypatch.setattr(limits, "_MEMINFO", meminfo)
        (tmp_path / "cgroup").write_text("0::/box\n")
        monkeypatch.setattr(limits, "_CGROUP", tmp_path / "cgroup")
        group = tmp_path / "sys" / "box"
        group.mkdir(parents=True, exist_ok=True)
        (group / "memory.max").write_text("max\n" if cgroup_left is None else f"{cgroup_left + 4096}\n")
        (group / "memory.current").write_text(f"{4096 + 8192}\n")  # 8 KiB of it reclaimable page cache
        (group / "memory.stat").write_text("anon 4096\nfile 8192\ninactive_file 8192\n")
        monkeypatch.setattr(limits, "_CGROUP_ROOT", tmp_path / "sys")

    return set_memory


def test_available_memory_is_the_lower_of_meminfo_and_the_cgroup_limit(
    host_memory: Callable[[int, int | None], None],
) -> None:
    host_memory(8 << 20, None)
    assert limits.available_memory("cpu") == 8 << 20
    host_memory(8 << 20, 3 << 20)  # a container's limit below what the host has free
    assert limits.available_memory("cpu") == 3 << 20
    with pytest.raises(InsufficientMemory, match=r"^the thing: 4.0 MiB needed, cpu has 3.0 MiB available$"):
        limits.require_memory(4 << 20, "cpu", "the thing")
    limits.require_memory(3 << 20, "cpu", "the thing")


def test_the_kv_cache_is_weighed_before_it_is_allocated(host_memory: Callable[[int, int | None], None]) -> None:
    # 1 layer, 1 KV head of 16 dims, f16 K and V: 64 bytes a token; 64 blocks of 16 tokens = 64 KiB
    sizes = dict(num_layers=1, num_blocks=64, block_size=16, n_kv_heads=1, head_dim=16)
    assert kv_cache_bytes(**sizes) == 64 * 1024
    host_memory(1 << 20, 32 * 1024)
    with pytest.raises(
        InsufficientMemory, match=r"^64 blocks of 16 tokens: 64.0 KiB needed, cpu has 32.0 KiB available"
    ):
        KVCacheStorage(**sizes)
    host_memory(1 << 20, None)
    storage = KVCacheStorage(**sizes)
    assert storage.bytes_per_block() * storage.num_blocks == kv_cache_bytes(**sizes)


def test_the_block_pool_is_weighed_before_its_blocks_exist(host_memory: Callable[[int, int | None], None]) -> None:
    host_memory(1 << 20, None)
    with pytest.raises(InsufficientMemory, match=r"^the block table of 1000000000 blocks: 119.2 GiB needed"):
        BlockPool(1_000_000_000)
    with pytest.raises(ValueError, match="num_blocks must be at most 2147483647"):
        BlockPool(2**31)
    assert BlockPool(1000).num_gpu_blocks == 1000


def test_non_finite_logits_stop_the_engine_with_a_clear_error() -> None:
    model = small_model()
    model.weights["output.weight"][7, 0] = NAN
    engine = LLMEngine(model, EngineConfig(block_size=4, num_blocks=16))
    with pytest.raises(NonFiniteLogits, match=r"non-finite logits \(NaN or inf\)"):
        engine.generate(["hi"], SamplingParams(max_tokens=2))
