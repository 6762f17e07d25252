"""The path globs of `vendor:` copies (and `patchctl init`, which writes them).

`*` and `?` stay within one name, `[...]` is a class (`[!...]` its complement), `**/` is any
directories or none and a trailing `**` anything below. Paths are '/'-separated and relative
to the copy's `from` (include, exclude) or `to` (protect) directory.
"""

from __future__ import annotations

import functools
import re


def glob_match(path: str, pattern: str) -> bool:
    return _compiled(pattern).fullmatch(path) is not None


def any_match(path: str, patterns: tuple[str, ...] | list[str]) -> bool:
    return any(_compiled(p).fullmatch(path) is not None for p in patterns)


@functools.lru_cache(maxsize=4096)
def _compiled(pattern: str) -> re.Pattern[str]:
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
        elif pattern[i] == "[" and "]" in pattern[i + 1 :]:
            end = pattern.index("]", i + 1)
            body = pattern[i + 1 : end].replace("\\", "\\\\")
            regex, i = regex + "[" + ("^" + body[1:] if body.startswith("!") else body) + "]", end + 1
        else:
            regex, i = regex + re.escape(pattern[i]), i + 1
    return re.compile(regex, re.DOTALL)
