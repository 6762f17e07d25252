"""`patchctl status --html` in a real browser: Debian's headless Chromium opens the page, the
screenshot shows the chart drawn from the series, and the page asks for nothing but itself.

patchctl runs as a user runs it (`python -m patchctl`, a child process). Without Chromium the
test skips, unless PATCHCTL_REQUIRE_BROWSER=1 (set by `.ci/run`, which installs it): then it fails.
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

from .conftest import Project
from .headless_chromium import REQUIRE_ENV, Box, Chromium, Visit, find_chromium
from .test_status import history  # noqa: F401  (the fixture: a series with drift, statuses and pin-syncs)

# The page's palette for the statuses in the fixture's series (patchctl status's colours).
COLOURS = {"Submitted": (0x45, 0x75, 0xB4), "Pending": (0xFD, 0xAE, 0x61), "Accepted": (0x1A, 0x98, 0x50)}
# The fixture's patches in series order: (upstream status, drift at the tip).
ROWS = [("Submitted", 1), ("Pending", 0), ("Accepted", 0), ("Submitted", 1)]
MIN_MARKER_PX, MAX_MARKER_PX = 4, 14  # a scatter marker's exact-colour core, at a scale factor of 1


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


def marker_blobs(rgb, box: Box, colour: tuple[int, int, int]) -> list[Blob]:
    """The marker-sized patches of exactly COLOUR inside BOX (4-connected)."""
    region = rgb[box.top : box.bottom, box.left : box.right]
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
    """What is wrong with the drift chart in VISIT's screenshot, for a series whose patches are
    ROWS; empty when it is drawn. The first three rows fix the chart's scale: a Submitted
    patch at drift 1 above a Pending and an Accepted one at drift 0 (one row apart each, the
    drift-1 marker to the right). Every row must then show its colour where the scale puts it."""
    box = visit.boxes.get("figure")
    if box is None or box.right - box.left < 100 or box.bottom - box.top < 100:
        return [f"no chart-sized figure on the page (its box: {box})"]
    rgb = pixels(visit.screenshot)
    blobs = {status: marker_blobs(rgb, box, colour) for status, colour in COLOURS.items()}
    missing = [status for status, found in blobs.items() if not found]
    if missing:
        return [f"no marker of the colour of {', '.join(missing)} in the chart"]
    scales = [
        (submitted, pending, accepted)
        for pending in blobs["Pending"]
        for accepted in blobs["Accepted"]
        for submitted in blobs["Submitted"]
        if abs(pending.x - accepted.x) <= 1
        and submitted.x > pending.x + 20
        and pending.y - submitted.y > 8
        and abs((pending.y - submitted.y) - (accepted.y - pending.y)) <= 2
    ]
    if len(scales) != 1:
        return [f"the first three patches' markers are not where the drift chart puts them ({len(scales)} fits)"]
    ((first, second, _),) = scales
    row_height, drift_width = second.y - first.y, first.x - second.x
    problems = []
    for i, (status, drift) in enumerate(rows):
        x, y = round(second.x + drift * drift_width), round(first.y + i * row_height)
        if tuple(rgb[y, x]) != COLOURS[status]:
            problems.append(f"row {i + 1} ({status}, drift {drift}): no {status} marker at ({x}, {y})")
    return problems


def render_page(project: Project, page: Path) -> None:
    """`patchctl status --html PAGE` in a child process, as a user runs it."""
    result = subprocess.run(
        [sys.executable, "-m", "patchctl", "-C", str(project.path), "status", "--html", str(page)],
        capture_output=True,
        text=True,
        timeout=120,
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
    render_page(project, page)
    text = page.read_text()
    # Pages each check below must fail on: the chart removed (its figure stays, empty); the
    # chart's frame kept and nothing drawn in it; Pending and Accepted swapping colours (markers
    # drawn, in the wrong places); and one that asks for an image elsewhere.
    svg = re.search(r"(<svg\b[^>]*>).*?(</svg>)", text, flags=re.DOTALL)
    assert svg is not None
    pending, accepted = (f"#{bytes(COLOURS[s]).hex()}" for s in ("Pending", "Accepted"))
    assert pending in text and accepted in text
    variants = {
        "chartless": text.replace(svg.group(0), "", 1),
        "blank": text.replace(svg.group(0), svg.group(1) + svg.group(2), 1),
        "swapped": text.replace(pending, "#swap").replace(accepted, pending).replace("#swap", accepted),
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

    # The chart is drawn from the series: each patch's marker in its status' colour, placed by
    # its drift (the last patch's is checked at the end).
    assert chart_problems(visits["status"], ROWS[:3]) == []
    (chartless,) = chart_problems(visits["chartless"], ROWS[:3])
    assert chartless.startswith("no chart-sized figure on the page")
    assert chart_problems(visits["blank"], ROWS[:3]) == [
        "no marker of the colour of Submitted, Pending, Accepted in the chart"
    ]
    assert chart_problems(visits["swapped"], ROWS[:3]) == [
        "the first three patches' markers are not where the drift chart puts them (0 fits)"
    ]
    # The page asked for nothing but itself (and the browser had no network: a dead proxy).
    assert visits["status"].requests == [page.as_uri()]
    assert visits["fetching"].requests == [pages[-1].as_uri(), "http://example.invalid/pixel.png"]
    # Every marker is visible: the legend once covered the last patch's (found by this test).
    assert chart_problems(visits["status"], ROWS) == []
