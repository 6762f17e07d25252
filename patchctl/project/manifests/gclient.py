"""A gclient `DEPS` file (Chromium's dependency list, as Electron keeps its own): a `vars` dict
and a `deps` dict whose entries fetch `URL@REVISION`, written with `Var('name')` and `+`:

    vars = {'nodejs_git': 'https://github.com/nodejs', 'nan_version': 'e14bdcd1...'}
    deps = {'src/third_party/nan': {'url': (Var("nodejs_git")) + '/nan.git@' + (Var("nan_version"))}}

DEPS is Python syntax, but it is never run: it is parsed (`ast`) and only literals, `Var()`,
`Str()`, `+`, dicts and lists are read; anything else is a value patchctl does not know. A
pin moves the string of the `vars` entry that holds the revision (a commit, or a tag such as
Chromium's `135.0.7049.7`), in place.
"""

from __future__ import annotations

import ast
from dataclasses import field

from ...records import dataclass
from .base import Literal, ManifestError, PinState, is_abbreviation, replace_literals

MAX_DEPS_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class Dependency:
    path: str  # where gclient checks it out ('src/third_party/nan')
    url: str  # the repository, Var()s expanded
    revision: str  # the revision after '@', expanded
    revision_var: str | None  # the `vars` entry it is read from, when it is one
    line: int


@dataclass
class Deps:
    path: str
    text: str
    vars: dict[str, Literal] = field(default_factory=dict)
    deps: dict[str, Dependency] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def read(path: str, text: str) -> Deps:
    if len(text) > MAX_DEPS_BYTES:
        raise ManifestError(f"{path}: larger than {MAX_DEPS_BYTES // 1024 // 1024} MiB, not a DEPS file")
    try:
        module = ast.parse(text, path)
    except (SyntaxError, ValueError, RecursionError) as exc:
        raise ManifestError(f"{path}:{getattr(exc, 'lineno', 1) or 1}: not a DEPS file gclient reads: {exc}") from None
    deps = Deps(path, text)
    offsets = _line_offsets(text)
    assignments = {
        node.targets[0].id: node.value
        for node in module.body
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
    }
    variables = assignments.get("vars")
    if isinstance(variables, ast.Dict):
        for key, value in zip(variables.keys, variables.values, strict=True):
            if isinstance(key, ast.Constant) and isinstance(key.value, str) and _is_string(value):
                start = _offset(text, offsets, value.lineno, value.col_offset)
                end = _offset(text, offsets, value.end_lineno or value.lineno, value.end_col_offset or 0)
                quote = 2 if text[start : start + 1] in ("r", "u", "R", "U") else 1
                if text[start + quote : end - 1] == value.value and text[end - 1 : end] in ("'", '"'):
                    deps.vars[key.value] = Literal(key.value, value.value, value.lineno, start + quote, end - 1)
                else:  # escapes, implicit concatenation, triple quotes: read, but not rewritten in place
                    deps.notes.append(f"{path}:{value.lineno}: vars {key.value!r} is not one plain string literal")
    entries = assignments.get("deps")
    if isinstance(entries, ast.Dict):
        for key, value in zip(entries.keys, entries.values, strict=True):
            if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                continue
            url_node: ast.AST | None = value
            if isinstance(value, ast.Dict):
                fields = zip(value.keys, value.values, strict=True)
                url_node = next((v for k, v in fields if isinstance(k, ast.Constant) and k.value == "url"), None)
            if url_node is None:
                continue  # a CIPD or GCS dependency: no git URL
            try:
                parts = _parts(url_node)
            except ValueError as exc:
                deps.notes.append(f"{path}:{key.lineno}: {key.value}: {exc}")
                continue
            dependency = _dependency(key.value, parts, deps, key.lineno)
            if dependency is not None:
                deps.deps[key.value] = dependency
    return deps


def _is_string(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _parts(node: ast.AST) -> list[tuple[str, str]]:
    """A URL expression as ('text', literal) and ('var', name) pieces, in order."""
    if _is_string(node):
        return [("text", node.value)]  # type: ignore[attr-defined]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _parts(node.left) + _parts(node.right)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("Var", "Str")
        and len(node.args) == 1
        and _is_string(node.args[0])
        and not node.keywords
    ):
        name = node.args[0].value  # type: ignore[attr-defined]
        return [("var", name)] if node.func.id == "Var" else [("text", name)]
    raise ValueError(f"a URL gclient computes in a way patchctl does not read ({ast.dump(node)[:60]}...)")


def _dependency(path: str, parts: list[tuple[str, str]], deps: Deps, line: int) -> Dependency | None:
    url, revision, revision_var, after = "", "", None, False
    for kind, value in parts:
        text = value if kind == "text" else deps.vars[value].value if value in deps.vars else None
        if text is None:
            deps.notes.append(f"{deps.path}:{line}: {path}: Var({value!r}) is not a string in vars")
            return None
        if after:
            revision += text
            revision_var = value if kind == "var" and revision == text else None
            continue
        if "@" in text:
            head, _, tail = text.partition("@")
            url += head
            revision, after = tail, True
            revision_var = None
            continue
        url += text
    return Dependency(path, url, revision, revision_var if revision else None, line)


def _line_offsets(text: str) -> list[int]:
    offsets, total = [], 0
    for line in text.splitlines(keepends=True):
        offsets.append(total)
        total += len(line)
    return offsets or [0]


def _offset(text: str, offsets: list[int], lineno: int, col: int) -> int:
    """ast's line and column (UTF-8 bytes) as a character offset in TEXT."""
    start = offsets[lineno - 1]
    line = text[start : offsets[lineno] if lineno < len(offsets) else len(text)]
    return start + len(line.encode("utf-8")[:col].decode("utf-8", errors="ignore"))


def revision_literal(deps: Deps, var: str) -> Literal:
    if var not in deps.vars:
        raise ManifestError(f"{deps.path}:1: vars has no string entry {var!r}")
    return deps.vars[var]


def disagreements(deps: Deps, var: str, state: PinState) -> list[tuple[int, str]]:
    literal = revision_literal(deps, var)
    if literal.value in (state.commit, state.tag) or is_abbreviation(literal.value, state.commit):
        return []
    return [(literal.line, f"vars {var!r} is {literal.value!r}, neither the pin nor its tag")]


def moved(deps: Deps, var: str, old: PinState, new: PinState) -> str:
    literal = revision_literal(deps, var)
    if literal.value == old.commit:
        value = new.commit
    elif is_abbreviation(literal.value, old.commit):
        value = new.commit[: len(literal.value)]
    elif old.tag is not None and literal.value == old.tag and new.tag is not None:
        value = new.tag
    else:
        raise ManifestError(
            f"{deps.path}:{literal.line}: vars {var!r} is {literal.value!r}, neither the pinned commit "
            f"{old.commit[:12]} nor its tag"
        )
    return replace_literals(deps.text, {literal: value})
