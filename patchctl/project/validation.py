"""Located validation of a YAML document: one small class that matrix.yaml's own sections
(`config`) and its build-matrix sections (`matrix.schema`) both read through, so that every
error has the same shape: `FILE:LINE: key.path: message`."""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError
from .yamlloc import KeyPath, LocatedDocument

MAX_INT = 10**7  # timeouts in seconds: beyond this (about four months) a value is a typo or hostile


def kind(value: Any) -> str:
    """What VALUE is, in the words of an error message."""
    return {
        dict: "a mapping",
        list: "a list",
        str: "a string",
        bool: "a boolean",
        int: "an integer",
        float: "a number",
    }.get(type(value), "nothing" if value is None else type(value).__name__)


class Validator:
    """Typed, located access to the values of one document; every failure is a ConfigError
    naming the file, the line and the key path."""

    def __init__(self, doc: LocatedDocument):
        self.doc = doc

    def error(self, keypath: KeyPath, message: str) -> ConfigError:
        return self.doc.error(keypath, message)

    def line(self, keypath: KeyPath) -> int:
        return self.doc.line_of(keypath)

    def at(self, keypath: KeyPath) -> Any:
        """The value at KEYPATH (which must exist)."""
        value = self.doc.data
        for part in keypath:
            value = value[part]
        return value

    def mapping(self, value: Any, keypath: KeyPath, allowed: tuple[str, ...], required: tuple[str, ...] = ()) -> dict:
        if not isinstance(value, dict):
            raise self.error(keypath, f"must be a mapping, got {kind(value)}")
        for key in value:
            if key not in allowed:
                raise self.error(keypath + (key,), f"unknown key (allowed: {', '.join(allowed)})")
        for key in required:
            if key not in value:
                raise self.error(keypath, f"missing required key {key!r}")
        return value

    def sequence(self, value: Any, keypath: KeyPath) -> list:
        if not isinstance(value, list):
            raise self.error(keypath, f"must be a list, got {kind(value)}")
        return value

    # The keyed readers below take the keypath of a mapping already checked with `mapping`.

    def string(self, keypath: KeyPath, key: str, default: str | None = None, *, required: bool = True) -> str | None:
        """A non-empty string; DEFAULT (or None when not REQUIRED) when the key is absent."""
        data = self.at(keypath)
        if key not in data:
            if required and default is None:
                raise self.error(keypath, f"missing required key {key!r}")
            return default
        value = data[key]
        if not isinstance(value, str) or not value.strip():
            raise self.error(keypath + (key,), f"must be a non-empty string, got {kind(value)}")
        if "\0" in value:
            raise self.error(keypath + (key,), "NUL character in the value")
        return value

    def boolean(self, keypath: KeyPath, key: str, default: bool) -> bool:
        value = self.at(keypath).get(key, default)
        if not isinstance(value, bool):
            raise self.error(keypath + (key,), f"must be true or false, got {kind(value)}")
        return value

    def positive_int(self, keypath: KeyPath, key: str, default: int) -> int:
        value = self.at(keypath).get(key, default)
        if not isinstance(value, int) or isinstance(value, bool) or not 0 < value <= MAX_INT:
            raise self.error(keypath + (key,), f"must be an integer from 1 to {MAX_INT}, got {value!r}")
        return value

    def optional_list(self, keypath: KeyPath, key: str) -> list[Any]:
        """The list under KEY, or [] when the key is absent."""
        return self.sequence(self.at(keypath).get(key, []), keypath + (key,))
