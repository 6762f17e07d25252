"""`patchctl status --html`: the health report as one self-contained HTML page.

The page answers "how bad is it" first: per series, the verdicts at the tip counted in one
line, then a chart of the series at the tip (each patch a row, its marker coloured by its
verdict and placed by its drift; a blocked patch hollow, with an arrow to the patch that
blocks it; beside it, how long each has been carried, shaded when it stopped a past bump),
then, when the series directory has a history of more than one day, the series over time:
patches carried, stacked by upstream status, with the patches that left it marked (those that
went upstream apart). Then the table: per patch its verdict, upstream status, how long it has
been carried, how many pin-syncs it stopped, its drift and its notes.

The page needs nothing from elsewhere: no script at all, no stylesheet, font or image it
would fetch. Its charts are SVG drawn by matplotlib (the `health` extra, imported only here,
only when a page is asked for) and embedded inline, glyphs as paths. Every string from the
series or the upstream is HTML-escaped, and drawn as it is: matplotlib's mathtext is off (a
patch named `0001-$\\x$.patch` is text, not a formula that fails to parse). Rows are a fixed
height apart and dates use one concise label per tick, so that no label covers another at
any series length (`tests/patchctl/test_status_browser.py` measures every text box in
Chromium). The SVG is made deterministic (a fixed hash salt, no date), so the same report
gives the same page.
"""

from __future__ import annotations

import html
import io
from datetime import datetime, timezone

from ..errors import EnvironmentFailure
from ..output.escape import linkable_url
from .canary_report import BLOCKED, CONFLICT, MECHANICAL, NEEDS_HAND, NEEDS_LOOK

