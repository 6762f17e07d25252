"""Seeded hostile GGUF files for the engine's loader, shared by the CI subset
(test_engine_hostile.py) and the full run (bench/hostile_fuzz.py --ggufs N).

Each case starts from a valid small model file and damages it the way real files break or
are made to break: cut short, bytes flipped in the header, a length, count, dimension,
type or offset field set to a hostile value, a metadata value's type changed, a float
hyperparameter set to NaN, an infinity, a negative or a denormal, a metadata array nested
deep. The judge asks one thing of both GGUF parsers: `load_gguf` returns a model or raises
`GGUFError`, and the tokenizer's `read_metadata` returns the metadata or raises
`TokenizerError`; anything else (another exception, a crash) is counted as a traceback.

The helpers that build single hostile files (`with_value`, `kv_entry`, `nested_array_entry`,
`with_metadata`) are shared with test_engine_hostile.py.
"""

from __future__ import annotations

import random
import struct
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import gguf

from engine.model.gguf import GGUFError, load_gguf, write_gguf
from engine.model.gguf_tokenizer import TokenizerError, read_metadata
from engine.model.llama import LlamaConfig, LlamaModel, random_weights

HOSTILE_U64 = (0, 1, 3, 2**31 - 1, 2**32, 2**40, 2**63 - 1, 2**64 - 1)
HOSTILE_U32 = (0, 1, 7, 13, 99, 2**31 - 1, 2**32 - 1)
HOSTILE_F32 = (float("nan"), float("inf"), float("-inf"), -1.0, 0.0, 1e-45, 3.4e38)
DEEP_NESTING = 50_000  # levels: past Python's recursion limit many times over


def value_position(data: bytes, key: str) -> int:
    """Where the value of scalar metadata KEY starts (after its key string and value type)."""
    encoded = key.encode()
    return data.index(struct.pack("<Q", len(encoded)) + encoded) + 8 + len(encoded) + 4


def with_value(data: bytes, key: str, packed: bytes) -> bytes:
    """The file with scalar KEY's value bytes replaced by PACKED (same width: the layout stays)."""
    at = value_position(data, key)
    return data[:at] + packed + data[at + len(packed) :]


def kv_entry(key: str, value_type: gguf.GGUFValueType, payload: bytes) -> bytes:
    """One encoded metadata entry: key string, value type, value bytes."""
    encoded = key.encode()
    return struct.pack("<Q", len(encoded)) + encoded + struct.pack("<I", value_type) + payload


def string_payload(text: str) -> bytes:
    return struct.pack("<Q", len(text.encode())) + text.encode()


def nested_array_entry(key: str, depth: int) -> bytes:
    """KEY holding an array of arrays DEPTH levels deep, the innermost an empty uint8 array."""
    level = struct.pack("<IQ", gguf.GGUFValueType.ARRAY, 1)
    return kv_entry(
        key, gguf.GGUFValueType.ARRAY, level * (depth - 1) + struct.pack("<IQ", gguf.GGUFValueType.UINT8, 0)
    )


def with_metadata(path: Path, *entries: bytes) -> bytes:
    """The GGUF file at PATH with ENTRIES added to its metadata, the tensor data realigned after
    them (tensor offsets count from the data start, so they stay valid)."""
    data = path.read_bytes()
    reader = gguf.GGUFReader(path)
    last = reader.tensors[-1].field
    infos_end = last.offset + sum(int(part.nbytes) for part in last.parts)
    data_start, alignment = reader.data_offset, reader.alignment
    del reader
    (kv_count,) = struct.unpack_from("<Q", data, 16)
    head = data[:16] + struct.pack("<Q", kv_count + len(entries)) + b"".join(entries) + data[24:infos_end]
    return head + bytes(-len(head) % alignment) + data[data_start:]


@dataclass
class GGUFTally:
    cases: int = 0
    tracebacks: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    examples: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.tracebacks == 0

    def summary(self) -> str:
        return f"ggufs: cases={self.cases} tracebacks={self.tracebacks} outcomes={dict(sorted(self.outcomes.items()))}"


