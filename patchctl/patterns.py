"""Regular expressions compiled at their first use, not at import.

A module's patterns cost a command nothing until it matches one: `patchctl --help`, a usage
error and `lint --no-apply` import modules whose other paths need dozens of patterns
(bench/startup_bench.py measures the start-up). `lazy(PATTERN, FLAGS)` stands where
`re.compile(PATTERN, FLAGS)` stood and is used the same way (`.match`, `.sub`, `.pattern`, ...);
at its first use it compiles, and from then on each method is the compiled pattern's own,
set on the object, so a hot loop pays what it paid for the compiled pattern. It is not a
`re.Pattern`: hand `re` functions the pattern's methods, not the object
(tests/patchctl/test_startup.py checks that no module does).
"""

from __future__ import annotations

import re
from typing import Any

# What a compiled pattern offers; each is set on the object at the first use of any.
_ATTRIBUTES = (
    "match",
    "fullmatch",
    "search",
    "sub",
    "subn",
    "split",
    "findall",
    "finditer",
    "scanner",
    "flags",
    "groups",
    "groupindex",
)


class LazyPattern:
    """`re.compile(pattern, flags)`, compiled when first used (see the module's docstring)."""

    def __init__(self, pattern: str | bytes, flags: int = 0) -> None:
        self.pattern = pattern
        self._flags = flags

    def compiled(self) -> re.Pattern:
        """The compiled pattern (compiled now if it was not yet)."""
        compiled = re.compile(self.pattern, self._flags)
        for name in _ATTRIBUTES:
            setattr(self, name, getattr(compiled, name))
        return compiled

    def __getattr__(self, name: str) -> Any:
        # Only for what the object does not hold yet: the first use of the pattern.
        if name.startswith("__") or name not in _ATTRIBUTES:
            raise AttributeError(name)
        return getattr(self.compiled(), name)

    def __repr__(self) -> str:
        return f"lazy({self.pattern!r}, {self._flags})"


def lazy(pattern: str | bytes, flags: int = 0) -> LazyPattern:
    """`re.compile(PATTERN, FLAGS)` at its first use."""
    return LazyPattern(pattern, flags)