# A colour per upstream status, in Yocto's order; the ones that mean "still ours to carry" warm.
STATUS_COLOURS = {
    "Accepted": "#1a9850",
    "Backport": "#66bd63",
    "Submitted": "#4575b4",
    "Pending": "#fdae61",
    "Denied": "#d73027",
    "Inappropriate": "#8c8c8c",
    "none": "#f46d43",
    "malformed": "#762a83",
}
OK = "ok"
NOT_TRIED = "not tried"
# A colour per verdict at the tip (the canary's words), from fine to stopped; a verdict this
# table does not know yet takes the next of STOP_COLOURS, in the order it first appears.
VERDICT_COLOURS = {
    OK: "#1a9850",
    MECHANICAL: "#4575b4",
    CONFLICT: "#a50026",
    NEEDS_HAND: "#d73027",
    NEEDS_LOOK: "#9e6f00",
    BLOCKED: "#e66101",
}
STOP_COLOURS = ("#b2182b", "#762a83", "#8c510a")
NOT_TRIED_COLOUR = "#969696"
WENT_UPSTREAM_COLOUR = "#1a9850"
LEFT_COLOUR = "#525252"
CARRIED_COLOUR, STOPPED_COLOUR = "#bdbdbd", "#fdae61"
ROW_INCHES = 0.2  # a patch's row: 7-point labels 14.4 points apart never touch
_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.5em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
.flag { color: #b00; }
.verdicts { font-size: 1.25em; }
.verdict { display: inline-block; padding: 0.1em 0.6em; margin-right: 0.4em; border-radius: 0.3em; color: #fff; }
figure { margin: 1em 0; }
code { font-size: 0.95em; }
td code { overflow-wrap: anywhere; }
"""


def _matplotlib():
    try:
        import matplotlib
    except ImportError:
        raise EnvironmentFailure(
            "--html draws its charts with matplotlib, which is not installed: "
            "`python -m pip install 'patchctl[health]'` (or matplotlib itself)"
        ) from None
    matplotlib.use("svg", force=True)
    matplotlib.rcParams["svg.hashsalt"] = "patchctl-status"  # stable ids: the same report, the same page
    matplotlib.rcParams["svg.fonttype"] = "path"  # glyphs as paths: no font is needed to read it
    matplotlib.rcParams["text.parse_math"] = False  # `$...$` in a patch name is text, never mathtext
    matplotlib.rcParams["text.usetex"] = False  # nor LaTeX
    from matplotlib.figure import Figure

    return Figure


def verdict_colours(verdicts: list[str]) -> dict[str, str]:
    """A colour for each of VERDICTS: VERDICT_COLOURS', else the next of STOP_COLOURS."""
    colours, extra = {}, iter(STOP_COLOURS * len(verdicts))
    for verdict in verdicts:
        if verdict not in colours:
            colours[verdict] = NOT_TRIED_COLOUR if verdict == NOT_TRIED else VERDICT_COLOURS.get(verdict) or next(extra)
    return colours


def _verdicts_in_order(patches: list[dict]) -> list[str]:
    """The verdicts of PATCHES, the known ones in VERDICT_COLOURS' order, then the others."""
    found = [p.get("verdict") or NOT_TRIED for p in patches]
    known = [v for v in VERDICT_COLOURS if v in found]
    return known + sorted({v for v in found if v not in VERDICT_COLOURS})


def _svg(figure) -> str:
    out = io.StringIO()
    figure.savefig(out, format="svg", metadata={"Date": None, "Creator": "patchctl status"})
    svg = out.getvalue()
    return svg[svg.index("<svg") :]  # inline: without the XML declaration and DOCTYPE


def tip_chart(series: dict, prefix: str) -> str:
    """An inline SVG of the series at the tip (its JSON form): a row per patch, its marker at
    its drift in its verdict's colour (hollow when blocked, an arrow to its blocker), and beside
    it a bar of how long it has been carried. Its elements' ids start with PREFIX: `-marker-N`
    and `-label-N` for patch N."""
    Figure = _matplotlib()
    from matplotlib.lines import Line2D
    from matplotlib.patches import FancyArrowPatch, Patch

    patches = series["patches"]
    count = len(patches)
    order = _verdicts_in_order(patches)
    colours = verdict_colours(order)
    figure = Figure(figsize=(10, max(2.4, ROW_INCHES * count + 1.9)), layout="constrained")
    drift_axes, age_axes = figure.subplots(1, 2, sharey=True, width_ratios=(3, 2))
    row = {p["patch"]: i for i, p in enumerate(patches)}
    drifts = [p.get("drift") or 0 for p in patches]
    for i, patch in enumerate(patches):
        verdict = patch.get("verdict") or NOT_TRIED
        blocked = verdict == BLOCKED
        drift_axes.plot(
            [drifts[i]],
            [i],
            linestyle="none",
            marker="o",
            markersize=6 if blocked else 7,
            markeredgewidth=1.6 if blocked else 0,  # a filled marker has no edge: one clean disc
            color=colours[verdict],
            markerfacecolor="white" if blocked else colours[verdict],
            gid=f"{prefix}-marker-{i}",
            zorder=3,
        )
        blocker = row.get(patch.get("blocked_by") or "")
        if blocked and blocker is not None:
            drift_axes.add_patch(
                FancyArrowPatch(
                    (drifts[i], i),
                    (drifts[blocker], blocker),
                    arrowstyle="->",
                    mutation_scale=9,
                    shrinkA=4,
                    shrinkB=4,
                    color=colours[verdict],
                    linewidth=0.9,
                    gid=f"{prefix}-blocked-{i}",
                    zorder=2,
                )
            )
    # The names come from the series directory: text, never markup (parse_math, beside the rcParam above).
    drift_axes.set_yticks(range(count), labels=[_short(p["patch"]) for p in patches], fontsize=7, parse_math=False)
    for i, label in enumerate(drift_axes.get_yticklabels()):
        label.set_gid(f"{prefix}-label-{i}")
    drift_axes.set_ylim(count - 0.5, -0.5)  # the first patch on top
    drift_axes.set_xlim(left=-0.5, right=max(drifts, default=0) * 1.08 + 1)
    drift_axes.xaxis.get_major_locator().set_params(integer=True)  # drift counts commits: no 0.5 ticks
    drift_axes.set_xlabel("drift: upstream commits since the pin that touched its files", fontsize=8)
    drift_axes.grid(axis="x", alpha=0.3)
    ages = [p.get("age_days") or 0 for p in patches]
    stopped = [bool(p.get("pin_syncs_stopped")) for p in patches]
    age_axes.barh(
        range(count), ages, height=0.6, color=[STOPPED_COLOUR if s else CARRIED_COLOUR for s in stopped], zorder=2
    )
    age_axes.set_xlabel("carried: days since it entered the series", fontsize=8)
    age_axes.tick_params(axis="y", left=False)
    age_axes.grid(axis="x", alpha=0.3)
    age_axes.xaxis.get_major_locator().set_params(integer=True)
    handles = [
        Line2D(
            [],
            [],
            linestyle="none",
            marker="o",
            color=colours[v],
            markerfacecolor="white" if v == BLOCKED else colours[v],
            label=f"{v} ({sum(1 for p in patches if (p.get('verdict') or NOT_TRIED) == v)})",
        )
        for v in order
    ]
    handles.append(Patch(color=CARRIED_COLOUR, label="carried"))
    if any(stopped):
        handles.append(Patch(color=STOPPED_COLOUR, label=f"stopped a past pin-sync ({sum(stopped)})"))
    # Above the axes: inside, a legend covers whichever patch's marker lies under it.
    figure.legend(handles=handles, loc="outside upper left", ncols=min(len(handles), 6), fontsize=8, frameon=False)
    return _svg(figure)


def history_chart(series: dict, prefix: str) -> str | None:
    """An inline SVG of the series over time (its `size_history`, `departures`): patches
    carried, stacked by upstream status, and the patches that left it marked (a green triangle:
    went upstream). None when the history spans less than two days: nothing to chart."""
    points = series.get("size_history") or []
    dates = [_utc(p["date"]) for p in points]
    if len({d.date() for d in dates}) < 2:
        return None
    Figure = _matplotlib()
    from matplotlib.dates import AutoDateLocator, ConciseDateFormatter

    statuses = [s for s in STATUS_COLOURS if any(p["statuses"].get(s) for p in points)]
    statuses += sorted({s for p in points for s in p["statuses"]} - set(statuses))
    figure = Figure(figsize=(10, 3.6), layout="constrained")
    axes = figure.subplots()
    # A little past the last change, so that the series as it stands shows as a step of its own.
    end = dates[-1] + (dates[-1] - dates[0]) * 0.03
    axes.stackplot(
        [*dates, end],
        [[p["statuses"].get(s, 0) for p in [*points, points[-1]]] for s in statuses],
        labels=[f"{s} (now {points[-1]['statuses'].get(s, 0)})" for s in statuses],
        colors=[STATUS_COLOURS.get(s, "#bababa") for s in statuses],
        step="post",
        alpha=0.85,
    )
    totals = [p["patches"] for p in points]
    departures = [d for d in series.get("departures") or [] if dates[0] <= _utc(d["date"]) <= dates[-1]]
    for went, colour, marker, label in (
        (True, WENT_UPSTREAM_COLOUR, "v", "went upstream"),
        (False, LEFT_COLOUR, "x", "left the series"),
    ):
        chosen = [d for d in departures if d["went_upstream"] == went]
        if chosen:
            xs = [_utc(d["date"]) for d in chosen]
            axes.plot(
                xs,
                [_total_at(dates, totals, x) + 0.6 for x in xs],
                linestyle="none",
                marker=marker,
                markersize=5,
                color=colour,
                label=f"{label} ({len(chosen)})",
                gid=f"{prefix}-{'upstream' if went else 'left'}",
                zorder=3,
            )
    locator = AutoDateLocator(minticks=3, maxticks=8)
    axes.xaxis.set_major_locator(locator)
    axes.xaxis.set_major_formatter(ConciseDateFormatter(locator))
    axes.set_xlim(dates[0], end)
    axes.set_ylim(0, max(totals) * 1.12 + 1)
    axes.yaxis.get_major_locator().set_params(integer=True)
    axes.set_ylabel("patches carried", fontsize=8)
    axes.grid(axis="y", alpha=0.3)
    figure.legend(loc="outside upper left", ncols=4, fontsize=8, frameon=False)
    return _svg(figure)


def _utc(stamp: str) -> datetime:
    moment = datetime.fromisoformat(stamp)
    return (moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)).astimezone(timezone.utc)


def _total_at(dates: list[datetime], totals: list[int], when: datetime) -> int:
    """The series' size just before WHEN (a departure is drawn above the step it left)."""
    before = [total for date, total in zip(dates, totals) if date < when]
    return before[-1] if before else totals[0]


def _short(name: str, limit: int = 48) -> str:
    return name if len(name) <= limit else name[: limit - 1] + "…"


def _days(patch: dict) -> str:
    if patch.get("age_days") is None:
        return "–"
    since = f" (since {html.escape(patch['added'][:10])})" if patch.get("added") else ""
    return f"{patch['age_days']} days{since}"


def render_page(payload: dict) -> str:
    """The page for a `patchctl status --json` payload."""
    esc = html.escape
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<title>patchctl status</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>patchctl status</h1>",
    ]
    for index, series in enumerate(payload["series"]):
        prefix = f"s{index}"
        counts = ", ".join(f"{n} {esc(s)}" for s, n in sorted(series["statuses"].items()))
        since = series.get("commits_since_pin")
        order = _verdicts_in_order(series["patches"])
        colours = verdict_colours(order)
        tally = {v: sum(1 for p in series["patches"] if (p.get("verdict") or NOT_TRIED) == v) for v in order}
        parts += [
            f"<h2>series {esc(series['name'])} on {esc(series['upstream'])}</h2>",
            '<p class="verdicts">'
            + "".join(
                f'<span class="verdict" style="background:{colours[v]}">{n} {esc(v)}</span>' for v, n in tally.items()
            )
            + "</p>",
            f"<p>pin <code>{esc(series['pin'][:12])}</code>, tip <code>{esc(series['tip'][:12])}</code> "
            f"({esc(series['rev_spec'])}; {since if since is not None else '?'} upstream commit(s) since the pin). "
            f"{len(series['patches'])} patch(es); upstream status: {counts or 'none'}.</p>",
            f'<figure id="{prefix}-tip" role="img" aria-label="{esc("the series " + series["name"] + " at the tip")}">',
            f"<figcaption>The series at the tip, by verdict: {len(series['patches'])} patch(es).</figcaption>",
            tip_chart(series, prefix),
            "</figure>",
        ]
        history = history_chart(series, prefix)
        if history is not None:
            parts += [
                f'<figure id="{prefix}-history" role="img" '
                f'aria-label="{esc("the series " + series["name"] + " over time")}">',
                f"<figcaption>The series over time, by upstream status, from the history of its directory "
                f"({esc(series['size_history'][0]['date'][:10])} to {esc(series['size_history'][-1]['date'][:10])})."
                "</figcaption>",
                history,
                "</figure>",
            ]
        else:
            points = series.get("size_history") or []
            when = f"one day of it ({esc(points[0]['date'][:10])})" if points else "none"
            parts.append(f"<p>History of the series directory in git: {when}; nothing to chart over time yet.</p>")
        for moved in series.get("moved_from") or []:
            parts.append(
                f"<p>Followed from <code>{esc(moved['dir'])}</code>: {moved['patches']} patch(es) moved here in "
                f"<code>{esc(moved['commit'][:12])}</code> ({esc(moved['date'][:10])}).</p>"
            )
        parts.append(
            "<table><thead><tr><th>patch</th><th>verdict at the tip</th><th>upstream status</th><th>carried</th>"
            "<th>stopped pin-syncs</th><th>drift</th><th>recent pin-syncs</th><th>files</th><th>notes</th>"
            "</tr></thead><tbody>"
        )
        for patch in series["patches"]:
            parts.append(_row(patch))
        parts.append("</tbody></table>")
        parts += _departures(series)
    parts.append("</body></html>\n")
    return "\n".join(parts)


