"""patchctl's `dataclass` (`patchctl.records`) beside the standard one: the same classes declared
with each behave the same (repr, equality, hashing, frozen, inheritance, the dataclasses
functions), and patchctl's modules never take the standard one."""

from __future__ import annotations

import ast
import copy
import dataclasses
import math
import pickle
from collections.abc import Callable
from pathlib import Path

import pytest

import patchctl
from patchctl import records

PACKAGE = Path(patchctl.__file__).parent
DECORATORS = {"standard": dataclasses.dataclass, "patchctl": records.dataclass}


def declare(decorate: Callable, frozen: bool) -> dict[str, type]:
    """The same family of classes, declared with DECORATE."""

    @decorate(frozen=frozen)
    class Point:
        x: int
        y: float = 0.0
        tags: list = dataclasses.field(default_factory=list, compare=False)
        secret: str = dataclasses.field(default="s", repr=False)
        weight: int = dataclasses.field(default=1, hash=False)

    @decorate(frozen=frozen)
    class Point3(Point):
        z: int = 0

    class Plain(Point):  # a subclass that is no dataclass: the parent's methods, the parent's fields
        pass

    @decorate(frozen=frozen)
    class OwnMethods:
        a: int

        def __repr__(self) -> str:
            return "own repr"

        def __eq__(self, other: object) -> bool:
            return True

        def __hash__(self) -> int:
            return 7

    @decorate(frozen=frozen)
    class OwnEq:
        a: int

        def __eq__(self, other: object) -> bool:
            return isinstance(other, OwnEq)

    @decorate(frozen=frozen)
    class Node:
        value: int
        children: list = dataclasses.field(default_factory=list)

    @decorate(frozen=frozen)
    class Empty:
        pass

    @decorate(frozen=frozen)
    class Later:
        a: int
        b: int = dataclasses.field(init=False, default=5)

        def __post_init__(self) -> None:
            object.__setattr__(self, "derived", self.a * 2)

    return {cls.__name__: cls for cls in (Point, Point3, Plain, OwnMethods, OwnEq, Node, Empty, Later)}


def outcome(action: Callable[[], object]) -> object:
    """What ACTION returns, or the type and message of what it raises."""
    try:
        return action()
    except Exception as exc:  # noqa: BLE001 - the exception is the outcome compared
        return (type(exc).__name__, str(exc))


def behaviour(classes: dict[str, type]) -> list[object]:
    """Everything the tests compare between the two decorators, in order."""
    Point, Point3, Plain, Node = classes["Point"], classes["Point3"], classes["Plain"], classes["Node"]
    p, q, r = Point(1, 2.0, ["a"], "x", 3), Point(1, 2.0, ["b"], "y", 4), Point(2)
    nan = Point(1, math.nan)
    node = Node(1)
    node.children.append(node)  # a record that holds itself
    seen: list[object] = [
        repr(p),
        repr(Point3(1, z=3)),
        repr(Plain(5)),
        repr(classes["Empty"]()),
        repr(classes["OwnMethods"](1)),
        repr(node),
        p == q,  # tags and secret differ; tags is not compared, secret is
        p == Point(1, 2.0, ["other"], "x", 3),  # only tags differ
        Point(1, 2.0, ["a"], "x", 9) == p,
        p == r,
        p == Point3(1, 2.0, ["a"], "x", 3),  # a subclass is never equal
        Plain(1) == Point(1),
        nan == nan,  # the same NaN object in both tuples
        Point(1, math.nan) == Point(1, math.nan),
        p.__eq__(object()),
        classes["OwnMethods"](1) == classes["OwnMethods"](2),
        classes["OwnEq"](1) == classes["OwnEq"](2),
        outcome(lambda: hash(Point(1, 2.0, ["a"], "x", 3)) == hash(Point(1, 2.0, ["z"], "x", 4))),
        outcome(lambda: hash(Point(1)) == hash(Point(2))),
        outcome(lambda: hash(classes["OwnMethods"](1))),
        outcome(lambda: hash(classes["OwnEq"](1)) == hash(classes["OwnEq"](1))),
        outcome(lambda: hash(classes["Empty"]())),
        outcome(lambda: setattr(p, "x", 5)),
        outcome(lambda: setattr(p, "other", 5)),
        outcome(lambda: delattr(p, "y")),
        outcome(lambda: setattr(Plain(1), "other", 5)),
        outcome(lambda: setattr(Plain(1), "x", 5)),
        dataclasses.replace(p, x=7),
        dataclasses.asdict(p),
        dataclasses.astuple(Point3(1, z=2)),
        [f.name for f in dataclasses.fields(Point3)],
        copy.copy(p) == p,
        copy.deepcopy(p) == p,
        outcome(lambda: pickle.loads(pickle.dumps(p)) == p),  # (a local class: refused by both alike)
        outcome(lambda: (lambda later: (later.a, later.b, later.__dict__.get("derived")))(classes["Later"](3))),
        outcome(lambda: Point()),  # a missing argument: __init__ is the standard one's
        Point.__match_args__,
        p.x,
        p.tags,
    ]
    return seen


