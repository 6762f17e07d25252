"""Path globs, one reading for every path pattern matrix.yaml holds: `vendor:` copies,
`backends:` paths and series `exclude:` patterns that contain a '/'.

`*` and `?` stay within one name, `[...]` is a class (`[!...]` its complement), `**/` is any
directories or none, `**` anything, and a pattern ending in `/` names a directory and
everything under it. Paths are '/'-separated and relative to where the pattern applies.
"""

from __future__ import annotations

import re
from functools import lru_cache


@lru_cache(maxsize=4096)
def compile_glob(pattern: str) -> re.Pattern[str]:
    if pattern.endswith("/"):
        pattern += "**"
    regex, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            regex, i = regex + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            regex, i = regex + ".*", i + 2
        elif pattern[i] == "*":
            regex, i = regex + "[^/]*", i + 1
        elif pattern[i] == "?":
            regex, i = regex + "[^/]", i + 1
        elif pattern[i] == "[" and (end := _class_end(pattern, i)) > 0:
            body = pattern[i + 1 : end]
            negate = body.startswith("!")
            members = (body[1:] if negate else body).replace("\\", "\\\\").replace("^", "\\^")
            regex, i = regex + "[" + ("^" if negate else "") + members + "]", end + 1
        else:
            regex, i = regex + re.escape(pattern[i]), i + 1
    return re.compile(regex + r"\Z", re.DOTALL)


def _class_end(pattern: str, start: int) -> int:
    """The index of the ']' closing the class opened at START, or -1 (then '[' is literal).
    As in fnmatch, a ']' first in the class (after '[' or '[!') is a member, not its end."""
    first = start + 1 + (pattern[start + 1 : start + 2] == "!")
    return pattern.find("]", first + 1)


def glob_match(path: str, pattern: str) -> bool:
    return compile_glob(pattern).match(path) is not None


def any_match(path: str, patterns: tuple[str, ...] | list[str]) -> bool:
    return any(compile_glob(p).match(path) is not None for p in patterns)
