"""The dashboard issue as a reader sees it: its body rendered as GitHub renders Markdown
(CommonMark with GFM tables, markdown-it-py) in a page styled like an issue, opened in Debian's
headless Chromium, on Electron's real series (161 chromium patches, `status_corpus`) with a
pin-sync pull request and a canary issue open. The page shows every row the body has, and asks
for nothing but itself. With PATCHCTL_REFRESH_SCREENSHOTS=1 it writes the manual's screenshot
(docs/images/dashboard-electron.png); `test_the_manual_shows_the_dashboard` checks the committed
one without a browser."""

from __future__ import annotations

import html
import io
import json
import os
from pathlib import Path

from patchctl.output.dashboard import STOPS
from patchctl.output.escape import md_code

from . import status_corpus
from .headless_chromium import Chromium
from .markdown_check import render
from .test_dashboard import BOT, REPO, GitHub, github, issue, ok  # noqa: F401  (github: the fixture)
from .test_dashboard import body as markdown_body
from .test_status_browser import REFRESH_ENV, chromium  # noqa: F401  (chromium: the fixture)

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOT = ROOT / "docs" / "images" / "dashboard-electron.png"
SCREENSHOT_SIZE = (1100, 1000)
SOURCE = "patchctl dashboard --github on electron/electron {commit} {dir} (a tip made to give every verdict)"
# An issue's body column, as github.com lays it out (its own stylesheet is not fetched: none is).
STYLE = """
body { margin: 0; background: #fff; color: #1f2328;
       font: 14px/1.5 -apple-system, "Segoe UI", "Noto Sans", Helvetica, Arial, sans-serif; }
main { max-width: 1012px; margin: 24px auto; padding: 16px 24px; border: 1px solid #d1d9e0; border-radius: 6px; }
h1 { font-size: 26px; font-weight: 400; margin: 0 0 16px; }
h3 { font-size: 16px; margin: 24px 0 12px; }
table { border-collapse: collapse; display: block; overflow: auto; margin-bottom: 16px; }
th, td { border: 1px solid #d1d9e0; padding: 4px 10px; vertical-align: top; }
th { font-weight: 600; background: #f6f8fa; }
code { font: 12px ui-monospace, SFMono-Regular, Menlo, monospace; background: #eff1f3; padding: 1px 4px;
       border-radius: 4px; }
"""
# What the page tells the browser: the rows of each table (the series', the fold's), and the items
# of each list (the pull requests, the issues, the patches to look at).
MEASURE = """
(() => ({
  tables: [...document.querySelectorAll('table')].map(t => t.querySelectorAll('tbody tr').length),
  lists: [...document.querySelectorAll('main > ul')].map(u => u.querySelectorAll(':scope > li').length),
}))()
"""


def page_of(body: str) -> str:
    """BODY (the issue's Markdown) as a self-contained page: rendered, under the issue's title."""
    return (
        '<!doctype html><html><head><meta charset="utf-8"><title>patchctl dashboard</title>'
        f"<style>{STYLE}</style></head><body><main><h1>{html.escape('patchctl dashboard')} #1</h1>"
        f"{render(body)}</main></body></html>"
    )


def test_the_dashboard_of_a_real_series_reads_as_an_issue(
    chromium: str,  # noqa: F811  (first: without a browser, the test skips before it builds the series)
    github: GitHub,  # noqa: F811
    tmp_path: Path,
) -> None:
    fixture = status_corpus.load("electron/electron")
    built = status_corpus.build(fixture, tmp_path)
    series = fixture["series"]
    hand = [name for name, verdict in built.verdicts.items() if verdict in STOPS]  # a pin-sync stops at them
    key = f"upstream/apply/{series}/{hand[0]}/unbisected"  # the canary's key of its break
    github.seed(
        REPO,
        next=40,
        labels=[{"name": "patchctl-canary"}],
        pulls=[
            {"number": 31, "title": "pin-sync: move upstream forward", "state": "OPEN",
             "headRefName": "patchctl/pin-sync/upstream", "mergeable": "CONFLICTING", "reviewDecision": "",
             "statusCheckRollup": [{"status": "COMPLETED", "conclusion": "FAILURE"}] * 2},
        ],
        issues=[
            issue(32, f"canary upstream: {series}/{hand[0]} no longer applies",
                  f"<!-- patchctl-canary-key: {key} -->\n", "patchctl-canary", BOT),
        ],
    )  # fmt: skip
    report = tmp_path / "status.json"
    report.write_text(ok("-C", built.project, "status", "--json"))  # judged once
    board = json.loads(ok("dashboard", "--status", report, "--github", "--json"))
    body = markdown_body("dashboard", "--status", report, "--github")
    page = tmp_path / "dashboard.html"
    page.write_text(page_of(body))
    with Chromium(chromium, tmp_path / "profile", *SCREENSHOT_SIZE) as browser:
        visit = browser.visit(page.as_uri(), evaluate=MEASURE)
    (tmp_path / "dashboard.png").write_bytes(visit.screenshot)  # kept for a look when this fails
    assert visit.requests == [page.as_uri()]
    looked_at = sum(1 for patch in board["patches"] if patch["reasons"])
    # Everything the body has is on the page: one series, a pull request, an issue, the patches to
    # look at, every patch.
    assert visit.value == {"tables": [1, len(built.names)], "lists": [1, 1, looked_at]}
    # The patch the canary filed about names its issue, in the JSON and on its row.
    assert [p["issue"] for p in board["patches"] if p["patch"] == hand[0]] == [32]
    [row] = [line for line in body.splitlines() if line.startswith(f"- {md_code(hand[0])}: **")]
    assert row.endswith(", canary issue #32)")
    if os.environ.get(REFRESH_ENV) == "1":
        save_screenshot(visit.screenshot, SCREENSHOT, fixture)


def save_screenshot(png: bytes, target: Path, fixture: dict) -> None:
    from PIL import Image, PngImagePlugin

    image = Image.open(io.BytesIO(png)).convert("RGB").quantize(colors=64, method=Image.Quantize.MEDIANCUT)
    info = PngImagePlugin.PngInfo()
    info.add_text("Source", SOURCE.format(commit=fixture["commit"][:12], dir=fixture["dir"]))
    image.save(target, optimize=True, pnginfo=info)


def test_the_manual_shows_the_dashboard() -> None:
    """The committed screenshot is the page of the test above: its size, its `Source` chunk, small,
    and shown in the manual. (`PATCHCTL_REFRESH_SCREENSHOTS=1 pytest
    tests/patchctl/test_dashboard_browser.py -k reads` makes it again.)"""
    from PIL import Image

    fixture = status_corpus.load("electron/electron")
    assert SCREENSHOT.stat().st_size < 150_000, f"{SCREENSHOT}: keep the manual's images small"
    with Image.open(SCREENSHOT) as image:
        assert image.format == "PNG" and image.size == SCREENSHOT_SIZE
        assert image.text.get("Source") == SOURCE.format(commit=fixture["commit"][:12], dir=fixture["dir"])
    assert "images/dashboard-electron.png" in (ROOT / "docs" / "tutorials" / "dashboard.md").read_text()
