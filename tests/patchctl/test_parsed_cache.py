"""matrix.yaml read back from the cache (`patchctl.project.parsed_cache`): the same document and
lines as PyYAML's, PyYAML not even imported, and nothing the cache holds ever changes a verdict."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from patchctl.errors import ConfigError
from patchctl.project import config as config_mod
from patchctl.project import parsed_cache, yamlloc
from patchctl.project.yamlparse import parse as parse_with_pyyaml

REPO = Path(__file__).resolve().parents[2]
PIN = "a" * 40
MATRIX = f"""\
version: 1
upstreams:
  llama.cpp:
    url: https://github.com/ggml-org/llama.cpp
    branch: master
    pin: {PIN}
series:
  ours:
    upstream: llama.cpp
    dir: patches/ours
    build: [{{name: build, command: "cmake -B build && cmake --build build"}}]
"""
# Values whose types JSON must give back as they are (not a valid matrix.yaml: for yamlloc alone).
DOCUMENT = (
    MATRIX
    + """\
note: "\\u00e9t\\u00e9 \\U0001F600 -0.0 {}"
ratio: -0.0
big: 123456789012345678901234567890
flags: [true, null, 1, 1.5]
"""
)


def entries() -> list[Path]:
    parsed = Path(os.environ["PATCHCTL_CACHE"]) / "parsed"
    return sorted(parsed.iterdir()) if parsed.is_dir() else []


def test_a_file_read_again_is_the_document_pyyaml_made_of_it(tmp_path: Path) -> None:
    path = tmp_path / "doc.yaml"
    path.write_text(DOCUMENT)
    first = yamlloc.load(path)
    assert len(entries()) == 1
    again = yamlloc.load(path)
    expected = parse_with_pyyaml(DOCUMENT, path)
    for doc in (first, again):
        assert doc.path == path
        assert doc.data == expected.data and doc.lines == expected.lines
        assert repr(doc.data) == repr(expected.data)  # the same types: -0.0 a float, a big int an int
    assert entries() == entries()  # read, not written again


def test_a_file_read_before_starts_without_pyyaml(tmp_path: Path) -> None:
    path = tmp_path / "matrix.yaml"
    path.write_text(MATRIX)
    config_mod.load(path)  # parsed, kept
    code = (
        "import sys; from pathlib import Path; from patchctl.project import config\n"
        f"c = config.load(Path({str(path)!r})); assert c.get_upstream('llama.cpp').pin == {PIN!r}\n"
        "print('yaml' in sys.modules)"
    )
    shown = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert shown.stdout.strip() == "False"


def test_a_validation_error_names_the_same_line_from_the_cache(tmp_path: Path) -> None:
    path = tmp_path / "matrix.yaml"
    path.write_text(MATRIX.replace(f"pin: {PIN}", "pin: main"))
    said = []
    for _ in range(2):
        with pytest.raises(ConfigError) as error:
            config_mod.load(path)
        said.append(str(error.value))
    assert len(entries()) == 1
    assert said[0] == said[1] and ":6: upstreams.llama.cpp.pin: pin must be a full 40-hex" in said[0]


@pytest.mark.parametrize(
    "text",
    [
        "when: 2024-05-01\n",  # a date
        "1: one\n",  # an integer key
        "blob: !!binary aGVsbG8=\n",  # bytes
        "inf: .inf\n",  # JSON has no infinity
    ],
)
def test_what_json_cannot_hold_exactly_is_left_to_pyyaml(tmp_path: Path, text: str) -> None:
    path = tmp_path / "doc.yaml"
    path.write_text(text)
    expected = parse_with_pyyaml(text, path).data
    assert yamlloc.load(path).data == expected and yamlloc.load(path).data == expected
    assert entries() == []
    if "when" in text:
        assert yamlloc.load(path).data["when"] == datetime.date(2024, 5, 1)


def test_merge_keys_are_part_of_what_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "index.yaml"
    path.write_text("base: &b {a: 1}\nrow:\n  <<: *b\n  c: 2\n")
    assert yamlloc.load(path, merge_keys=True).data["row"] == {"a": 1, "c": 2}
    with pytest.raises(ConfigError, match=r"merge keys \(<<\) are not supported"):
        yamlloc.load(path)  # refused as ever: the document kept with merge keys is not this one
    assert yamlloc.load(path, merge_keys=True).data["row"] == {"a": 1, "c": 2}


@pytest.mark.parametrize(
    "damage",
    [
        "cut short",
        "another format",
        "another file's",
        "merge keys",
        "not JSON",
        "lines out of shape",
        "NaN",
        "a link",
        "a directory",
    ],
)
def test_a_damaged_entry_is_read_past_and_made_again(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "matrix.yaml"
    path.write_text(MATRIX)
    expected = yamlloc.load(path)
    (entry,) = entries()
    good = entry.read_bytes()
    entry.unlink()
    if damage == "cut short":
        entry.write_bytes(good[: len(good) // 2])
    elif damage == "another format":
        kept = json.loads(good)
        kept["format"] = "patchctl parsed-yaml 0"
        entry.write_text(json.dumps(kept))
    elif damage == "another file's":  # where a file of the same length and CRC-32 would be kept
        other = tmp_path / "other.yaml"
        other.write_text(MATRIX.replace("patches/ours", "patches/ourz"))
        yamlloc.load(other)
        (made,) = [e for e in entries() if e != entry]
        made.rename(entry)
    elif damage == "merge keys":
        kept = json.loads(good)
        kept["merge_keys"] = True
        entry.write_text(json.dumps(kept))
    elif damage == "not JSON":
        entry.write_bytes(b"\xff\xfe")
    elif damage == "lines out of shape":
        kept = json.loads(good)
        kept["lines"] = [[["series"], 0]]
        entry.write_text(json.dumps(kept))
    elif damage == "NaN":
        entry.write_text(json.dumps({"format": parsed_cache.FORMAT, "data": float("nan"), "lines": []}))
    elif damage == "a link":
        elsewhere = tmp_path / "elsewhere.json"
        elsewhere.write_bytes(good)
        entry.symlink_to(elsewhere)
    else:
        entry.mkdir()
    doc = yamlloc.load(path)
    assert doc.data == expected.data and doc.lines == expected.lines
    if damage not in ("a link", "a directory"):  # those stand: never written through, never removed
        assert entry.read_bytes() == good


def test_a_cache_that_cannot_be_written_costs_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    monkeypatch.setenv("PATCHCTL_CACHE", str(blocker))
    path = tmp_path / "matrix.yaml"
    path.write_text(MATRIX)
    assert yamlloc.load(path).data["series"]["ours"]["dir"] == "patches/ours"
    assert yamlloc.load(path).lines == parse_with_pyyaml(MATRIX, path).lines
