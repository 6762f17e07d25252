"""rsync's filter rules, read and matched as rsync 3 reads them (`-f RULE`, and a file
`merge FILE` reads): what a `vendor:` copy's `filter:` says it copies and protects.

A rule is `include`/`+`, `exclude`/`-`, `hide`/`H`, `show`/`S`, `protect`/`P`, `risk`/`R`,
`merge`/`.` (read FILE's rules in place) or `clear`/`!` (drop the rules so far), then one space
or `_`, then a pattern; the modifiers `!` (the pattern does not match), `s` (sender side only)
and `r` (receiver side only) are read too. In a file, a line starting with `#` or `;` is a
comment and a blank line is skipped. Every other rule (`dir-merge`, the merge modifiers
`-+Cenw`, `/`, `p`) is refused with a `FilterError` that names it.

A pattern is matched as rsync's `rule_matches` does (exclude.c, wildmatch.c): `*` and `?` stay
within one name, `**` crosses `/`, `[...]` is a class (never `/`); a pattern ending in `/`
matches directories only; one starting with `/` is anchored at the transfer root; one with
no `/` and no `**` matches the last name at any depth; one with an inner `/` matches as many
trailing names as it has; `dir/***` matches the directory and everything in it.

What the sender copies (`sends`): every directory above a file must pass the rules (a
directory that is excluded is not entered), then the file; the first rule that matches
decides (hide/exclude: not copied, show/include: copied), none matching copies it. What the
receiver keeps (`protects`): the first matching rule of the receiver's (include, exclude,
protect, risk) is exclude or protect.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import field, replace
from functools import lru_cache
from pathlib import Path

from ..confined import Refused, Root
from ..records import dataclass

MAX_FILTER_FILE_BYTES = 1024 * 1024  # an rsync filter file holds tens of rules
MAX_FILTER_RULES = 10_000  # a filter file of a vendoring project has tens
MAX_MERGE_DEPTH = 8  # a merge file that merges a file that merges ...
MAX_MERGE_FILES = 32  # merge rules read in all, so that no file can merge another a thousand times

_LONG_NAMES = {
    "clear": "!",
    "dir-merge": ":",
    "exclude": "-",
    "hide": "H",
    "include": "+",
    "merge": ".",
    "protect": "P",
    "risk": "R",
    "show": "S",
}
_SIDED = {"H", "S", "P", "R"}  # the rule names that say their side themselves
# (applies to the sender, applies to the receiver) of a sided rule name, or of a modifier (S, R)
_SIDES = {"H": (True, False), "S": (True, False), "P": (False, True), "R": (False, True)}
_POSIX_CLASSES = {
    "alnum": "a-zA-Z0-9",
    "alpha": "a-zA-Z",
    "blank": " \\t",
    "cntrl": "\\x00-\\x1f\\x7f",
    "digit": "0-9",
    "graph": "\\x21-\\x7e",
    "lower": "a-z",
    "print": "\\x20-\\x7e",
    "punct": re.escape("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"),
    "space": " \\t\\n\\r\\f\\v",
    "upper": "A-Z",
    "xdigit": "0-9A-Fa-f",
}


class FilterError(ValueError):
    """A rule patchctl cannot read; the message names it (and FILE:LINE when it is in a file).
    INDEX is the position, in the list `parse` was given, of the rule that led to it."""

    index: int = 0


@dataclass(frozen=True)
class Rule:
    text: str  # as written
    where: str  # FILE:LINE, or '' for a rule given inline
    include: bool  # include/show/risk: True; exclude/hide/protect: False
    sender: bool  # decides what is copied
    receiver: bool  # decides what is kept from deletion
    negate: bool
    pattern: str

    def matches(self, name: str, is_dir: bool) -> bool:
        """Whether this rule matches the path NAME (relative to the transfer root)."""
        return _matches(self.pattern, self.negate, name, is_dir)


@dataclass(frozen=True)
class RsyncFilter:
    given: tuple[str, ...]  # the rules as given (`-f` arguments), merge rules included
    rules: tuple[Rule, ...]  # in order, each merge file's rules in its place
    files: tuple[str, ...] = ()  # the filter files read (repository paths), in order
    _sent_dirs: dict[str, bool] = field(default_factory=dict, compare=False, hash=False, repr=False)

    def first(self, name: str, is_dir: bool, *, receiver: bool = False) -> Rule | None:
        """The rule that decides NAME on the sender's side (or the RECEIVER's), or None."""
        for rule in self.rules:
            if (rule.receiver if receiver else rule.sender) and rule.matches(name, is_dir):
                return rule
        return None

    def sends(self, path: str, is_dir: bool = False) -> bool:
        """Whether rsync copies the file PATH (relative to the transfer root)."""
        parts = path.split("/")
        for depth in range(1, len(parts)):
            directory = "/".join(parts[:depth])
            sent = self._sent_dirs.get(directory)
            if sent is None:
                sent = self._sent_dirs[directory] = self._passes(directory, True)
            if not sent:
                return False
        return self._passes(path, is_dir)

    def protects(self, path: str) -> bool:
        """Whether the receiver keeps its own file PATH (`protect`, or `exclude` on both sides)."""
        rule = self.first(path, False, receiver=True)
        return rule is not None and not rule.include

    def _passes(self, name: str, is_dir: bool) -> bool:
        rule = self.first(name, is_dir)
        return rule is None or rule.include


# ------------------------------------------------------------------ reading rules


def parse(rules: list[str], read: Callable[[str], str]) -> RsyncFilter:
    """The filter of RULES (each as `-f` gives it); READ(PATH) is the text of a merge file
    (it raises FilterError when the file cannot be read). FilterError names a rule it refuses."""
    reader = _Reader(read)
    for index, text in enumerate(rules):
        try:
            reader.add(text, "", 0)
        except FilterError as exc:
            exc.index = index
            raise
    return RsyncFilter(tuple(rules), tuple(reader.rules), tuple(reader.files))


def load(root: Path, rules: list[str], limit: int = MAX_FILTER_FILE_BYTES) -> RsyncFilter:
    """The filter of RULES, whose merge files are repository paths below ROOT, read through
    `Root` (no link, at most LIMIT bytes each)."""
    confined = Root(root)

    def read(path: str) -> str:
        if path.startswith("/"):
            raise FilterError(f"merge file {path}: give a path relative to the repository's root")
        try:
            data = confined.read_bytes(path, limit)
        except Refused as exc:
            raise FilterError(str(exc)) from None
        if data is None:
            raise FilterError(f"the filter file {path} does not exist")
        return data.decode("utf-8", errors="surrogateescape")

    loaded = parse(rules, read)
    return replace(loaded, files=tuple("/".join(confined.parts(f)) for f in loaded.files))


@dataclass
class _Reader:
    """The rules read so far, bounded: a filter file is the repository's, so untrusted."""

    read: Callable[[str], str]
    rules: list[Rule] = field(default_factory=list)
    files: list[str] = field(default_factory=list)  # every merge file read, once per merge rule
    lines: int = 0

    def add(self, text: str, where: str, depth: int) -> None:
        kind, modifiers, pattern = split_rule(text, where)
        shown = f"{where}: " if where else ""
        self.lines += 1
        if self.lines > MAX_FILTER_RULES:
            raise FilterError(f"{shown}more than {MAX_FILTER_RULES:,} filter rules")
        if kind == "!":
            self.rules.clear()  # rsync's `clear`: the list so far, merged files' rules included
        elif kind == ".":
            if depth >= MAX_MERGE_DEPTH or len(self.files) >= MAX_MERGE_FILES:
                raise FilterError(
                    f"{shown}rule {text!r}: more than {MAX_MERGE_FILES} merge files, or nested more than "
                    f"{MAX_MERGE_DEPTH} deep (a loop?)"
                )
            self.files.append(pattern)
            for number, line in enumerate(re.split(r"\r\n|\r|\n", self.read(pattern)), 1):
                if line and line[0] not in "#;":
                    self.add(line, f"{pattern}:{number}", depth + 1)
        else:
            sender, receiver = _SIDES.get(kind, (True, True))
            for modifier in modifiers.replace("!", ""):
                sender, receiver = _SIDES[modifier.upper()]
            self.rules.append(Rule(text, where, kind in "+SR", sender, receiver, "!" in modifiers, pattern))


