"""Make's variables as a downstream's Makefiles hold them: a vendoring `Makefile.sync`, an
OpenWrt package Makefile. Read, never run: assignments and rules are parsed, `define` blocks
skipped, and values expanded for the variables and the few functions these Makefiles use.

The Makefile is untrusted: expansion is bounded in depth, size and work (`ExpansionBound`),
and a function patchctl does not know is a ValueError naming it, never a guess.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import field

from ..records import dataclass


@dataclass
class Makefile:
    variables: dict[str, str]
    lines: dict[str, tuple[int, str]]  # variable -> (line number, raw line) of the assignment in effect
    rules: list[tuple[str, list[str], list[str]]]  # target, prerequisites, recipe lines
    # variables assigned inside an ifeq/ifdef block: which branch make takes depends on the build
    conditional: set[str] = field(default_factory=set)


ASSIGNMENT_RE = re.compile(r"^(?:export\s+|override\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*(\?=|::=|:=|\+=|=)\s*(.*?)\s*$")
_RULE_RE = re.compile(r"^([^\s:=#][^:=]*?)\s*::?(?!=)\s*([^=]*)$")
_CONDITIONAL_RE = re.compile(r"^\s*(ifeq|ifneq|ifdef|ifndef|else|endif)\b")


def parse_makefile(text: str) -> Makefile:
    """Variables (last `=` wins, `?=` only when unset), and rules with their recipes. The
    lines of a `define NAME ... endef` block are its body, not assignments or rules."""
    variables: dict[str, str] = {}
    lines: dict[str, tuple[int, str]] = {}
    rules: list[tuple[str, list[str], list[str]]] = []
    conditional: set[str] = set()
    current: tuple[str, list[str], list[str]] | None = None
    in_define, nesting = False, 0
    for number, line in logical_lines(text):
        if in_define:
            in_define = not re.match(r"^\s*endef\b", line)
            continue
        if re.match(r"^\s*(?:override\s+|export\s+)?define\s", line):
            in_define, current = True, None
            continue
        if line.startswith("\t"):
            if current is not None:
                current[2].append(line.strip())
            continue
        current = None
        stripped = line.split("#", 1)[0].rstrip()
        if not stripped.strip():
            continue
        if match := _CONDITIONAL_RE.match(stripped):
            nesting += {"endif": -1, "else": 0}.get(match.group(1), 1)
            nesting = max(nesting, 0)
            continue
        if match := ASSIGNMENT_RE.match(stripped):
            var, op, value = match.groups()
            if nesting:
                conditional.add(var)
            if op == "?=" and var in variables:
                continue
            variables[var] = (variables.get(var, "") + " " + value).strip() if op == "+=" else value
            lines[var] = (number, line)
            continue
        if match := _RULE_RE.match(stripped):
            target, prereqs = match.groups()
            current = (target.strip(), prereqs.split(), [])
            rules.append(current)
    return Makefile(variables, lines, rules, conditional)


def logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, text) of each logical line: a trailing backslash joins the next."""
    logical: list[tuple[int, str]] = []
    buffer, start = "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        if not buffer:
            start = number
        if raw.endswith("\\"):
            buffer += raw[:-1] + " "
            continue
        logical.append((start, buffer + raw))
        buffer = ""
    if buffer:
        logical.append((start, buffer))
    return logical


def _split_args(text: str) -> list[str]:
    depth, parts, current = 0, [], ""
    for char in text:
        if char in "({":
            depth += 1
        elif char in ")}":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return parts


MAX_EXPANSION_DEPTH = 64  # make itself stops a variable that refers to itself; real Makefiles nest a few levels
MAX_EXPANSION_BYTES = 1024 * 1024  # a value far past any URL, pin or path a vendoring Makefile holds
MAX_EXPANSION_STEPS = 100_000  # references and calls in one expansion: `A2=$(A1)$(A1)` doubles at each level


class ExpansionBound(Exception):  # noqa: N818 - a bound reached, not an error of the Makefile's syntax
    """A Makefile whose expansion goes past a bound (a variable that refers to itself, or that
    doubles at each level): `patchctl init` stops in one line."""