def _valid_file(path: Path) -> bytes:
    config = LlamaConfig(
        vocab_size=40, hidden_size=32, intermediate_size=48, num_layers=1, num_heads=2, num_kv_heads=1, head_dim=16
    )
    write_gguf(path, LlamaModel(config, random_weights(config, seed=5), tuple(f"t{i}" for i in range(40))))
    return path.read_bytes()


@dataclass(frozen=True)
class _Layout:
    parts: list[tuple[int, int]]  # (offset, size) of every integer part of the header
    floats: list[int]  # offsets of the float32 metadata values
    data_start: int


def _layout(path: Path) -> _Layout:
    """Every integer part of the header (lengths, counts, types, dims, offsets and scalar values),
    every float32 metadata value, and where the tensor data starts."""
    reader = gguf.GGUFReader(path)
    parts: list[tuple[int, int]] = []
    floats: list[int] = []
    base = reader.data.__array_interface__["data"][0]
    fields = list(reader.fields.values()) + [t.field for t in reader.tensors]
    for f in fields:
        for part in f.parts:
            at = part.__array_interface__["data"][0] - base
            if part.dtype.kind in "ui" and part.nbytes in (4, 8):
                parts.append((at, part.nbytes))
            elif part.dtype == "float32" and part.nbytes == 4:
                floats.append(at)
    return _Layout(parts, floats, reader.data_offset)


def _mutate(data: bytes, path: Path, layout: _Layout, rng: random.Random) -> tuple[str, bytes]:
    kind = rng.choice(("truncate", "flip", "field", "field", "type", "garbage", "float", "nest"))
    out = bytearray(data)
    if kind == "float":
        struct.pack_into("<f", out, rng.choice(layout.floats), rng.choice(HOSTILE_F32))
        return kind, bytes(out)
    if kind == "nest":
        return kind, with_metadata(path, nested_array_entry("hostile.nest", rng.choice((2, 3, DEEP_NESTING))))
    parts, data_start = layout.parts, layout.data_start
    if kind == "truncate":
        return kind, bytes(out[: rng.randrange(0, len(data))])
    if kind == "flip":
        for _ in range(rng.randint(1, 8)):
            out[rng.randrange(0, data_start)] ^= 1 << rng.randrange(8)
        return kind, bytes(out)
    if kind == "garbage":
        return kind, data[:8] + rng.randbytes(rng.randrange(0, 4096))
    offset, size = rng.choice(parts)
    if kind == "type":  # any u32 field set to a value type id, valid or not
        struct.pack_into("<I", out, offset, rng.randrange(0, 16))
        return kind, bytes(out)
    value = rng.choice(HOSTILE_U64 if size == 8 else HOSTILE_U32)
    struct.pack_into("<Q" if size == 8 else "<I", out, offset, value)
    return kind, bytes(out)


def run_gguf_cases(workdir: Path, count: int, seed: int, tally: GGUFTally) -> GGUFTally:
    workdir.mkdir(parents=True, exist_ok=True)
    valid = workdir / "valid.gguf"
    data = _valid_file(valid)
    layout = _layout(valid)
    rng = random.Random(seed)
    case_file = workdir / "case.gguf"
    for index in range(count):
        kind, content = _mutate(data, valid, layout, rng)
        case_file.write_bytes(content)
        tally.cases += 1
        try:
            load_gguf(case_file)
            tally.outcomes[f"{kind}:loaded"] += 1
        except GGUFError:
            tally.outcomes[f"{kind}:refused"] += 1
        except Exception as exc:  # noqa: BLE001 - anything but GGUFError is the finding
            _count_traceback(tally, f"case {index} ({kind}): load_gguf: {type(exc).__name__}: {exc}")
        try:
            read_metadata(case_file)
        except TokenizerError:
            pass
        except Exception as exc:  # noqa: BLE001 - anything but TokenizerError is the finding
            _count_traceback(tally, f"case {index} ({kind}): read_metadata: {type(exc).__name__}: {exc}")
    return tally


def _count_traceback(tally: GGUFTally, example: str) -> None:
    tally.tracebacks += 1
    if len(tally.examples) < 10:
        tally.examples.append(example[:300])
