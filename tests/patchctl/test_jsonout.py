"""jsonout: one serializer for every result dataclass."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import ClassVar

from patchctl.output.jsonout import json_field, to_json


class Colour(str, Enum):
    RED = "red"


@dataclass
class Inner:
    name: str
    seconds: float = json_field(digits=2, default=0.0)


@dataclass
class Outer:
    JSON_PROPERTIES: ClassVar[dict[str, str]] = {"ok": "ok"}

    path: Path
    colour: Colour
    items: list[Inner] = field(default_factory=list)
    pairs: list[tuple[str, str]] = json_field(
        encode=lambda p: [{"from": a, "to": b} for a, b in p], default_factory=list
    )
    renamed: str = json_field(name="label", default="x")
    secret: str = json_field(omit=True, default="hidden")
    commit: str | None = json_field(omit_empty=True, default=None)
    timings: dict[str, float] = json_field(digits=1, default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.items


def test_dataclasses_become_plain_json_with_declared_renames_and_omissions() -> None:
    value = Outer(
        Path("/a/b"),
        Colour.RED,
        [Inner("i", 1.23456)],
        [("old", "new")],
        timings={"apply": 0.06, "gate": 1.44},
    )
    assert to_json(value) == {
        "path": "/a/b",
        "colour": "red",
        "items": [{"name": "i", "seconds": 1.23}],
        "pairs": [{"from": "old", "to": "new"}],
        "label": "x",
        "timings": {"apply": 0.1, "gate": 1.4},
        "ok": False,
    }
    value.commit = "abc"
    assert to_json(value)["commit"] == "abc" and "secret" not in to_json(value)


def test_containers_are_walked() -> None:
    assert to_json({"k": (Path("x"), {Colour.RED})}) == {"k": ["x", ["red"]]}
    assert to_json([Inner("a")]) == [{"name": "a", "seconds": 0.0}]
