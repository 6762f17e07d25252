"""`patchctl status --html`: the health report as one self-contained HTML page.

The page needs nothing from elsewhere: no script at all, no stylesheet, font or image it
would fetch. Its charts are SVG drawn by matplotlib (the `health` extra, imported only here,
only when a page is asked for) and embedded inline: per series, its patches against their
drift, coloured by upstream status, and the series' size over time from the history of its
directory. Every string from the series or the upstream is HTML-escaped, and drawn as it is:
matplotlib's mathtext is off (a patch named `0001-$\\x$.patch` is text, not a formula that
fails to parse). The SVG is made deterministic (a fixed hash salt, no date), so the same
report gives the same page.
"""

from __future__ import annotations

import html
import io
from datetime import datetime

from ..errors import EnvironmentFailure
from ..output.escape import linkable_url

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
_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.5em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
.flag { color: #b00; }
figure { margin: 1em 0; }
code { font-size: 0.95em; }
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


def series_chart(series: dict) -> str:
    """An inline SVG for one series (its JSON form): patches against drift, coloured by
    upstream status; and the number of patches after each commit that changed the series."""
    Figure = _matplotlib()
    patches = series["patches"]
    sizes = series.get("size_history") or []
    figure = Figure(figsize=(10, max(3.0, 0.28 * len(patches) + 1.5)), layout="constrained")
    drift_axes, size_axes = figure.subplots(1, 2, width_ratios=(3, 2))
    names = [p["patch"] for p in patches]
    for status, colour in STATUS_COLOURS.items():
        points = [(p.get("drift") or 0, i) for i, p in enumerate(patches) if p["upstream_status"] == status]
        if points:
            drift_axes.scatter(
                [x for x, _ in points], [y for _, y in points], color=colour, label=status, s=40, zorder=3
            )
    # The names come from the series directory: text, never markup (parse_math, beside the rcParam above).
    drift_axes.set_yticks(range(len(names)), labels=[_short(n) for n in names], fontsize=7, parse_math=False)
    drift_axes.invert_yaxis()
    drift_axes.set_xlabel("drift: upstream commits since the pin that touched the patch's files")
    drift_axes.set_title("patches against drift, by upstream status", fontsize=10)
    drift_axes.grid(axis="x", alpha=0.3)
    drift_axes.xaxis.get_major_locator().set_params(integer=True)  # drift counts commits: no 0.5 ticks
    if patches:
        # Outside the axes: inside, it covers whichever patch's marker lies under it.
        drift_axes.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    if sizes:
        dates = [datetime.fromisoformat(s["date"]) for s in sizes]
        size_axes.step(dates, [s["patches"] for s in sizes], where="post", color="#4575b4")
        size_axes.plot(dates, [s["patches"] for s in sizes], "o", color="#4575b4", markersize=3)
        size_axes.set_ylim(bottom=0)
        figure.autofmt_xdate()
    else:
        size_axes.text(0.5, 0.5, "no git history of the series directory", ha="center", transform=size_axes.transAxes)
    size_axes.set_title("patches in the series over time", fontsize=10)
    size_axes.set_ylabel("patches")
    out = io.StringIO()
    figure.savefig(out, format="svg", metadata={"Date": None, "Creator": "patchctl status"})
    svg = out.getvalue()
    return svg[svg.index("<svg") :]  # inline: without the XML declaration and DOCTYPE


def _short(name: str, limit: int = 48) -> str:
    return name if len(name) <= limit else name[: limit - 1] + "…"


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
    for series in payload["series"]:
        counts = ", ".join(f"{n} {esc(s)}" for s, n in sorted(series["statuses"].items()))
        since = series.get("commits_since_pin")
        parts += [
            f"<h2>series {esc(series['name'])} on {esc(series['upstream'])}</h2>",
            f"<p>pin <code>{esc(series['pin'][:12])}</code>, tip <code>{esc(series['tip'][:12])}</code> "
            f"({esc(series['rev_spec'])}; {since if since is not None else '?'} upstream commit(s) since the pin). "
            f"{len(series['patches'])} patch(es): {counts or 'none'}.</p>",
            f'<figure role="img" aria-label="{esc("health chart of series " + series["name"])}">',
            series_chart(series),
            "</figure>",
            "<table><thead><tr><th>patch</th><th>upstream status</th><th>age (days)</th><th>drift</th>"
            "<th>verdict at the tip</th><th>recent pin-syncs</th><th>files</th><th>notes</th></tr></thead><tbody>",
        ]
        for patch in series["patches"]:
            status = esc(patch["upstream_status"])
            if patch.get("upstream_url") and linkable_url(patch["upstream_url"]):
                status += f' <a href="{esc(patch["upstream_url"], quote=True)}">{esc(patch["upstream_url"])}</a>'
            elif patch.get("upstream_detail"):
                status += f" [{esc(patch['upstream_detail'])}]"
            syncs = ", ".join(esc(s["fate"]) for s in patch.get("syncs") or []) or "–"
            notes = [esc(patch.get("trial") or "")] + [f'<span class="flag">{esc(f)}</span>' for f in patch["flags"]]
            parts.append(
                "<tr>"
                f"<td><code>{esc(patch['patch'])}</code><br>{esc(patch['subject'])}</td>"
                f"<td>{status}</td>"
                f"<td>{'–' if patch.get('age_days') is None else patch['age_days']}</td>"
                f"<td>{'–' if patch.get('drift') is None else patch['drift']}</td>"
                f"<td>{esc(patch.get('verdict') or 'not tried')}</td>"
                f"<td>{syncs}</td>"
                f"<td>{'<br>'.join(f'<code>{esc(f)}</code>' for f in patch['files'])}</td>"
                f"<td>{'<br>'.join(n for n in notes if n)}</td>"
                "</tr>"
            )
        parts.append("</tbody></table>")
        if series.get("dropped"):
            parts.append("<p>Dropped by recent pin-syncs: ")
            parts.append(
                ", ".join(
                    f"<code>{esc(d['patch'])}</code> ({esc(d['date'][:10])}"
                    + (f"; {esc(d['note'])})" if d["note"] else ")")
                    for d in series["dropped"]
                )
            )
            parts.append("</p>")
    parts.append("</body></html>\n")
    return "\n".join(parts)
