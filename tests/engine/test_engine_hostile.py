"""Hostile model files and arguments for `python -m engine`: one error line, a documented exit
code, never a traceback, never a model computed from garbage."""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import gguf
import numpy as np
import pytest

from engine.model.gguf import GGUFError, load_gguf, write_gguf

from .hostile_gguf import GGUFTally, run_gguf_cases
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


def metadata_value_position(data: bytes, key: str) -> int:
    encoded = key.encode()
    return data.index(struct.pack("<Q", len(encoded)) + encoded) + 8 + len(encoded) + 4


@pytest.mark.parametrize(
    "key, value, message",
    [
        # Found by the fuzz run: 2**31 - 1 layers made the loader list 19 billion tensor names (24 GB, OOM kill).
        ("llama.block_count", 2**31 - 1, "llama.block_count is 2147483647 but the file holds only 12 tensors"),
        ("llama.attention.value_length", 8, "llama.attention.value_length is 8; only 16 .the head size."),
    ],
)
def test_hostile_hyperparameters_are_refused(tmp_path: Path, key: str, value: int, message: str) -> None:
    path, data = valid_file(tmp_path)
    damaged = bytearray(data)
    struct.pack_into("<I", damaged, metadata_value_position(data, key), value)
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
        (["capacity", "--output-tokens", "-5"], "argument --output-tokens: must be >= 0, got -5"),
        (["capacity", "--tenants", "0"], "argument --tenants: must be >= 1, got 0"),
    ],
)
def test_bad_arguments_are_one_line_and_exit_2(args: list[str], message: str) -> None:
    result = engine(*args)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert message in result.stderr.strip().splitlines()[-1]


def test_a_reader_that_goes_away_is_not_a_traceback() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "engine", "capacity"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # as `| head -0` does, before the command writes
    assert proc.wait(timeout=120) == 0
    assert "Traceback" not in proc.stderr.read()