def expand(text: str, variables: dict[str, str], target: str = "", prereqs: list[str] | None = None) -> str:
    """Make's expansion of TEXT, for the variables and the few functions vendoring and OpenWrt
    Makefiles use; raises ValueError naming anything else, ExpansionBound past the bounds above."""
    return _Expansion(variables, target, prereqs or []).expand(text, 0)


@dataclass
class _Expansion:
    variables: dict[str, str]
    target: str
    prereqs: list[str]
    steps: int = 0

    def expand(self, text: str, depth: int) -> str:
        out, i = "", 0
        while i < len(text):
            char = text[i]
            if char != "$" or i + 1 >= len(text):
                out += char
                i += 1
                continue
            nxt = text[i + 1]
            if nxt in "({":
                close = ")" if nxt == "(" else "}"
                level, j = 1, i + 2
                while j < len(text) and level:
                    level += {nxt: 1, close: -1}.get(text[j], 0)
                    j += 1
                if level:
                    raise ValueError(f"unbalanced {text[i:]!r}")
                out += self.call(text[i + 2 : j - 1], depth)
                i = j
            else:
                auto = {"@": self.target, "<": self.prereqs[0] if self.prereqs else "", "^": " ".join(self.prereqs)}
                if nxt in auto or nxt == "$":
                    out += auto.get(nxt, "$")
                elif nxt.isalnum():
                    out += self.variable(nxt, depth)
                else:
                    raise ValueError(f"make variable ${nxt} is not supported")
                i += 2
            if len(out) > MAX_EXPANSION_BYTES:
                raise ExpansionBound(f"expanding it gives more than {MAX_EXPANSION_BYTES:,} bytes")
        return out

    def variable(self, name: str, depth: int) -> str:
        self.steps += 1
        if depth >= MAX_EXPANSION_DEPTH:
            raise ExpansionBound(
                f"$({name}) nests more than {MAX_EXPANSION_DEPTH} levels deep (a variable that refers to itself?)"
            )
        if self.steps > MAX_EXPANSION_STEPS:
            raise ExpansionBound(f"expanding $({name}) takes more than {MAX_EXPANSION_STEPS:,} steps")
        return self.expand(self.variables.get(name, ""), depth + 1)

    def call(self, body: str, depth: int) -> str:
        def ex(value: str) -> str:
            return self.expand(value, depth + 1)

        function, _, rest = body.partition(" ")
        if not rest and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", body):
            return self.variable(body, depth)
        self.steps += 1
        if depth >= MAX_EXPANSION_DEPTH or self.steps > MAX_EXPANSION_STEPS:
            raise ExpansionBound(f"$({function} ...) nests more than {MAX_EXPANSION_DEPTH} levels or takes too long")
        args = _split_args(rest)
        if function == "addprefix" and len(args) == 2:
            return " ".join(ex(args[0]).strip() + w for w in ex(args[1]).split())
        if function == "addsuffix" and len(args) == 2:
            return " ".join(w + ex(args[0]).strip() for w in ex(args[1]).split())
        if function in ("realpath", "abspath", "strip"):
            return " ".join(w for a in args for w in ex(a).split())
        if function in ("lastword", "firstword") and len(args) == 1:
            items = ex(args[0]).split()
            return (items[-1] if function == "lastword" else items[0]) if items else ""
        if function == "notdir" and len(args) == 1:
            return " ".join(posixpath.basename(w) for w in ex(args[0]).split())
        if function == "dir" and len(args) == 1:
            return " ".join(posixpath.dirname(w) + "/" for w in ex(args[0]).split())
        if function == "wildcard" and len(args) == 1:
            return ex(args[0])
        if function == "subst" and len(args) == 3:
            return ex(args[2]).replace(ex(args[0]), ex(args[1]))
        if function == "basename" and len(args) == 1:
            return " ".join(re.sub(r"\.[^./]*$", "", w) for w in ex(args[0]).split())
        if function == "word" and len(args) == 2 and ex(args[0]).strip().isdigit():
            words, index = ex(args[1]).split(), int(ex(args[0]))
            return words[index - 1] if 0 < index <= len(words) else ""
        if function == "if" and len(args) in (2, 3):
            return ex(args[1]) if ex(args[0]).strip() else (ex(args[2]) if len(args) == 3 else "")
        raise ValueError(f"make function $({function} ...) is not supported")
