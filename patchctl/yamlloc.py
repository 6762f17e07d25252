"""YAML loading that remembers where every value came from.

Validation errors must name the file, the key path and the line, so the loader keeps a
map from key path (a tuple of keys and list indices) to the 1-based line of that value.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .errors import ConfigError

KeyPath = tuple[Any, ...]


def format_keypath(keypath: KeyPath) -> str:
    out = ""
    for part in keypath:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<root>"


@dataclass
class LocatedDocument:
    """A parsed YAML document plus the line of every value in it."""

    path: Path
    data: Any
    lines: dict[KeyPath, int] = field(default_factory=dict)

    def line_of(self, keypath: KeyPath) -> int:
        """The line of KEYPATH, or of its nearest ancestor that exists."""
        keypath = tuple(keypath)
        while keypath and keypath not in self.lines:
            keypath = keypath[:-1]
        return self.lines.get(keypath, 1)

    def error(self, keypath: KeyPath, message: str) -> ConfigError:
        return ConfigError(f"{self.path}:{self.line_of(keypath)}: {format_keypath(keypath)}: {message}")


# libyaml's composer when PyYAML was built with it: about six times faster on big matrices.
_COMPOSER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def parse(text: str, path: Path, *, merge_keys: bool = False) -> LocatedDocument:
    """Parse TEXT recording every value's line. matrix.yaml is ours and stays plain, so merge
    keys (`<<: *anchor`) are refused unless MERGE_KEYS (for files we only read, such as
    LocalAI's index, which is built from them); explicit keys then win over merged ones."""
    try:
        root = yaml.compose(text, Loader=_COMPOSER)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark else 1
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{path}:{line}: invalid YAML: {problem}") from None
    doc = LocatedDocument(path, {} if root is None else None)
    if root is not None:
        doc.data = _Builder(doc, merge_keys).build(root, ())
    return doc


def load(path: Path, *, merge_keys: bool = False) -> LocatedDocument:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    return parse(text, Path(path), merge_keys=merge_keys)


class _Builder:
    def __init__(self, doc: LocatedDocument, merge_keys: bool):
        self.doc = doc
        self.merge_keys = merge_keys
        self.constructor = yaml.SafeLoader("")
        self.active: set[int] = set()  # nodes being built: an alias back into one recurses

    def build(self, node: yaml.Node, keypath: KeyPath) -> Any:
        doc = self.doc
        doc.lines[keypath] = node.start_mark.line + 1
        if isinstance(node, yaml.ScalarNode):
            return self.constructor.construct_object(node, deep=True)
        if id(node) in self.active:
            raise ConfigError(f"{doc.path}:{node.start_mark.line + 1}: {format_keypath(keypath)}: recursive alias")
        self.active.add(id(node))
        try:
            if isinstance(node, yaml.SequenceNode):
                return [self.build(item, keypath + (i,)) for i, item in enumerate(node.value)]
            return self._mapping(node, keypath)
        finally:
            self.active.discard(id(node))

    def _mapping(self, node: yaml.MappingNode, keypath: KeyPath) -> dict[Any, Any]:
        doc = self.doc
        if self.merge_keys:
            try:
                self.constructor.flatten_mapping(node)
            except yaml.YAMLError as exc:
                raise ConfigError(
                    f"{doc.path}:{node.start_mark.line + 1}: {format_keypath(keypath)}: bad merge: {exc.problem}"
                ) from None
        result: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                raise doc.error(keypath, "YAML merge keys (<<) are not supported")
            key = self.constructor.construct_object(key_node, deep=True)
            if not isinstance(key, (str, int, bool)) or key is None:
                raise ConfigError(
                    f"{doc.path}:{key_node.start_mark.line + 1}: {format_keypath(keypath)}: keys must be scalars"
                )
            if key in result and not self.merge_keys:
                raise ConfigError(
                    f"{doc.path}:{key_node.start_mark.line + 1}: {format_keypath(keypath + (key,))}: duplicate key"
                )
            result[key] = self.build(value_node, keypath + (key,))
        return result
