"""`dataclass`: `dataclasses.dataclass` for patchctl's records, made at a fraction of the cost.

Every command imports patchctl's records before it does anything: a `pin-sync --continue` makes
55 record classes. The standard decorator compiles each method it writes from source, up to six
a class (`__init__`, `__repr__`, `__eq__`, and for a frozen one `__hash__`, `__setattr__` and
`__delattr__`): 28 ms of that `--continue`'s 65 ms of imports, paid by every command, hook and
`--continue`.

Here the standard decorator writes `__init__` alone, and the class gets shared methods that mean
what its own would:
- `__repr__`: `Name(a=1, b='x')`, the fields with `repr=True` in order, `...` where it recurs;
- `__eq__`: the fields with `compare=True` as tuples, against an instance of the very same class;
- `__hash__`: a frozen class hashes those fields (or those with `hash=True`), a mutable one is
  unhashable;
- frozen: no field is assigned or deleted once set, nor any attribute of the class's own
  instances; a frozen class and a mutable one do not inherit from each other.
A class that writes its own `__repr__`, `__eq__` or `__hash__` keeps it. The fields these read are
the ones the class had when decorated, as the standard decorator's code does. `order=True` is the
standard decorator's alone. `tests/patchctl/test_records.py` holds the two side by side, and
checks that patchctl's modules take `dataclass` from here, never from `dataclasses`.
"""

from __future__ import annotations

import dataclasses
import reprlib
from typing import TYPE_CHECKING

_NAMES = "__record_fields__"  # on each record class: (repr fields, compared fields, hashed fields)
_FROZEN = "__record_frozen__"  # on each record class: whether it is frozen


def _names(record: object) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    return getattr(type(record), _NAMES)


@reprlib.recursive_repr()
def _repr(self: object) -> str:
    shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in _names(self)[0])
    return f"{type(self).__qualname__}({shown})"


def _eq(self: object, other: object) -> bool:
    if other.__class__ is not self.__class__:
        return NotImplemented
    compared = _names(self)[1]
    return tuple(getattr(self, name) for name in compared) == tuple(getattr(other, name) for name in compared)


def _hash(self: object) -> int:
    return hash(tuple(getattr(self, name) for name in _names(self)[2]))


def _frozen(cls: type, fields: frozenset[str]) -> None:
    """dataclass's frozen rule, without compiling it: no field of CLS is assigned or deleted once
    set, nor any attribute of an instance of CLS itself (its subclasses may add their own).
    `__init__` sets each field the first time, which is how dataclass's own `__init__` is let
    through (it calls `object.__setattr__`)."""

    def __setattr__(self, name, value):
        if name in fields and name not in self.__dict__:
            object.__setattr__(self, name, value)  # the first time: __init__, or a field it leaves unset
        elif type(self) is cls or name in fields:
            raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
        else:
            super(cls, self).__setattr__(name, value)

    def __delattr__(self, name):
        if type(self) is cls or name in fields:
            raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    cls.__setattr__, cls.__delattr__ = __setattr__, __delattr__  # type: ignore[method-assign, assignment]


def _record(cls: type, frozen: bool, order: bool) -> type:
    if order:
        return dataclasses.dataclass(cls, frozen=frozen, order=True)
    own = dict(cls.__dict__)  # what the class body wrote, before dataclass adds to it
    # The standard rule: among the dataclasses it inherits from (records or not), a frozen
    # class needs a frozen one, and a mutable class none.
    bases = [base for base in cls.__mro__[1:] if hasattr(base, "__dataclass_fields__")]
    if bases and any(getattr(base, _FROZEN, base.__dataclass_params__.frozen) for base in bases) != frozen:
        wrong = "frozen dataclass from a non-frozen one" if frozen else "non-frozen dataclass from a frozen one"
        raise TypeError(f"cannot inherit {wrong}")
    if frozen and ("__setattr__" in own or "__delattr__" in own):
        raise TypeError(f"cannot overwrite __setattr__ or __delattr__ in frozen class {cls.__name__}")
    dataclasses.dataclass(cls, repr=False, eq=False)
    fields = dataclasses.fields(cls)
    setattr(
        cls,
        _NAMES,
        (
            tuple(f.name for f in fields if f.repr),
            tuple(f.name for f in fields if f.compare),
            tuple(f.name for f in fields if (f.compare if f.hash is None else f.hash)),
        ),
    )
    setattr(cls, _FROZEN, frozen)
    if frozen:
        _frozen(cls, frozenset(f.name for f in fields))
    if "__repr__" not in own:
        cls.__repr__ = _repr  # type: ignore[assignment]
    if "__eq__" not in own:
        cls.__eq__ = _eq  # type: ignore[assignment]
    # dataclass's rule: a class body's own __hash__ stays (the None Python sets beside an own
    # __eq__ is not one); else frozen hashes its fields and mutable is unhashable.
    explicit_hash = "__hash__" in own and not (own["__hash__"] is None and "__eq__" in own)
    if not explicit_hash:
        cls.__hash__ = _hash if frozen else None  # type: ignore[assignment]
    return cls


if TYPE_CHECKING:
    from dataclasses import dataclass  # what editors and type checkers should take it for
else:

    def dataclass(cls=None, /, *, frozen=False, order=False):
        """`@dataclass` or `@dataclass(frozen=True)`: a dataclass (see the module's docstring)."""
        if cls is None:
            return lambda cls: _record(cls, frozen, order)
        return _record(cls, frozen, order)
