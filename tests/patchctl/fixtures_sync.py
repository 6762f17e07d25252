"""Scripted upstream drift for the pin-sync and canary tests.

The upstream (conftest's `upstream` fixture) has src/main.c with lines `main 1`..`main 40`.
The downstream series changes line 20; each drift below moves the upstream in a way a
real upstream does: unrelated work, lines inserted above (offsets), a change near the
patch (context drift that 3-way resolves), the same line changed (a true conflict), or
the patch's own change taken upstream. WHITESPACE_TWINS: upstream makes the patch's change but
for whitespace, which `git patch-id --stable` does not see.
"""

from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass
from pathlib import Path

from .conftest import Project, Repo, make_patch, numbered

HELLO_C = '#include <stdio.h>\n#include "hello.h"\nint main(void) { printf("hello %d\\n", HELLO_ANSWER); return 0; }\n'
HELLO_H = "#define HELLO_ANSWER 42\n"


def main_c(changes: dict[int, str] | None = None, *, prepend: int = 0) -> str:
    lines = [f"main {i}" for i in range(1, 41)]
    for number, text in (changes or {}).items():
        lines[number - 1] = text
    return "".join(f"top {i}\n" for i in range(prepend)) + "".join(line + "\n" for line in lines)


def write_config(
    project: Project, pin: str, *, series_extra: str = "", upstreams_extra: str = "", up_extra: str = "", tail: str = ""
) -> None:
    """matrix.yaml with comments and odd spacing, so byte-identity of the rest is tested."""
    text = textwrap.dedent(
        f"""\
        # downstream project: comments must survive a pin move
        version: 1

        upstreams:
          up:   # the upstream we follow
            url: {project.upstream.path}
            branch: main
            pin: '{pin}'   # moved by pin-sync only
        """
    )
    text += textwrap.indent(textwrap.dedent(up_extra), "    ") if up_extra else ""
    text += textwrap.indent(textwrap.dedent(upstreams_extra), "  ") if upstreams_extra else ""
    text += textwrap.dedent(
        f"""\
        series:
          {project.series_name}:
            upstream: up
            dir: patches/{project.series_name}
        """
    )
    text += textwrap.indent(textwrap.dedent(series_extra), "    ") if series_extra else ""
    text += textwrap.dedent(tail)
    (project.path / "matrix.yaml").write_text(text)


def add_line20_patch(project: Project, upstream: Repo, base: str) -> str:
    text = make_patch(
        upstream,
        base,
        {"src/main.c": main_c({20: "MAIN 20 patched"})},
        "Patch line twenty",
        "Downstream needs line 20 changed.",
    )
    project.add_patch("0001-patch-line-twenty.patch", text)
    return text


def add_hello_patch(project: Project, upstream: Repo, base: str, name: str = "0002-add-hello.patch") -> str:
    text = make_patch(
        upstream, base, {"src/hello.c": HELLO_C, "src/hello.h": HELLO_H}, "Add hello", "A program the build compiles."
    )
    project.add_patch(name, text)
    return text


@dataclass(frozen=True)
class WhitespaceTwin:
    """A file at the pin, the patch's version of it, and upstream's: the same change but for
    whitespace (the same patch-id), or (EXACT) byte for byte."""

    name: str
    path: str
    base: str
    patched: str
    upstream: str

    @property
    def exact(self) -> bool:
        return self.patched == self.upstream


_GREET_C = 'static const char *greeting = "hello world";\nint greet(void) { return puts(greeting); }\n'
_MAX_H = "#ifndef MAX_H\n#define MAX_H\n#define MAX(a,b) (a)\n#endif\n"
_POOL_PY = "def pool(items):\n    out = []\n    for item in items:\n        out.append(item)\n    return out\n"
_POOL_PY_GUARDED = (
    "def pool(items):\n    out = []\n    for item in items:\n        if item is not None:\n"
    "{indent}out.append(item)\n    return out\n"
)

WHITESPACE_TWINS = [
    # The case: a space inside a C string is the whole change.
    WhitespaceTwin(
        "c-string",
        "src/greet.c",
        _GREET_C,
        _GREET_C.replace('"hello world"', '"hello brave world"'),
        _GREET_C.replace('"hello world"', '"hellobrave world"'),
    ),
    # Macro spacing: the preprocessor reads `(a,b)` and `( a, b )` alike, a diff does not.
    WhitespaceTwin(
        "macro-spacing",
        "include/max.h",
        _MAX_H,
        _MAX_H.replace("#define MAX(a,b) (a)", "#define MAX(a, b) ((a) > (b) ? (a) : (b))"),
        _MAX_H.replace("#define MAX(a,b) (a)", "#define MAX(a,b) ((a)>(b)?(a):(b))"),
    ),
    # Python indentation: a tab where the patch has spaces is another program (or a TabError).
    WhitespaceTwin(
        "python-indentation",
        "tools/pool.py",
        _POOL_PY,
        _POOL_PY_GUARDED.format(indent=" " * 12),
        _POOL_PY_GUARDED.format(indent="\t\t"),
    ),
]
# Upstream made exactly the patch's change: taken upstream, dropped.
_GUARDED = _POOL_PY_GUARDED.format(indent=" " * 12)
EXACT_TWIN = WhitespaceTwin("exact", "tools/pool.py", _POOL_PY, _GUARDED, _GUARDED)


def add_twin_patch(project: Project, upstream: Repo, twin: WhitespaceTwin) -> tuple[str, str]:
    """TWIN's file committed upstream, the patch of its change added to PROJECT's series, and
    matrix.yaml pinned there; then upstream's own version committed. (pin, upstream's commit)."""
    pin = upstream.commit({twin.path: twin.base}, f"Add {twin.path}")
    patch = make_patch(upstream, pin, {twin.path: twin.patched}, f"Tune {twin.name}")
    project.add_patch(f"0001-{twin.name}.patch", patch)
    write_config(project, pin)
    return pin, upstream.commit({twin.path: twin.upstream}, f"Upstream tunes {twin.name}")


def load_json(path: Path) -> dict:
    return json.loads(path.read_text())


__all__ = [
    "EXACT_TWIN",
    "HELLO_C",
    "HELLO_H",
    "WHITESPACE_TWINS",
    "WhitespaceTwin",
    "add_twin_patch",
    "add_hello_patch",
    "add_line20_patch",
    "load_json",
    "main_c",
    "numbered",
    "write_config",
]