def _row(patch: dict) -> str:
    esc = html.escape
    status = esc(patch["upstream_status"])
    if patch.get("upstream_url") and linkable_url(patch["upstream_url"]):
        status += f' <a href="{esc(patch["upstream_url"], quote=True)}">{esc(patch["upstream_url"])}</a>'
    elif patch.get("upstream_detail"):
        status += f" [{esc(patch['upstream_detail'])}]"
    if patch.get("submitted"):
        status += f"<br>pull request: {esc(patch['submitted']['state'])}"
    verdict = esc(patch.get("verdict") or NOT_TRIED)
    if patch.get("blocked_by"):
        verdict += f" by <code>{esc(patch['blocked_by'])}</code>"
    stopped = f"{patch.get('pin_syncs_stopped', 0)} of {patch['pin_syncs']}" if patch.get("pin_syncs") else "–"
    syncs = ", ".join(esc(s["fate"]) for s in patch.get("syncs") or []) or "–"
    notes = [esc(patch.get("trial") or "")] + [f'<span class="flag">{esc(f)}</span>' for f in patch["flags"]]
    return (
        "<tr>"
        f"<td><code>{esc(patch['patch'])}</code><br>{esc(patch['subject'])}</td>"
        f"<td>{verdict}</td>"
        f"<td>{status}</td>"
        f"<td>{_days(patch)}</td>"
        f"<td>{stopped}</td>"
        f"<td>{'–' if patch.get('drift') is None else patch['drift']}</td>"
        f"<td>{syncs}</td>"
        f"<td>{_files(patch['files'])}</td>"
        f"<td>{'<br>'.join(n for n in notes if n)}</td>"
        "</tr>"
    )