def split_rule(text: str, where: str = "") -> tuple[str, str, str]:
    """(rule as its one-character name, modifiers, pattern) of one rule, as rsync's
    `parse_rule_tok` splits it; FilterError for a rule patchctl does not read."""
    shown = f"{where}: " if where else ""
    if not text:
        raise FilterError(f"{shown}an empty filter rule")
    for name, short in _LONG_NAMES.items():
        if text.startswith(name) and (len(text) == len(name) or text[len(name)] in " _,\t"):
            kind, rest = short, text[len(name) :]
            break
    else:
        kind, rest = text[0], text[1:]
    if kind not in "+-HSPR.!:":
        raise FilterError(f"{shown}unknown filter rule {text!r}")
    if kind == ":":
        raise FilterError(
            f"{shown}rule {text!r}: dir-merge (per-directory filter files, `-F`) is not read by patchctl: "
            "name the file with a merge rule"
        )
    if kind == "!":
        if rest:
            raise FilterError(f"{shown}rule {text!r}: a clear rule has no pattern")
        return kind, "", ""
    rest = rest.removeprefix(",")
    end = min([i for i in (rest.find(" "), rest.find("_")) if i >= 0], default=len(rest))
    modifiers, pattern = rest[:end], rest[end + 1 :]
    if kind == "." and modifiers:
        raise FilterError(f"{shown}rule {text!r}: modifiers on a merge rule are not read by patchctl")
    for modifier in modifiers:
        if modifier not in "!sr" or (modifier in "sr" and kind in _SIDED):
            what = "is not read by patchctl" if modifier in "-+/Cenpw" and modifier.isprintable() else "is invalid"
            raise FilterError(f"{shown}rule {text!r}: modifier {modifier!r} {what}")
    if len({m for m in modifiers if m in "sr"}) > 1:
        raise FilterError(f"{shown}rule {text!r}: modifiers 's' and 'r' together apply to neither side")
    if not pattern:
        raise FilterError(f"{shown}rule {text!r}: no pattern")
    return kind, modifiers, pattern


