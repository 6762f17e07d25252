"""patchctl.output.escape: each destination's escaping, checked where the text lands: Markdown through
a CommonMark+GFM renderer and GitHub's linking rules, workflow commands through the runner's
parsing rules, shell words through a shell's own reading."""

from __future__ import annotations

import html
import re
import shlex
import subprocess
import urllib.parse

from hypothesis import example, given, settings
from hypothesis import strategies as st

from patchctl.output import escape

from .markdown_check import assert_inert, render

# Text an upstream can choose: heavy on what means something to Markdown, HTML, GitHub,
# the Actions runner and the shell, plus anything at all.
HOSTILE_PIECES = [
    "@user",
    "@org/team",
    "#1",
    "GH-7",
    "owner/repo#12",
    "<img src=x onerror=alert(1)>",
    "</details>",
    "<!--",
    "-->",
    "[x](javascript:alert(1))",
    "![i](http://x/y.png)",
    "<http://evil.example>",
    "https://evil.example",
    "www.evil.example",
    "a@b.example",
    "|",
    "\\|",
    "`",
    "```",
    "\r",
    "\n",
    "\r\n",
    "\t",
    "%",
    "%0A",
    "::",
    "::warning::x",
    "##[error]x",
    "&amp;",
    "&#64;",
    "*",
    "_",
    "~~",
    "$x$",
    "- ",
    "1. ",
    "# ",
    "> ",
    "\\",
    "'",
    '"',
    "$(id)",
    " ",
    "\x1b[31m",
    "\u2028",
    "\u202e",
    "\udcff",
    "\x00",
]
hostile_text = st.one_of(
    st.lists(st.sampled_from(HOSTILE_PIECES) | st.text(max_size=3), max_size=8).map("".join),
    st.text(),
)


def _rendered_text(fragment_html: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", fragment_html))


# ---------------------------------------------------------------- visible


CONTROLS = r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\u061c\u200b-\u200f\u2060\ufeff\ud800-\udfff]"


@given(hostile_text)
def test_visible_is_one_line_and_shows_every_control_character(text: str) -> None:
    shown = escape.visible(text)
    assert not any(c in shown for c in "\r\n\x00\x1b\u2028\u2029\u202e\x85")
    shown.encode("utf-8")  # raises on a lone surrogate: what is shown prints whatever the locale
    if not re.search(CONTROLS, text):
        assert shown == text


def test_visible_names_the_escapes() -> None:
    assert escape.visible("a\nb\r\tc\x1b\udcff\u2028") == "a\\nb\\r\\tc\\x1b\\xff\\u2028"
    assert escape.visible("a\tb", keep="\t") == "a\tb"
    # Zero-width characters hide inside a name; Markdown output inserts ZWJ itself, so one from
    # outside must be shown (hypothesis once drew a lone ZWJ that came out unseen).
    assert escape.visible(".g\u200cit\u200d\u200b\u2060\ufeff") == ".g\\u200cit\\u200d\\u200b\\u2060\\ufeff"


# ---------------------------------------------------------------- Markdown


@settings(max_examples=300, deadline=None)
@given(hostile_text)
@example("\u200d")
def test_md_text_renders_as_exactly_its_text_and_nothing_else(text: str) -> None:
    rendered = assert_inert(f"«{escape.md_text(text)}»")
    assert re.fullmatch(r"<p>[^<]*</p>\n", rendered), rendered  # a paragraph of text: no markup at all
    assert _rendered_text(rendered).strip("\n").replace(escape.ZWJ, "") == f"«{escape.visible(text)}»"


@settings(max_examples=300, deadline=None)
@given(hostile_text)
def test_md_code_is_one_code_span_holding_the_text(text: str) -> None:
    rendered = assert_inert(f"x {escape.md_code(text)} y")
    spans = re.findall(r"<code>(.*?)</code>", rendered, re.DOTALL)
    assert len(spans) == 1 and rendered.count("<") == 4  # <p><code></code></p>: nothing else
    assert html.unescape(spans[0]) == (escape.visible(text) or " ")


