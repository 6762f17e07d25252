"""The conformance vector files: build them, write them atomically, compare a directory with them."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from engine.conformance.scenarios import SCENARIOS
from engine.conformance.trace import render_json, render_text, replay
from engine.core.block_pool import FREE_ORDERS

VECTOR_SUFFIXES = (".json", ".txt")
CHECKED_IN_DIR = Path(__file__).resolve().parent / "vectors"


@dataclass(frozen=True)
class Drift:
    """One way a directory differs from freshly generated vectors."""

    file: str
    problem: str  # "missing", "unexpected" or "differs"


def build_vector_files() -> dict[str, str]:
    """File name -> content for every scenario in every free order, deterministically."""
    files: dict[str, str] = {}
    for scenario in SCENARIOS:
        for free_order in FREE_ORDERS:
            trace = replay(scenario, free_order)
            files[f"{trace.name}.json"] = render_json(trace)
            files[f"{trace.name}.txt"] = render_text(trace)
    return dict(sorted(files.items()))


def write_vector_files(out_dir: Path, files: dict[str, str]) -> list[Path]:
    """Write each file atomically (temp file + os.replace); other files in out_dir are left alone."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for name, content in files.items():
        target = out_dir / name
        handle, temp = tempfile.mkstemp(prefix=f".{name}.", dir=out_dir)
        try:
            with os.fdopen(handle, "w", encoding="utf-8", newline="\n") as stream:
                stream.write(content)
            os.replace(temp, target)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise
        written.append(target)
    return written


def compare_vector_dir(directory: Path, files: dict[str, str]) -> list[Drift]:
    """How the vector files in `directory` differ from `files` (other files are ignored)."""
    present = {path.name for path in directory.iterdir() if path.is_file() and path.suffix in VECTOR_SUFFIXES}
    drifts = [Drift(name, "missing") for name in files if name not in present]
    drifts += [Drift(name, "unexpected") for name in sorted(present - files.keys())]
    for name, content in files.items():
        if name in present and (directory / name).read_text(encoding="utf-8") != content:
            drifts.append(Drift(name, "differs"))
    return sorted(drifts, key=lambda drift: drift.file)
