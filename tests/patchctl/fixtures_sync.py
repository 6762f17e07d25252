"""Scripted upstream drift for the pin-sync and canary tests.

The upstream (conftest's `upstream` fixture) has src/main.c with lines `main 1`..`main 40`.
The downstream series changes line 20; each drift below moves the upstream in a way a
real upstream does: unrelated work, lines inserted above (offsets), a change near the
patch (context drift that 3-way resolves), the same line changed (a true conflict), or
the patch's own change taken upstream.
"""

from __future__ import annotations

import json
import textwrap
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


def load_json(path: Path) -> dict:
    return json.loads(path.read_text())


__all__ = [
    "HELLO_C",
    "HELLO_H",
    "add_hello_patch",
    "add_line20_patch",
    "load_json",
    "main_c",
    "numbered",
    "write_config",
]