@settings(max_examples=300, deadline=None)
@given(hostile_text, hostile_text)
def test_table_cells_hold_their_text_and_never_split_the_row(code: str, prose: str) -> None:
    table = f"| a | b | c |\n|---|---|---|\n| {escape.md_code(code, table=True)} | {escape.md_cell(prose)} | end |\n"
    rendered = assert_inert(table)
    body = rendered.split("<tbody>")[1]
    cells = re.findall(r"<td>(.*?)</td>", body, re.DOTALL)
    assert len(cells) == 3 and cells[2] == "end", rendered
    assert html.unescape(re.sub(r"</?code>", "", cells[0])) == (escape.visible(code) or " ")


@settings(max_examples=200, deadline=None)
@given(hostile_text)
@example("    @user")  # four spaces after a list marker open an indented code block (drawn once)
def test_md_prose_keeps_backticked_commands_as_code_and_the_rest_as_text(text: str) -> None:
    rendered = assert_inert(f"- {escape.md_prose(text)}")
    assert set(re.findall(r"</?(\w+)", rendered)) <= {"ul", "li", "code"}, rendered


def test_md_prose_of_a_next_step() -> None:
    step = "then run `patchctl pin-sync --continue` in `" + escape.shell_word("a b@c") + "`"
    assert escape.md_prose(step) == "then run `patchctl pin-sync --continue` in `'a b@c'`"


@settings(max_examples=200, deadline=None)
@given(hostile_text, hostile_text)
def test_a_fold_holds_its_summary_and_its_block_whatever_they_say(summary: str, block: str) -> None:
    fold = f"<details><summary>{escape.html_text(summary)}</summary>"
    markdown = "\n".join([fold, "", *escape.md_fence(block, "text"), "", "</details>"])
    rendered = assert_inert(markdown, folds=1)
    shown = re.search(r"<summary>(.*?)</summary>", rendered, re.DOTALL)
    assert shown and html.unescape(shown.group(1)).replace(escape.ZWJ, "") == escape.visible(summary)
    pre = re.findall(r"<pre><code[^>]*>(.*?)</code></pre>", rendered, re.DOTALL)
    expected = "\n".join(escape.visible(line, keep="\t") for line in block.rstrip("\n").split("\n"))
    assert len(pre) == 1 and html.unescape(pre[0]).rstrip("\n") == expected.rstrip("\n").replace("\x00", "\ufffd")


# ---------------------------------------------------------------- a report on a terminal


@settings(max_examples=300, deadline=None)
@given(hostile_text, hostile_text, hostile_text)
def test_terminal_text_is_the_text_without_markdown(prose: str, code: str, summary: str) -> None:
    """What a report says on a terminal: each value as `visible` shows it, no Markdown escape or
    entity around it, code spans (commands to paste) whole; nothing only a renderer reads."""
    markdown = "\n".join(
        [
            f"## {escape.md_text(prose)}",
            f"- run {escape.md_code(code)} now",
            "| a | b |",
            "|---|---|",
            f"| x | {escape.md_code(code, table=True)} |",
            f"<details><summary>{escape.html_text(summary)}</summary>",
            "",
            *escape.md_fence(code, "text"),
            "",
            "</details>",
        ]
    )
    lines = escape.terminal_text(markdown).split("\n")
    assert lines[0] == f"## {escape.visible(prose).replace(escape.ZWJ, '')}"
    assert lines[1] == f"- run {escape.md_code(code)} now"
    assert lines[2:4] == ["| a | b |", f"| x | {escape.md_code(code)} |"]
    assert lines[4] == escape.visible(summary).replace(escape.ZWJ, "")
    assert lines[5] == "" and lines[-1] == ""  # (the fold's closing tag is gone with its line)
    assert lines[6:-1] == [escape.visible(line, keep="\t") for line in code.rstrip("\n").split("\n")]