@pytest.mark.parametrize("frozen", [False, True], ids=["mutable", "frozen"])
def test_patchctl_dataclass_behaves_as_the_standard_one(frozen: bool) -> None:
    standard = behaviour(declare(DECORATORS["standard"], frozen))
    ours = behaviour(declare(DECORATORS["patchctl"], frozen))
    for position, (theirs, mine) in enumerate(zip(standard, ours, strict=True)):
        if dataclasses.is_dataclass(theirs):  # instances of the two families: compared by their fields
            theirs, mine = (
                (type(theirs).__name__, dataclasses.astuple(theirs)),
                (type(mine).__name__, dataclasses.astuple(mine)),
            )
        assert mine == theirs, f"item {position} of `behaviour`"


def test_a_frozen_record_refuses_each_kind_of_change() -> None:
    @records.dataclass(frozen=True)
    class Pin:
        upstream: str
        commit: str = ""

    pin = Pin("llama.cpp", "abc")
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'commit'"):
        pin.commit = "def"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot delete field 'upstream'"):
        del pin.upstream  # type: ignore[misc]
    assert (pin.upstream, pin.commit) == ("llama.cpp", "abc")
    assert {pin, Pin("llama.cpp", "abc")} == {pin}


def test_frozen_and_mutable_records_do_not_inherit_from_each_other() -> None:
    for decorate in DECORATORS.values():

        @decorate(frozen=True)
        class Frozen:
            a: int

        @decorate
        class Mutable:
            a: int

        with pytest.raises(TypeError, match="cannot inherit non-frozen dataclass from a frozen one"):
            decorate(type("Sub", (Frozen,), {"__annotations__": {"b": "int"}}))
        with pytest.raises(TypeError, match="cannot inherit frozen dataclass from a non-frozen one"):
            decorate(frozen=True)(type("Sub", (Mutable,), {"__annotations__": {"b": "int"}}))
    # Across the two decorators too: the rule reads whichever made the base.
    with pytest.raises(TypeError, match="cannot inherit frozen dataclass from a non-frozen one"):
        records.dataclass(frozen=True)(type("Sub", (dataclasses.dataclass(type("M", (), {})),), {}))
    with pytest.raises(TypeError, match="cannot inherit non-frozen dataclass from a frozen one"):
        records.dataclass(type("Sub", (dataclasses.dataclass(frozen=True)(type("F", (), {})),), {}))


def test_a_frozen_record_may_not_write_its_own_setattr() -> None:
    class Own:
        a: int

        def __setattr__(self, name: str, value: object) -> None:
            object.__setattr__(self, name, value)

    with pytest.raises(TypeError, match="__setattr__"):
        records.dataclass(frozen=True)(Own)


def test_an_ordered_record_is_the_standard_ones() -> None:
    @records.dataclass(frozen=True, order=True)
    class Ranked:
        rank: int
        name: str

    assert sorted([Ranked(2, "b"), Ranked(1, "z")])[0] == Ranked(1, "z")
    assert "__record_fields__" not in Ranked.__dict__


def test_patchctl_modules_take_dataclass_from_records() -> None:
    """A module that declares records with the standard decorator pays for six compiled methods a
    class at every start: patchctl's modules use `patchctl.records.dataclass`."""
    offenders, declared = [], 0
    for path in sorted(set(PACKAGE.rglob("*.py")) - {PACKAGE / "records.py"}):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "dataclasses" and node.level == 0:
                offenders += [f"{path.relative_to(PACKAGE)}: from dataclasses import dataclass"] * any(
                    alias.name == "dataclass" for alias in node.names
                )
            elif (
                isinstance(node, ast.Attribute)
                and node.attr == "dataclass"
                and getattr(node.value, "id", "") == "dataclasses"
            ):
                offenders.append(f"{path.relative_to(PACKAGE)}: dataclasses.dataclass")
            elif isinstance(node, ast.ClassDef):
                declared += any("dataclass" in ast.unparse(d) for d in node.decorator_list)
    assert offenders == []
    assert declared > 100  # the check read patchctl's records