def _files(files: list[str]) -> str:
    listed = "<br>".join(f"<code>{html.escape(f)}</code>" for f in files)
    return listed if len(files) <= 3 else f"<details><summary>{len(files)} files</summary>{listed}</details>"


def _departures(series: dict) -> list[str]:
    """The patches that left the series (went upstream first), folded; the pin-syncs' drops."""
    esc = html.escape
    parts = []
    departures = series.get("departures") or []
    if departures:
        went = [d for d in departures if d["went_upstream"]]
        parts.append(
            f"<details><summary>{len(departures)} patch(es) left the series, {len(went)} of them upstream</summary><ul>"
        )
        for gone in sorted(departures, key=lambda d: (not d["went_upstream"], d["date"])):
            how = "went upstream" if gone["went_upstream"] else "left"
            note = f"; {esc(gone['note'])}" if gone.get("note") else ""
            parts.append(
                f"<li>{esc(gone['date'][:10])}: <code>{esc(gone['patch'])}</code> {how} "
                f"({esc(gone['upstream_status'])}{note})</li>"
            )
        parts.append("</ul></details>")
    if series.get("dropped"):
        parts.append("<p>Dropped by pin-syncs: ")
        parts.append(
            ", ".join(
                f"<code>{esc(d['patch'])}</code> ({esc(d['date'][:10])}"
                + (f"; {esc(d['note'])})" if d["note"] else ")")
                for d in series["dropped"]
            )
        )
        parts.append("</p>")
    return parts
