"""Bumps that stop, for the tests of why a patch stops (test_stop_cause) and the guide
docs/guides/reading-a-stop.md, whose realistic example is `own_version_bump`'s stop."""

from __future__ import annotations

from .conftest import Project, Repo, make_patch, numbered
from .fixtures_sync import main_c, write_config


def mixed_bump(project: Project, upstream: Repo) -> dict[str, str]:
    """A patch of three hunks over two files: include/util.h's hunk fails strictly (upstream
    changed its context) and merges cleanly; src/main.c's first hunk conflicts with two
    upstream commits (one changed its line, one the line next to it); its second merges."""
    pin = upstream.head
    text = make_patch(
        upstream,
        pin,
        {
            "include/util.h": numbered(10, "decl").replace("decl 6\n", "DECL 6 patched\n"),
            "src/main.c": main_c({20: "MAIN 20 patched", 35: "MAIN 35 patched"}),
        },
        "Patch util and main",
    )
    project.add_patch("0001-patch-util-and-main.patch", text)
    write_config(project, pin)
    commits = {
        "context": upstream.commit(
            {"include/util.h": numbered(10, "decl").replace("decl 3\n", "decl three\n")}, "Touch decl 3"
        ),
        "readme": upstream.commit({"README.md": "# upstream, renamed\n"}, "Unrelated README work"),
        "line": upstream.commit({"src/main.c": main_c({20: "main 20 reworked"})}, "Rework main 20"),
        "next": upstream.commit({"src/main.c": main_c({19: "main 19 too", 20: "main 20 reworked"})}, "Rework main 19"),
        "far": upstream.commit(
            {"src/main.c": main_c({19: "main 19 too", 20: "main 20 reworked", 3: "main 3 far"})}, "Edit main 3"
        ),
    }
    return commits


def own_version_bump(project: Project, upstream: Repo, upstream_lines: list[str], *, other_file: bool = False) -> None:
    """The patch changes main 20 and adds a line after it; upstream rewrites main 20 into
    UPSTREAM_LINES (indented its own way) in one commit, after an unrelated one."""
    pin = upstream.head
    files = {"src/main.c": main_c({20: "MAIN 20 patched\nextra line"})}
    if other_file:
        files["src/util.c"] = numbered(30, "util").replace("util 5\n", "UTIL 5\n")
    project.add_patch("0001-fix-main-20.patch", make_patch(upstream, pin, files, "Fix main 20"))
    write_config(project, pin)
    upstream.commit({"README.md": "# upstream\n\nmore\n"}, "Docs")
    upstream.commit({"src/main.c": main_c({20: "\n".join(upstream_lines)})}, "Upstream's fix of main 20")


BUFFER_C = """\
#include <stdlib.h>
#include "buffer.h"

int buffer_grow(struct buffer *b, size_t extra) {
    size_t want = b->len + extra;
    if (want <= b->cap)
        return 0;
    size_t cap = b->cap * 2;
    char *data = realloc(b->data, cap);
    if (!data)
        return -1;
    b->data = data;
    b->cap = cap;
    return 0;
}
"""


def buffer_bump(project: Project, upstream: Repo) -> None:
    """The guide's realistic stop: the series fixes buffer_grow (twice the capacity may be short
    of what is asked); upstream fixes it the same way, with a comment of its own, in a commit
    between two others. The 3-way merge conflicts (both sides insert lines at the same place),
    and upstream holds the patch's edit: its own version."""
    pin = upstream.commit({"src/buffer.c": BUFFER_C}, "Add buffer_grow")
    fixed = BUFFER_C.replace(
        "    size_t cap = b->cap * 2;\n", "    size_t cap = b->cap * 2;\n    if (cap < want)\n        cap = want;\n"
    )
    project.add_patch(
        "0001-buffer-never-grow-short-of-what-is-asked.patch",
        make_patch(
            upstream,
            pin,
            {"src/buffer.c": fixed},
            "buffer: never grow short of what is asked",
            "Doubling the capacity is not enough when EXTRA is larger than it.",
        ),
    )
    write_config(project, pin)
    upstream.commit({"README.md": "# upstream\n\nBuffers grow by doubling.\n"}, "Document buffer growth")
    upstream.commit(
        {
            "src/buffer.c": BUFFER_C.replace(
                "    size_t cap = b->cap * 2;\n",
                "    size_t cap = b->cap * 2;\n"
                "    /* twice the capacity may still be short of what is asked */\n"
                "    if (cap < want)\n"
                "        cap = want;\n",
            )
        },
        "Fix buffer_grow when extra exceeds the capacity (#812)",
    )
    upstream.commit({"src/util.c": numbered(30, "util").replace("util 3\n", "util three\n")}, "Tidy util")
