"""Rendering Markdown as GitHub would, and what must never come out of upstream text: a
CommonMark renderer with GFM tables (markdown-it-py) and GitHub's own post-processing rules
(it links @mentions, #N references and bare URLs in text outside code)."""

from __future__ import annotations

import html
import re

from markdown_it import MarkdownIt

_RENDERER = MarkdownIt("commonmark", {"html": True}).enable("table").enable("strikethrough")

# What GitHub links in rendered text (outside <code>, <pre> and <a>): mentions and emails,
# issue references, bare URLs.
GITHUB_LINKED = re.compile(r"(?<![\w`])@[A-Za-z0-9]|#\d|\bGH-\d|://|\bwww\.", re.IGNORECASE)
# Tags upstream text must never produce (Markdown itself makes none of these from our reports).
FOREIGN_TAG = re.compile(r"<(?!/?(?:p|code|pre|table|thead|tbody|tr|th|td|ul|li|h2|h3|strong|details|summary|br)\b)")


def render(markdown: str) -> str:
    return _RENDERER.render(markdown)


def text_outside_code(rendered: str) -> str:
    """The rendered text GitHub's reference filters read: code and pre blocks removed, tags
    dropped, entities decoded."""
    stripped = re.sub(r"<(code|pre)\b[^>]*>.*?</\1>", " ", rendered, flags=re.DOTALL)
    return html.unescape(re.sub(r"<[^>]+>", " ", stripped))


def assert_inert(markdown: str, *, folds: int | None = None) -> str:
    """MARKDOWN renders with no foreign tag, no link or image, nothing GitHub would link, and
    (when FOLDS is given) exactly that many <details> folds, each closed by its own tag.
    Returns the rendered HTML."""
    rendered = render(markdown)
    assert not FOREIGN_TAG.search(rendered), FOREIGN_TAG.search(rendered)
    assert "<a " not in rendered and "<img" not in rendered
    linked = GITHUB_LINKED.search(text_outside_code(rendered))
    assert linked is None, (linked, text_outside_code(rendered))
    if folds is not None:
        assert rendered.count("<details>") == folds and rendered.count("</details>") == folds, rendered
    return rendered
