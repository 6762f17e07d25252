"""`patchctl status --html` in a real browser: Debian's headless Chromium opens the page, the
screenshot shows the chart drawn from the series, and the page asks for nothing but itself; on
real series (LocalAI's, Ollama's, Electron's 161 chromium patches: `status_corpus`) no text box
of the charts overlaps another, every patch has its marker on its row in its verdict's colour,
a blocked patch points at its blocker, and the history chart has dates that read cleanly.

patchctl runs as a user runs it (`python -m patchctl`, a child process). Without Chromium the
tests skip, unless PATCHCTL_REQUIRE_BROWSER=1 (set by `.ci/run`, which installs it): then they
fail. With PATCHCTL_REFRESH_SCREENSHOTS=1 the corpus test writes the manual's screenshots
(docs/images/status-page-*.png); `test_the_manual_shows_screenshots_of_the_page` checks the
committed ones without a browser.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import pytest

from patchctl.loop.health_page import NOT_TRIED_COLOUR, VERDICT_COLOURS

from . import status_corpus
from .conftest import Project
from .headless_chromium import REQUIRE_ENV, Box, Chromium, Visit, find_chromium
from .test_status import history  # noqa: F401  (the fixture: a series with drift, statuses and pin-syncs)

ROOT = Path(__file__).resolve().parents[2]
REFRESH_ENV = "PATCHCTL_REFRESH_SCREENSHOTS"
# The manual's screenshots: file -> the corpus series it shows.
SCREENSHOTS = {"status-page-localai.png": "mudler/LocalAI", "status-page-electron.png": "electron/electron"}
SCREENSHOT_SIZE = (1200, 1000)


def rgb(colour: str) -> tuple[int, int, int]:
    return tuple(bytes.fromhex(colour.lstrip("#")))  # type: ignore[return-value]


# The fixture's patches in series order: (verdict at the tip, drift).
COLOURS = {verdict: rgb(VERDICT_COLOURS[verdict]) for verdict in ("ok", "mechanical")}
ROWS = [("ok", 1), ("ok", 0), ("ok", 0), ("mechanical", 1)]
MIN_MARKER_PX, MAX_MARKER_PX = 4, 14  # a marker's exact-colour core, at a scale factor of 1


def chromium_or_skip() -> str:
    """The browser to open the page in; without one a skip, or a failure where CI promised one."""
    binary = find_chromium()
    if binary is None:
        reason = "no headless browser: `apt-get install chromium` (Debian) to open the status page in one"
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{REQUIRE_ENV}=1 but {reason}")
        pytest.skip(reason)
    return binary


@pytest.fixture(scope="module")
def chromium() -> str:
    return chromium_or_skip()


def test_without_a_browser_the_test_skips_unless_ci_requires_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory: no chromium on it
    monkeypatch.delenv(REQUIRE_ENV, raising=False)
    with pytest.raises(pytest.skip.Exception, match="apt-get install chromium"):
        chromium_or_skip()
    monkeypatch.setenv(REQUIRE_ENV, "1")
    with pytest.raises(pytest.fail.Exception, match=f"{REQUIRE_ENV}=1 but no headless browser"):
        chromium_or_skip()


@dataclass(frozen=True)
class Blob:
    """A connected patch of one exact colour: its centre and size in screenshot pixels."""

    x: float
    y: float
    width: int
    height: int


def pixels(png: bytes):
    """The screenshot as an array of 8-bit RGB rows (matplotlib reads the PNG: the test extra has it)."""
    import matplotlib.image

    image = matplotlib.image.imread(io.BytesIO(png), format="png")
    return (image[..., :3] * 255).round().astype("uint8")


def marker_blobs(rgb_rows, box: Box, colour: tuple[int, int, int]) -> list[Blob]:
    """The marker-sized patches of exactly COLOUR inside BOX (4-connected)."""
    region = rgb_rows[box.top : box.bottom, box.left : box.right]
    mask = (region == colour).all(axis=-1)
    seen = set()
    blobs = []
    for start in zip(*mask.nonzero()):
        if start in seen:
            continue
        seen.add(start)
        queue, members = deque([start]), []
        while queue:
            y, x = queue.popleft()
            members.append((y, x))
            for near in ((y + 1, x), (y - 1, x), (y, x + 1), (y, x - 1)):
                inside = 0 <= near[0] < mask.shape[0] and 0 <= near[1] < mask.shape[1]
                if inside and near not in seen and mask[near]:
                    seen.add(near)
                    queue.append(near)
        ys, xs = [m[0] for m in members], [m[1] for m in members]
        width, height = max(xs) - min(xs) + 1, max(ys) - min(ys) + 1
        if MIN_MARKER_PX <= width <= MAX_MARKER_PX and MIN_MARKER_PX <= height <= MAX_MARKER_PX:
            blobs.append(Blob(box.left + sum(xs) / len(xs), box.top + sum(ys) / len(ys), width, height))
    return blobs


def chart_problems(visit: Visit, rows: list[tuple[str, int]]) -> list[str]:
    """What is wrong with the verdict chart in VISIT's screenshot, for a series whose patches
    are ROWS; empty when it is drawn. The first three rows fix the chart's scale: an ok patch at
    drift 1 above two ok ones at drift 0 (one row apart each, the drift-1 marker to the right).
    Every row must then show its verdict's colour where the scale puts it."""
    box = visit.boxes.get("figure")
    if box is None or box.right - box.left < 100 or box.bottom - box.top < 100:
        return [f"no chart-sized figure on the page (its box: {box})"]
    rgb_rows = pixels(visit.screenshot)
    blobs = {verdict: marker_blobs(rgb_rows, box, colour) for verdict, colour in COLOURS.items()}
    missing = [verdict for verdict, found in blobs.items() if not found]
    if missing:
        return [f"no marker of the colour of {', '.join(missing)} in the chart"]
    scales = [
        (first, second, third)
        for first in blobs["ok"]
        for second in blobs["ok"]
        for third in blobs["ok"]
        if abs(second.x - third.x) <= 1
        and first.x > second.x + 20
        and second.y - first.y > 8
        and abs((second.y - first.y) - (third.y - second.y)) <= 2
    ]
    if len(scales) != 1:
        return [f"the first three patches' markers are not where the verdict chart puts them ({len(scales)} fits)"]
    ((first, second, _),) = scales
    row_height, drift_width = second.y - first.y, first.x - second.x
    problems = []
    for i, (verdict, drift) in enumerate(rows):
        x, y = round(second.x + drift * drift_width), round(first.y + i * row_height)
        if tuple(rgb_rows[y, x]) != COLOURS[verdict]:
            problems.append(f"row {i + 1} ({verdict}, drift {drift}): no {verdict} marker at ({x}, {y})")
    return problems