# ------------------------------------------------------------------ matching


# A pattern's pieces: ("char", C), ("one",) for '?', ("class", REGEX) for one character of a
# class, ("star",) for '*' (within a name), ("stars",) for '**' (across names).
_Token = tuple[str, ...]


@dataclass(frozen=True)
class _Pattern:
    directory_only: bool
    anchored: bool
    basename_only: bool  # no '/' and no '**': the last name is matched
    wild2_prefix: bool  # starts with '**': matched from the start with a '/' before the path
    wild3_suffix: bool  # ends with '***': a directory matches as 'DIR/'
    trailing: int  # > 0: the last N names are matched; -1: at the start or after any '/'; 0: the whole
    fullmatch: Callable[[str], bool]


@lru_cache(maxsize=4096)
def _compiled(pattern: str) -> _Pattern:
    """PATTERN as rsync's add_rule() stores it and rule_matches() reads it."""
    directory_only = len(pattern) > 1 and pattern.endswith("/")
    if directory_only:
        pattern = pattern[:-1]
    slashes = pattern.count("/")
    wild = any(c in pattern for c in "*[?")
    wild2 = wild and "**" in pattern
    anchored = pattern.startswith("/")
    body = pattern[1:] if anchored else pattern
    wild2_prefix = wild2 and pattern.startswith("**")
    if not anchored and slashes and not wild2:
        trailing = slashes + 1
    elif not anchored and not wild2_prefix and wild2:
        trailing = -1
    else:
        trailing = 0
    tokens = _tokens(body) if wild else [("char", c) for c in body]
    return _Pattern(
        directory_only,
        anchored,
        not slashes and not wild2,
        wild2_prefix,
        wild2 and pattern.endswith("***"),
        trailing,
        _matcher(tokens, anywhere=trailing < 0),
    )


def _matches(pattern: str, negate: bool, name: str, is_dir: bool) -> bool:
    if not name:
        return False
    compiled = _compiled(pattern)
    if compiled.directory_only and not is_dir:
        return negate
    if compiled.basename_only:
        text = name.rsplit("/", 1)[-1]
    else:
        text = ("/" if compiled.wild2_prefix else "") + name + ("/" if is_dir and compiled.wild3_suffix else "")
    if compiled.trailing > 0:
        names = text.split("/")
        if len(names) < compiled.trailing:
            return negate
        text = "/".join(names[-compiled.trailing :])
    return compiled.fullmatch(text) != negate


