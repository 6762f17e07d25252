"""Results as JSON: one serializer for every result dataclass, instead of a `to_json` each.

`to_json` turns a dataclass into a dict of its fields, recursively: Path becomes str, an
Enum its value, tuples and sets lists. A field can say how it is written through its
metadata (build it with `json_field`):

    name     the key to write it under (default: the field's name)
    omit     leave it out
    omit_empty  leave it out when it is falsy (None, "", [])
    digits   round floats in it to this many digits (also inside lists and dicts)
    encode   a function applied to the value first (e.g. pairs -> [{from, to}])

Derived values (properties such as `ok`) are added through a class attribute
`JSON_PROPERTIES: ClassVar[dict[str, str]]`, mapping key -> attribute name.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from enum import Enum
from pathlib import PurePath
from typing import Any

_METADATA_KEY = "patchctl.json"


def json_field(
    *,
    name: str | None = None,
    omit: bool = False,
    omit_empty: bool = False,
    digits: int | None = None,
    encode: Callable[[Any], Any] | None = None,
    **field_kwargs: Any,
) -> Any:
    """A dataclasses.field whose metadata tells `to_json` how to write it."""
    options = {"name": name, "omit": omit, "omit_empty": omit_empty, "digits": digits, "encode": encode}
    return dataclasses.field(metadata={_METADATA_KEY: options}, **field_kwargs)


def to_json(value: Any) -> Any:
    """VALUE as plain JSON data (dicts, lists, str, int, float, bool, None)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _dataclass_to_json(value)
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, dict):
        return {key: to_json(item) for key, item in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_json(item) for item in value]
    return value


def _dataclass_to_json(value: Any) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for field in dataclasses.fields(value):
        options = field.metadata.get(_METADATA_KEY, {})
        if options.get("omit"):
            continue
        item = getattr(value, field.name)
        if options.get("omit_empty") and not item:
            continue
        if options.get("encode") is not None:
            item = options["encode"](item)
        item = to_json(item)
        if options.get("digits") is not None:
            item = _rounded(item, options["digits"])
        data[options.get("name") or field.name] = item
    for key, attribute in getattr(value, "JSON_PROPERTIES", {}).items():
        data[key] = to_json(getattr(value, attribute))
    return data


def _rounded(value: Any, digits: int) -> Any:
    if isinstance(value, float):
        return round(value, digits)
    if isinstance(value, dict):
        return {key: _rounded(item, digits) for key, item in value.items()}
    if isinstance(value, list):
        return [_rounded(item, digits) for item in value]
    return value