def test_terminal_text_of_a_hunk_and_a_command() -> None:
    """What a pin-sync stop printed (issue 45): `\\(`, `\\_` and a zero-width joiner in `#1`."""
    detail = "src/main.c hunk #1 @@ -17,7 +17,7 @@ (line 15 of 0001-Patch_line.patch)"
    markdown = f"| main | {escape.md_cell(detail)} |\n- then `patchctl pin-sync up --continue` (or `--abort`)\n"
    assert "\\(" in markdown and "\\_" in markdown and escape.ZWJ in markdown
    assert escape.terminal_text(markdown) == (
        f"| main | {detail} |\n- then `patchctl pin-sync up --continue` (or `--abort`)\n"
    )


def test_mentions_references_and_links_stay_text() -> None:
    hostile = "@user #1 GH-2 https://evil.example www.evil.example a@b.example [x](javascript:alert(1)) <b>x</b>"
    rendered = render(escape.md_text(hostile))
    assert "<a " not in rendered and "<b>" not in rendered
    assert escape.ZWJ in escape.md_text("@user") and escape.md_text("plain words") == "plain words"


def test_marker_tokens_keep_ordinary_names_and_close_no_comment() -> None:
    assert escape.marker_token("0001-fix_x.patch") == "0001-fix_x.patch"
    token = escape.marker_token("a --> <b>\n c%")
    assert "-->" not in token and " " not in token and "\n" not in token
    assert urllib.parse.unquote(token) == "a --> <b>\n c%"


# ---------------------------------------------------------------- GitHub Actions


def runner_command(line: str) -> str | None:
    """The workflow command the Actions runner reads in one line of a log, or None: `::name`
    after leading whitespace (TryParseV2), or `##[name]` anywhere (the older TryParse)."""
    if line.lstrip().startswith("::"):
        return line.lstrip()[2:].split("::", 1)[0]
    if (m := re.search(r"##\[([^\]]*)\]", line)) is not None:
        return m.group(1)
    return None


def runner_unescape_data(text: str) -> str:
    return text.replace("%0D", "\r").replace("%0A", "\n").replace("%25", "%")


def runner_unescape_property(text: str) -> str:
    return runner_unescape_data(text.replace("%3A", ":").replace("%2C", ","))


@given(hostile_text)
def test_log_line_is_one_line_that_is_never_a_workflow_command(text: str) -> None:
    line = escape.log_line(text)
    assert "\n" not in line and "\r" not in line
    assert runner_command(line) is None


@given(hostile_text, hostile_text)
def test_workflow_command_round_trips_through_the_runner(message: str, file: str) -> None:
    command = escape.workflow_command("error", message, file=file, line=3)
    assert "\n" not in command and "\r" not in command
    head, _, data = command[2:].partition("::")
    name, _, props = head.partition(" ")
    assert name == "error" and runner_unescape_data(data) == message
    fields = dict(pair.split("=", 1) for pair in props.split(","))
    assert runner_unescape_property(fields["file"]) == file and fields["line"] == "3"


@given(hostile_text)
def test_log_block_turns_commands_off_until_its_own_token(text: str) -> None:
    lines = escape.log_block(text).split("\n")
    assert lines[0].startswith("::stop-commands::") and lines[-1] == ""
    token = lines[0].removeprefix("::stop-commands::")
    resumes = [i for i, line in enumerate(lines) if line == f"::{token}::"]
    assert resumes == [len(lines) - 2]  # nothing in TEXT turns them on again early


# ---------------------------------------------------------------- shell


@given(hostile_text)
def test_shell_word_reads_back_as_the_same_single_word(text: str) -> None:
    word = escape.shell_word(text)
    assert "\n" not in word and "\r" not in word
    if not word.startswith("$'"):
        assert shlex.split(word) == [text]


def test_shell_words_with_control_characters_read_back_in_bash() -> None:
    words = ["a\nb", "tab\there", "quote'and\\back", "\x1b[31mred", "bytes\udcff"]
    script = "printf '%s\\0' " + escape.shell_command(words)
    out = subprocess.run(["bash", "-c", script], capture_output=True, check=True).stdout
    assert out.split(b"\0")[:-1] == [w.encode("utf-8", "surrogateescape") for w in words]
