"""Seeded hostile GGUF files for the engine's loader, shared by the CI subset
(test_engine_hostile.py) and the full run (bench/hostile_fuzz.py --ggufs N).

Each case starts from a valid small model file and damages it the way real files break or
are made to break: cut short, bytes flipped in the header, a length, count, dimension,
type or offset field set to a hostile value, a metadata value's type changed. The judge
asks one thing: `load_gguf` returns a model or raises `GGUFError`; anything else (another
exception, a crash) is counted as a traceback.
"""

from __future__ import annotations

import random
import struct
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import gguf

from engine.model.gguf import GGUFError, load_gguf, write_gguf
from engine.model.llama import LlamaConfig, LlamaModel, random_weights

HOSTILE_U64 = (0, 1, 3, 2**31 - 1, 2**32, 2**40, 2**63 - 1, 2**64 - 1)
HOSTILE_U32 = (0, 1, 7, 13, 99, 2**31 - 1, 2**32 - 1)


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


def _fields(path: Path) -> tuple[list[tuple[int, int]], int]:
    """(offset, size) of every integer part of the header (lengths, counts, types, dims,
    offsets and scalar values), and where the tensor data starts."""
    reader = gguf.GGUFReader(path)
    parts: list[tuple[int, int]] = []
    base = reader.data.__array_interface__["data"][0]
    fields = list(reader.fields.values()) + [t.field for t in reader.tensors]
    for f in fields:
        for part in f.parts:
            if part.dtype.kind in "ui" and part.nbytes in (4, 8):
                parts.append((part.__array_interface__["data"][0] - base, part.nbytes))
    return parts, reader.data_offset


def _mutate(data: bytes, parts: list[tuple[int, int]], data_start: int, rng: random.Random) -> tuple[str, bytes]:
    kind = rng.choice(("truncate", "flip", "field", "field", "type", "garbage"))
    out = bytearray(data)
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
    parts, data_start = _fields(valid)
    rng = random.Random(seed)
    case_file = workdir / "case.gguf"
    for index in range(count):
        kind, content = _mutate(data, parts, data_start, rng)
        case_file.write_bytes(content)
        tally.cases += 1
        try:
            load_gguf(case_file)
            tally.outcomes[f"{kind}:loaded"] += 1
        except GGUFError:
            tally.outcomes[f"{kind}:refused"] += 1
        except Exception as exc:  # noqa: BLE001 - anything but GGUFError is the finding
            tally.tracebacks += 1
            if len(tally.examples) < 10:
                tally.examples.append(f"case {index} ({kind}): {type(exc).__name__}: {exc}"[:300])
    return tally
