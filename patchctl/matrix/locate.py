"""Located YAML for files patchctl does not own (LocalAI's backend matrix and index).

`patchctl.yamlloc` refuses merge keys on purpose: matrix.yaml is ours and must stay plain.
LocalAI's backend/index.yaml is built from anchors and `!!merge <<: *anchor`, so this loader
resolves merges while still recording the line of every value. It composes with libyaml
when PyYAML has it, which keeps a large real-world matrix fast.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ..errors import ConfigError
from ..yamlloc import KeyPath, LocatedDocument, format_keypath

_COMPOSER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load(path: Path) -> LocatedDocument:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    return parse(text, Path(path))


def parse(text: str, path: Path) -> LocatedDocument:
    try:
        root = yaml.compose(text, Loader=_COMPOSER)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark else 1
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{path}:{line}: invalid YAML: {problem}") from None
    doc = LocatedDocument(path, {} if root is None else None)
    if root is not None:
        constructor = yaml.SafeLoader("")
        doc.data = _build(root, (), doc, constructor, set())
    return doc


def _build(node: yaml.Node, keypath: KeyPath, doc: LocatedDocument, constructor: yaml.SafeLoader, active: set[int]) -> Any:
    doc.lines[keypath] = node.start_mark.line + 1
    if id(node) in active:
        raise ConfigError(f"{doc.path}:{node.start_mark.line + 1}: {format_keypath(keypath)}: recursive alias")
    if isinstance(node, yaml.MappingNode):
        try:
            constructor.flatten_mapping(node)
        except yaml.YAMLError as exc:
            raise ConfigError(f"{doc.path}:{node.start_mark.line + 1}: {format_keypath(keypath)}: bad merge: {exc.problem}") from None
        active.add(id(node))
        result: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = constructor.construct_object(key_node, deep=True)
            if not isinstance(key, (str, int, bool)):
                raise ConfigError(f"{doc.path}:{key_node.start_mark.line + 1}: {format_keypath(keypath)}: keys must be scalars")
            # After a merge, explicit keys come last and win, as YAML's merge semantics say.
            result[key] = _build(value_node, keypath + (key,), doc, constructor, active)
        active.discard(id(node))
        return result
    if isinstance(node, yaml.SequenceNode):
        active.add(id(node))
        items = [_build(item, keypath + (i,), doc, constructor, active) for i, item in enumerate(node.value)]
        active.discard(id(node))
        return items
    return constructor.construct_object(node, deep=True)