def render_page(project: Path, page: Path, *args: str) -> None:
    """`patchctl status --html PAGE` in a child process, as a user runs it."""
    result = subprocess.run(
        [sys.executable, "-m", "patchctl", "-C", str(project), "status", "--html", str(page), *args],
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_status_page_draws_its_chart_in_headless_chromium_and_fetches_nothing(
    chromium: str,  # first: without a browser, the test skips before it builds the series
    project: Project,
    history: dict,  # noqa: F811
    tmp_path: Path,
) -> None:
    page = tmp_path / "status.html"
    render_page(project.path, page)
    text = page.read_text()
    # Pages each check below must fail on: the chart removed (its figure stays, empty); the
    # chart's frame kept and nothing drawn in it; ok and mechanical swapping colours (markers
    # drawn, in the wrong places); and one that asks for an image elsewhere.
    svg = re.search(r"(<svg\b[^>]*>).*?(</svg>)", text, flags=re.DOTALL)
    assert svg is not None
    ok_colour, mechanical = VERDICT_COLOURS["ok"], VERDICT_COLOURS["mechanical"]
    assert ok_colour in text and mechanical in text
    variants = {
        "chartless": text.replace(svg.group(0), "", 1),
        "blank": text.replace(svg.group(0), svg.group(1) + svg.group(2), 1),
        "swapped": text.replace(ok_colour, "#swap").replace(mechanical, ok_colour).replace("#swap", mechanical),
        "fetching": text.replace("<body>", '<body><img src="http://example.invalid/pixel.png" alt="">', 1),
    }
    pages = [page]
    for name, variant in variants.items():
        assert variant != text
        pages.append(tmp_path / f"{name}.html")
        pages[-1].write_text(variant)
    with Chromium(chromium, tmp_path / "profile") as browser:
        visits = {path.stem: browser.visit(path.as_uri(), ("figure",)) for path in pages}
    for name, visit in visits.items():
        (tmp_path / f"{name}.png").write_bytes(visit.screenshot)  # kept for a look when this fails

    # The chart is drawn from the series: each patch's marker in its verdict's colour, placed by
    # its drift (the last patch's is checked at the end).
    assert chart_problems(visits["status"], ROWS[:3]) == []
    (chartless,) = chart_problems(visits["chartless"], ROWS[:3])
    assert chartless.startswith("no chart-sized figure on the page")
    assert chart_problems(visits["blank"], ROWS[:3]) == ["no marker of the colour of ok, mechanical in the chart"]
    assert chart_problems(visits["swapped"], ROWS[:3]) == [
        "the first three patches' markers are not where the verdict chart puts them (0 fits)"
    ]
    # The page asked for nothing but itself (and the browser had no network: a dead proxy).
    assert visits["status"].requests == [page.as_uri()]
    assert visits["fetching"].requests == [pages[-1].as_uri(), "http://example.invalid/pixel.png"]
    # Every marker is visible: the legend once covered the last patch's (found by this test).
    assert chart_problems(visits["status"], ROWS) == []


# ---------------------------------------------------------------- legibility on real series

# What the page tells the browser: every text box of the charts, every patch's marker (its box
# and colours), each blocked patch's arrow, the figures in order, and the history's date ticks.
MEASURE = r"""
(() => {
  const box = e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
  const style = (e, key) => {
    const found = (e && e.getAttribute('style') || '').match(new RegExp(key + ':\\s*(#[0-9a-f]{6})'));
    return found ? found[1] : null;
  };
  const texts = [...document.querySelectorAll('svg g[id]')]
    .filter(g => /^text_\d+$|-label-\d+$/.test(g.id)).map(g => [g.id, ...box(g)]);
  const markers = {};
  for (const g of document.querySelectorAll('svg g[id*="-marker-"]')) {
    const use = g.querySelector('use');
    markers[g.id] = {box: box(g), fill: style(use, 'fill'), stroke: style(use, 'stroke')};
  }
  const arrows = {};
  for (const g of document.querySelectorAll('svg g[id*="-blocked-"]')) arrows[g.id] = box(g);
  const labels = {};
  for (const g of document.querySelectorAll('svg g[id*="-label-"]')) labels[g.id] = box(g);
  return {
    texts, markers, arrows, labels,
    figures: [...document.querySelectorAll('figure')].map(f => f.id),
    dateTicks: document.querySelectorAll('figure[id$="-history"] svg g[id^="xtick_"]').length,
  };
})()
"""


def overlaps(texts: list[list]) -> list[str]:
    """Pairs of text boxes (id, left, top, right, bottom) that overlap by more than half a pixel."""
    found = []
    shown = [t for t in texts if t[3] - t[1] > 0 and t[4] - t[2] > 0]
    for i, a in enumerate(shown):
        for b in shown[i + 1 :]:
            width = min(a[3], b[3]) - max(a[1], b[1])
            height = min(a[4], b[4]) - max(a[2], b[2])
            if width > 0.5 and height > 0.5:
                found.append(f"{a[0]} {[round(v) for v in a[1:]]} overlaps {b[0]} {[round(v) for v in b[1:]]}")
    return found


def legibility_problems(measured: dict, names: list[str], verdicts: dict[str, str]) -> list[str]:
    """What keeps a reader from the page: overlapping labels, a patch without its marker on its
    row in its verdict's colour, a blocked patch without its arrow, dates that do not read."""
    problems = overlaps(measured["texts"])
    colours = {**{v: c for v, c in VERDICT_COLOURS.items()}, "not tried": NOT_TRIED_COLOUR}
    for i, name in enumerate(names):
        marker, label = measured["markers"].get(f"s0-marker-{i}"), measured["labels"].get(f"s0-label-{i}")
        if marker is None or label is None:
            problems.append(f"{name}: no {'marker' if marker is None else 'label'}")
            continue
        left, top, right, bottom = marker["box"]
        middle = (top + bottom) / 2
        if right - left < 3 or bottom - top < 3:
            problems.append(f"{name}: its marker is {right - left:.1f} x {bottom - top:.1f} px")
        if not label[1] - 1 <= middle <= label[3] + 1:
            problems.append(
                f"{name}: its marker (y {middle:.0f}) is not on its label's row ({label[1]:.0f}..{label[3]:.0f})"
            )
        verdict = verdicts[name]
        want = colours[verdict]
        if verdict == "blocked":
            if (marker["fill"], marker["stroke"]) != ("#ffffff", want):
                problems.append(f"{name}: blocked, drawn {marker['fill']} on {marker['stroke']}")
            arrow = measured["arrows"].get(f"s0-blocked-{i}")
            blocker = measured["markers"].get(f"s0-marker-{i - 1}")
            if arrow is None or blocker is None:
                problems.append(f"{name}: blocked, and no arrow to its blocker")
            else:
                # From its marker to its blocker's, each end short by a marker's radius and a gap.
                above, (top, bottom) = (blocker["box"][1] + blocker["box"][3]) / 2, (arrow[1], arrow[3])
                if not (above - 10 <= top <= above + 10 and middle - 10 <= bottom <= middle + 10):
                    problems.append(f"{name}: its arrow {arrow} does not reach from its row to its blocker's")
        elif marker["fill"] != want:
            problems.append(f"{name}: {verdict}, drawn {marker['fill']} (want {want})")
    if measured["figures"][:1] != ["s0-tip"]:
        problems.append(f"the first chart is not the verdict chart: {measured['figures']}")
    if "s0-history" in measured["figures"] and measured["dateTicks"] < 3:
        problems.append(f"the history chart has {measured['dateTicks']} date tick(s)")
    return problems


CORPUS_CASES = [
    pytest.param("mudler/LocalAI", None, id="localai"),
    pytest.param("ollama/ollama", None, id="ollama-37"),
    pytest.param("electron/electron", 46, id="electron-first-46"),
    pytest.param("electron/electron", None, id="electron-161"),
]


@pytest.mark.parametrize(("repository", "limit"), CORPUS_CASES)
def test_the_page_of_a_real_series_is_legible(
    chromium: str, tmp_path: Path, repository: str, limit: int | None
) -> None:
    fixture = status_corpus.load(repository)
    built = status_corpus.build(fixture, tmp_path, limit=limit)
    page = tmp_path / "status.html"
    render_page(built.project, page)
    with Chromium(chromium, tmp_path / "profile", *SCREENSHOT_SIZE) as browser:
        visit = browser.visit(page.as_uri(), evaluate=MEASURE)
    assert visit.requests == [page.as_uri()]
    measured = visit.value
    assert isinstance(measured, dict)
    # The history of the series directory spans years in each of them: it is drawn.
    assert measured["figures"] == ["s0-tip", "s0-history"]
    assert legibility_problems(measured, built.names, built.verdicts) == []
    assert len(built.names) == (limit or len(fixture["patches"]))
    shot = next((name for name, repo in SCREENSHOTS.items() if repo == repository and limit is None), None)
    if shot and os.environ.get(REFRESH_ENV) == "1":
        save_screenshot(visit.screenshot, ROOT / "docs" / "images" / shot, fixture)


def test_the_legibility_check_finds_what_a_reader_would(chromium: str, tmp_path: Path) -> None:
    """Each problem `legibility_problems` looks for, made on a real page: labels that cover each
    other, a marker gone, one off its row, a wrong colour, a blocked patch without its arrow."""
    fixture = status_corpus.load("ollama/ollama")
    built = status_corpus.build(fixture, tmp_path, limit=12)
    page = tmp_path / "status.html"
    render_page(built.project, page)
    text = page.read_text()
    blocked = built.names.index(next(n for n, v in built.verdicts.items() if v == "blocked"))
    ok_row = built.names.index(next(n for n, v in built.verdicts.items() if v == "ok"))
    variants = {
        # Every label's glyphs drawn at one place: they overlap.
        "piled": re.sub(
            r'(<g id="s0-label-\d+">\s*(?:<!--.*?-->\s*)?<g transform=")translate\([^)]*\)', r"\1translate(10 10)", text
        ),
        "markerless": re.sub(rf'<g id="s0-marker-{ok_row}">.*?</g>\s*</g>', "", text, count=1, flags=re.S),
        "recoloured": text.replace(VERDICT_COLOURS["ok"], "#123456"),
        "arrowless": re.sub(rf'<g id="s0-blocked-{blocked}">.*?</g>', "", text, count=1, flags=re.S),
    }
    pages = {}
    for name, variant in variants.items():
        assert variant != text, name
        pages[name] = tmp_path / f"{name}.html"
        pages[name].write_text(variant)
    with Chromium(chromium, tmp_path / "profile", *SCREENSHOT_SIZE) as browser:
        found = {
            name: legibility_problems(browser.visit(path.as_uri(), evaluate=MEASURE).value, built.names, built.verdicts)
            for name, path in pages.items()
        }
    assert any(" overlaps " in p for p in found["piled"]), found["piled"]
    assert f"{built.names[ok_row]}: no marker" in found["markerless"]
    assert any(p.startswith(f"{built.names[ok_row]}: ok, drawn #123456") for p in found["recoloured"])
    assert f"{built.names[blocked]}: blocked, and no arrow to its blocker" in found["arrowless"]


# ---------------------------------------------------------------- the manual's screenshots


def save_screenshot(png: bytes, target: Path, fixture: dict) -> None:
    """PNG (a screenshot of the page) as the manual keeps it: a 64-colour palette (small), and
    a `Source` text chunk naming the series it shows."""
    from PIL import Image, PngImagePlugin

    image = Image.open(io.BytesIO(png)).convert("RGB").quantize(colors=64, method=Image.Quantize.MEDIANCUT)
    info = PngImagePlugin.PngInfo()
    info.add_text("Source", source_of(fixture))
    target.parent.mkdir(parents=True, exist_ok=True)
    image.save(target, optimize=True, pnginfo=info)


def source_of(fixture: dict) -> str:
    return f"patchctl status --html on {fixture['repository']} {fixture['commit'][:12]} {fixture['dir']}"


@pytest.mark.parametrize("name", sorted(SCREENSHOTS))
def test_the_manual_shows_screenshots_of_the_page(name: str) -> None:
    """The committed screenshot is a PNG of the page on its series: the size the test takes,
    its `Source` chunk naming the series, the verdict colours of that series in it, and small.
    (`PATCHCTL_REFRESH_SCREENSHOTS=1 pytest tests/patchctl/test_status_browser.py -k legible`
    makes them again.)"""
    from PIL import Image

    path = ROOT / "docs" / "images" / name
    fixture = status_corpus.load(SCREENSHOTS[name])
    assert path.stat().st_size < 150_000, f"{path}: {path.stat().st_size} bytes: keep the manual's images small"
    with Image.open(path) as image:
        image.verify()
    with Image.open(path) as image:
        assert image.format == "PNG" and image.size == SCREENSHOT_SIZE
        assert image.text.get("Source") == source_of(fixture)
        colours = {colour for _, colour in image.convert("RGB").getcolors(maxcolors=1 << 16) or []}
    roles = set(status_corpus._roles(len(fixture["patches"])))
    for verdict in roles:
        want = rgb(VERDICT_COLOURS[verdict])
        assert any(sum((a - b) ** 2 for a, b in zip(want, c)) < 400 for c in colours), f"{name}: no {verdict} colour"
    assert f"images/{name}" in (ROOT / "docs" / "tutorials" / "status-page.md").read_text()
