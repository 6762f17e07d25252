"""YAML loading that remembers where every value came from.

Validation errors must name the file, the key path and the line, so the loader keeps a
map from key path (a tuple of keys and list indices) to the 1-based line of that value.
PyYAML reads a file (`patchctl.project.yamlparse`) the first time patchctl meets its bytes;
after that, `patchctl.project.parsed_cache` gives the same document without it.
"""

from __future__ import annotations

from pathlib import Path

from ..confined import Root
from ..errors import ConfigError
from .located import MAX_ALIASES, MAX_BYTES, MAX_DEPTH, MAX_VALUES, KeyPath, LocatedDocument, format_keypath

__all__ = [
    "MAX_ALIASES",
    "MAX_BYTES",
    "MAX_DEPTH",
    "MAX_VALUES",
    "KeyPath",
    "LocatedDocument",
    "format_keypath",
    "load",
    "parse",
]


def load(path: Path, *, merge_keys: bool = False) -> LocatedDocument:
    try:
        # Never through a link (a committed matrix.yaml that points elsewhere), never a FIFO: one line.
        data = Root(Path(path).parent).read_bytes(Path(path).name, MAX_BYTES)
        if data is None:
            raise FileNotFoundError(path)
        text = data.decode("utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    from . import parsed_cache

    cached = parsed_cache.read(data, merge_keys)
    if cached is not None:
        return LocatedDocument(Path(path), *cached)
    doc = parse(text, Path(path), merge_keys=merge_keys)
    parsed_cache.write(data, merge_keys, doc.data, doc.lines)
    return doc


def parse(text: str, path: Path, *, merge_keys: bool = False) -> LocatedDocument:
    """TEXT parsed (`patchctl.project.yamlparse.parse`), every value's line recorded."""
    from .yamlparse import parse as parse_yaml

    return parse_yaml(text, path, merge_keys=merge_keys)
