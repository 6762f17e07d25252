"""PyYAML's reading of a file for `patchctl.project.yamlloc`: the document, every value's line,
within the bounds a hostile file is held to (`yamlloc.MAX_*`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ..errors import ConfigError
from .located import MAX_ALIASES, MAX_BYTES, MAX_DEPTH, MAX_VALUES, KeyPath, LocatedDocument, format_keypath

# libyaml's composer when PyYAML was built with it: about six times faster on big matrices.
_COMPOSER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_COLLECTION_TAGS = ("tag:yaml.org,2002:map", "tag:yaml.org,2002:seq", "tag:yaml.org,2002:omap")


def parse(text: str, path: Path, *, merge_keys: bool = False) -> LocatedDocument:
    """Parse TEXT recording every value's line. matrix.yaml is ours and stays plain, so merge
    keys (`<<: *anchor`) are refused unless MERGE_KEYS (for files we only read, such as
    LocalAI's index, which is built from them); explicit keys then win over merged ones."""
    if len(text) > MAX_BYTES:
        raise ConfigError(f"{path}: too large ({len(text)} characters, at most {MAX_BYTES})")
    if "\0" in text:
        raise ConfigError(f"{path}:{text[: text.index(chr(0))].count(chr(10)) + 1}: invalid YAML: NUL character")
    try:
        _check_bounds(text, path)
        root = yaml.compose(text, Loader=_COMPOSER)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark else 1
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{path}:{line}: invalid YAML: {problem}") from None
    doc = LocatedDocument(path, {} if root is None else None)
    if root is not None:
        _check_expansion(root, path)
        doc.data = _Builder(doc, merge_keys).build(root, ())
    return doc


def _check_bounds(text: str, path: Path) -> None:
    """Refuse nesting deeper than MAX_DEPTH and more than MAX_ALIASES aliases, from the event
    stream (libyaml's parser is iterative), before the recursive composer sees the text."""
    try:
        _count_events(text, path)
    except yaml.MarkedYAMLError as exc:
        # libyaml from PyYAML 6.0.4 on stops at its own depth limit (1000) before ours is counted.
        if "nesting depth" not in str(exc.problem):
            raise
        line = exc.problem_mark.line + 1 if exc.problem_mark is not None else 1
        raise ConfigError(f"{path}:{line}: nesting deeper than {MAX_DEPTH} levels") from None


def _count_events(text: str, path: Path) -> None:
    depth = aliases = 0
    for event in yaml.parse(text, Loader=_COMPOSER):
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            if depth > MAX_DEPTH:
                raise ConfigError(f"{path}:{event.start_mark.line + 1}: nesting deeper than {MAX_DEPTH} levels")
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1
        elif isinstance(event, yaml.AliasEvent):
            aliases += 1
            if aliases > MAX_ALIASES:
                raise ConfigError(f"{path}:{event.start_mark.line + 1}: more than {MAX_ALIASES} aliases")


def _check_expansion(root: yaml.Node, path: Path) -> None:
    """Refuse a document whose aliases expand past MAX_VALUES values or MAX_DEPTH levels.
    Shared nodes are measured once (an anchor always precedes its aliases), so this is linear
    in the document however large its expansion."""
    measured: dict[int, tuple[int, int]] = {}  # node id -> (values, height) once expanded
    active: set[int] = set()

    def measure(node: yaml.Node) -> tuple[int, int]:
        if id(node) in measured:
            return measured[id(node)]
        if isinstance(node, yaml.ScalarNode) or id(node) in active:
            return 1, 1  # a recursive alias is reported by the builder
        active.add(id(node))
        children = (
            [child for pair in node.value for child in pair] if isinstance(node, yaml.MappingNode) else node.value
        )
        values, height = 1, 1
        for child in children:
            child_values, child_height = measure(child)
            values, height = values + child_values, max(height, child_height + 1)
            if values > MAX_VALUES:
                raise ConfigError(f"{path}:{node.start_mark.line + 1}: aliases expand to more than {MAX_VALUES} values")
            if height > MAX_DEPTH:
                raise ConfigError(f"{path}:{node.start_mark.line + 1}: aliases nest deeper than {MAX_DEPTH} levels")
        active.discard(id(node))
        measured[id(node)] = values, height
        return values, height

    measure(root)


class _Builder:
    def __init__(self, doc: LocatedDocument, merge_keys: bool):
        self.doc = doc
        self.merge_keys = merge_keys
        self.constructor = yaml.SafeLoader("")
        self.active: set[int] = set()  # nodes being built: an alias back into one recurses
        self.values = 0

    def build(self, node: yaml.Node, keypath: KeyPath) -> Any:
        doc = self.doc
        doc.lines[keypath] = node.start_mark.line + 1
        self.values += 1
        if self.values > MAX_VALUES:
            raise doc.error(keypath, f"aliases expand to more than {MAX_VALUES} values")
        if isinstance(node, yaml.ScalarNode):
            return self._scalar(node, keypath)
        if id(node) in self.active:
            raise ConfigError(f"{doc.path}:{node.start_mark.line + 1}: {format_keypath(keypath)}: recursive alias")
        if node.tag not in _COLLECTION_TAGS:
            raise doc.error(keypath, f"unsupported tag {node.tag!r}")
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
            key = self._scalar(key_node, keypath) if isinstance(key_node, yaml.ScalarNode) else None
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

    def _scalar(self, node: yaml.ScalarNode, keypath: KeyPath) -> Any:
        """A scalar through the safe constructor; an unknown tag (`!foo`, `!!python/...`) or a
        malformed value under a known one is a located error, never a traceback."""
        try:
            return self.constructor.construct_object(node, deep=True)
        except (yaml.YAMLError, ValueError, OverflowError) as exc:
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            raise ConfigError(
                f"{self.doc.path}:{node.start_mark.line + 1}: {format_keypath(keypath)}: {problem}"
            ) from None
