"""mkdocs hook: render a Click command's help the way `--help` shows it.

mkdocs-click pastes the help text into the page as Markdown. Click's help is not Markdown: a
paragraph after a `\\b` line is printed verbatim (the examples, rule lists, layout tables), and
the other paragraphs are re-wrapped prose in which `*`, `_`, `[` and `<` are plain characters
(`templates/*.j2`, `<sha>`). Pasted as Markdown, the examples run together into one paragraph
and the globs turn into emphasis. This hook replaces mkdocs-click's description step (version
pinned in pyproject.toml's `docs` extra): verbatim paragraphs become `text` code blocks, prose
paragraphs are escaped outside their `code spans`, and the help stops at `\\f` as Click's does.

It also renders each command inside the `patchctl` group's context, as `patchctl COMMAND --help`
does: the group's settings (`-h` beside `--help`) reach the command, and the width is fixed so
that the page does not depend on the terminal that built it. A page names the command by its
name under the group (`:prog_name: pin-sync`), and the heading reads `patchctl pin-sync`.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterator

import click
from mkdocs_click import _docs

from patchctl.cli import cli

VERBATIM_MARKER = "\b"
TRUNCATE_MARKER = "\f"
HELP_WIDTH = 100  # the group's max_content_width
# Markdown's inline syntax that Click's prose means literally (code spans are kept apart).
INLINE_SPECIAL = re.compile(r"([\\*_\[\]])")
# A paragraph joined into one line would still read as a heading, list or quote at its start.
BLOCK_START = re.compile(r"^(#|>|[-+]\s|\d+[.)]\s)")


def escape_prose(paragraph: str) -> str:
    """One prose paragraph as one Markdown line; backtick spans stay code."""
    text = " ".join(line.strip() for line in paragraph.splitlines())
    pieces = re.split(r"(`[^`]*`)", text)
    escaped = "".join(
        piece if piece.startswith("`") else INLINE_SPECIAL.sub(r"\\\1", piece).replace("<", "&lt;") for piece in pieces
    )
    return "\\" + escaped if BLOCK_START.match(escaped) else escaped


def help_markdown(help_text: str) -> Iterator[str]:
    """Click's help text (as in the docstring) as Markdown lines."""
    text = inspect.cleandoc(help_text).split(TRUNCATE_MARKER, 1)[0]
    for paragraph in re.split(r"\n[ \t]*\n", text):
        if paragraph.startswith(VERBATIM_MARKER):
            body = paragraph[len(VERBATIM_MARKER) :].lstrip("\n")
            yield "```text"
            yield from body.splitlines()
            yield "```"
        elif paragraph.strip():
            yield escape_prose(paragraph)
        yield ""


def make_description(ctx: click.Context, remove_ascii_art: bool = False) -> Iterator[str]:
    help_text = ctx.command.help or ctx.command.short_help
    if help_text:
        yield from help_markdown(help_text)


def build_command_context(prog_name: str, command: click.Command, parent: click.Context | None) -> click.Context:
    if parent is None and command is not cli:
        parent = click.Context(cli, info_name="patchctl", terminal_width=HELP_WIDTH, **cli.context_settings)
    return command.context_class(command, info_name=prog_name, parent=parent, **command.context_settings)


def on_startup(**_: object) -> None:
    _docs._make_description = make_description
    _docs._build_command_context = build_command_context
