"""The one located validator behind matrix.yaml's own sections and its build matrix."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from patchctl.errors import ConfigError
from patchctl.project import yamlloc
from patchctl.project.validation import Validator, kind

PIN = "a" * 40


def validator(tmp_path: Path, text: str) -> Validator:
    path = tmp_path / "doc.yaml"
    path.write_text(textwrap.dedent(text))
    return Validator(yamlloc.load(path))


def test_errors_name_the_file_the_line_and_the_key_path(tmp_path: Path) -> None:
    v = validator(tmp_path, "top:\n  name: x\n  count: 0\n  flag: 'no'\n")
    assert v.string(("top",), "name") == "x"
    with pytest.raises(ConfigError, match=r"doc\.yaml:3: top\.count: must be an integer from 1 to 10000000, got 0"):
        v.positive_int(("top",), "count", 1)
    with pytest.raises(ConfigError, match=r"doc\.yaml:4: top\.flag: must be true or false, got a string"):
        v.boolean(("top",), "flag", False)
    with pytest.raises(ConfigError, match=r"doc\.yaml:2: top: missing required key 'url'"):
        v.string(("top",), "url")
    assert v.string(("top",), "url", required=False) is None and v.string(("top",), "url", "d") == "d"


def test_mapping_checks_kind_unknown_and_required_keys(tmp_path: Path) -> None:
    v = validator(tmp_path, "top:\n  a: 1\n  b: 2\nlist: [1]\n")
    assert v.mapping(v.at(("top",)), ("top",), ("a", "b"), required=("a",)) == {"a": 1, "b": 2}
    with pytest.raises(ConfigError, match=r":3: top\.b: unknown key \(allowed: a\)"):
        v.mapping(v.at(("top",)), ("top",), ("a",))
    with pytest.raises(ConfigError, match=r":2: top: missing required key 'c'"):
        v.mapping(v.at(("top",)), ("top",), ("a", "b", "c"), required=("c",))
    with pytest.raises(ConfigError, match=r":4: list: must be a mapping, got a list"):
        v.mapping(v.at(("list",)), ("list",), ())
    assert v.optional_list(("top",), "missing") == [] and v.sequence(v.at(("list",)), ("list",)) == [1]


def test_kind_words() -> None:
    assert [kind(x) for x in ({}, [], "", True, 1, 1.5, None)] == [
        "a mapping",
        "a list",
        "a string",
        "a boolean",
        "an integer",
        "a number",
        "nothing",
    ]


@pytest.mark.parametrize(
    "command", [["lint", "--no-apply"], ["vendor", "--check"], ["apply"], ["pin-sync", "up"], ["status"]]
)
def test_every_command_validates_the_build_matrix(tmp_path: Path, command: list[str]) -> None:
    """The build-matrix sections share matrix.yaml: a bad row fails whatever command loads it,
    not only `matrix check` (every command loads through `matrix.sources.load_project`)."""
    (tmp_path / "matrix.yaml").write_text(
        f"version: 1\nupstreams:\n  up: {{url: /x, pin: {PIN}}}\ninclude:\n  - {{build-type: ''}}\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "patchctl", "-C", str(tmp_path), *command], capture_output=True, text=True
    )
    assert done.returncode == 2, done.stderr
    assert "matrix.yaml:5: include[0]: missing required key" in done.stderr
    assert "Traceback" not in done.stderr