def _matcher(tokens: list[_Token] | None, *, anywhere: bool) -> Callable[[str], bool]:
    """Whether a whole text matches TOKENS (ANYWHERE: or its part after any '/'). A regex when it
    has at most one wildcard (it cannot backtrack more than once over the text); else a walk of
    the pattern's states, one pass over the text, so no pattern a filter file holds can make
    matching take more than (pattern length x path length) steps."""
    if tokens is None:
        return lambda text: False
    wildcards = sum(kind in ("star", "stars") for kind, *_ in tokens) + anywhere
    if wildcards <= 1:
        regex = "".join(_TOKEN_REGEX[kind](*rest) for kind, *rest in tokens)
        compiled = re.compile(f"(?:.*/)?(?:{regex})" if anywhere else regex, re.DOTALL)
        return lambda text: compiled.fullmatch(text) is not None
    if anywhere:
        tokens = [("stars",), ("char", "/"), *tokens]
    classes = {i: re.compile(t[1]) for i, t in enumerate(tokens) if t[0] == "class"}
    starts = _closure(tokens, {0, 2} if anywhere else {0})

    def walk(text: str) -> bool:
        states = starts
        for char in text:
            following = set()
            for i in states:
                if i == len(tokens):
                    continue
                kind = tokens[i][0]
                if kind == "stars" or (kind == "star" and char != "/"):
                    following.add(i)
                elif (
                    (kind == "char" and tokens[i][1] == char)
                    or (kind == "one" and char != "/")
                    or (kind == "class" and classes[i].fullmatch(char))
                ):
                    following.add(i + 1)
            states = _closure(tokens, following)
            if not states:
                return False
        return len(tokens) in states

    return walk


def _closure(tokens: list[_Token], states: set[int]) -> frozenset[int]:
    """STATES and those a run of wildcards lets the walk reach without reading a character."""
    reached = set(states)
    for i in sorted(states):
        while i < len(tokens) and tokens[i][0] in ("star", "stars"):
            i += 1
            reached.add(i)
    return frozenset(reached)


_TOKEN_REGEX: dict[str, Callable[..., str]] = {
    "char": re.escape,
    "one": lambda: "[^/]",
    "class": lambda regex: regex,
    "star": lambda: "[^/]*",
    "stars": lambda: ".*",
}


def _tokens(pattern: str) -> list[_Token] | None:
    """rsync's wildmatch PATTERN as tokens (None: a pattern that matches nothing, like an
    unclosed class)."""
    out: list[_Token] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            i += 1
            if i == len(pattern):
                return None
            out.append(("char", pattern[i]))
        elif char == "*":
            stars = len(pattern) - i - len(pattern[i:].lstrip("*"))
            out.append(("stars",) if stars > 1 else ("star",))
            i += stars
            continue
        elif char == "?":
            out.append(("one",))
        elif char == "[":
            parsed = _class(pattern, i)
            if parsed is None:
                return None
            regex, i = parsed
            out.append(("class", regex))
        else:
            out.append(("char", char))
        i += 1
    return out


def _class(pattern: str, start: int) -> tuple[str, int] | None:
    """The class opening at START as a regex, and the index of its closing ']'; None when
    rsync's matcher aborts on it (unclosed, or an unknown [:name:])."""
    i = start + 1
    negate = i < len(pattern) and pattern[i] in "!^"
    i += negate
    members: list[str] = []
    previous = ""
    first = True
    while first or (i < len(pattern) and pattern[i] != "]"):
        first = False
        if i >= len(pattern):
            return None
        char = pattern[i]
        if char == "\\":
            i += 1
            if i >= len(pattern):
                return None
            members.append(re.escape(pattern[i]))
            previous = pattern[i]
        elif char == "-" and previous and i + 1 < len(pattern) and pattern[i + 1] != "]":
            i += 1
            if pattern[i] == "\\":
                i += 1
                if i >= len(pattern):
                    return None
            low, high = previous, pattern[i]
            if low <= high:
                members.append(f"{re.escape(low)}-{re.escape(high)}")
            previous = ""
        elif char == "[" and pattern[i + 1 : i + 2] == ":":
            close = pattern.find(":]", i + 2)
            bracket = pattern.find("]", i + 2)
            if close < 0 or bracket != close + 1:
                members.append(re.escape("["))  # no ':]' ends it: an ordinary '['
                previous = "["
            else:
                name = pattern[i + 2 : close]
                if name not in _POSIX_CLASSES:
                    return None
                members.append(_POSIX_CLASSES[name])
                previous = ""
                i = close + 1
        else:
            members.append(re.escape(char))
            previous = char
        i += 1
    if i >= len(pattern):
        return None
    body = "".join(members)
    if negate:
        return f"[^/{body}]", i
    return (f"(?!/)[{body}]" if body else "(?!)"), i
