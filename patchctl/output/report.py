"""Markdown reports for pin-sync and the canary, rendered from their JSON payloads so that
the two forms never disagree. Also where reports go: a file, or $GITHUB_STEP_SUMMARY."""

from __future__ import annotations

from .escape import html_text, md_cell, md_code, md_fence, md_link, md_prose, md_text

MAX_COMMITS_SHOWN = 50
MAX_HEALTH_ROWS = 100


# Everything in a report but its own words is escaped for where it goes (patchctl.output.escape):
# names as text, subjects and paths as code spans, messages as prose, blocks fenced.


def _short(sha: str | None) -> str:
    return md_code(sha[:12]) if sha else "–"


def _commit(commit: dict, *, table: bool = False) -> str:
    """An upstream commit: its short id and its subject, both as code."""
    return f"{_short(commit.get('sha'))} {md_code(commit.get('subject') or '', table=table)}"


def sync_markdown(payload: dict) -> str:
    state = payload["state"]
    headline = {
        "synced": "✅ pin moved",
        "dry-run": "✅ dry run: every gate passed, nothing written",
        "up-to-date": "✅ already at the target",
        "conflict": "❌ stopped at a conflict",
        "needs-hand": "❌ stopped: a patch needs a hand (nothing applied)",
        "needs-look": "❌ stopped: a patch needs a look (upstream made the same edit for another reason)",
        "gate-failed": "❌ a gate failed, nothing written",
        "aborted": "⏹ aborted",
    }.get(state, state)
    out = [
        f"## pin-sync {md_text(payload['upstream'])}: {headline}",
        "",
        f"- old pin: {_short(payload['old_pin'])}",
        f"- new pin: {_short(payload['new_pin'])} (target: {md_code(payload['target_spec'])})",
    ]
    out += [f"- ⚠️ **warning**: {md_prose(warning)}" for warning in payload.get("warnings") or []]
    moved = payload.get("moved_upstreams") or []
    if len(moved) > 1:
        out.append(f"- upstreams moved together: {', '.join(md_text(name) for name in moved)}")
    commits = payload.get("commits")
    if commits is None:
        note = payload.get("commits_note") or "no history"
        out.append(f"- upstream commits in between: not available ({md_prose(note)})")
    else:
        out.append(
            f"- upstream commits in between: {len(commits)}"
            + (f" ({md_prose(payload['commits_note'])})" if payload.get("commits_note") else "")
        )
    if commits:
        out += ["", "<details><summary>Upstream commits</summary>", ""]
        for commit in commits[-MAX_COMMITS_SHOWN:]:
            out.append(f"- {_commit(commit)}")
        if len(commits) > MAX_COMMITS_SHOWN:
            out.append(f"- … and {len(commits) - MAX_COMMITS_SHOWN} older")
        out += ["", "</details>"]
    if payload.get("patches"):
        out += ["", "### Patches", "", "| series | patch | result | detail |", "|---|---|---|---|"]
        for record in payload["patches"]:
            detail = record.get("detail") or ""
            if record.get("conflicts"):
                detail = (detail + "; " if detail else "") + "markers at " + ", ".join(record["conflicts"])
            out.append(
                f"| {md_cell(record['series'])} | {md_cell(record['patch'])} | {md_cell(record['classification'])} | "
                f"{md_cell(detail)} |"
            )
    if payload.get("stop_cause"):
        out += ["", "### Why it stopped", "", *stop_cause_markdown(payload["stop_cause"])]
    if payload.get("health"):
        out += ["", *health_markdown(payload["health"])]
    for series, text in sorted((payload.get("range_diffs") or {}).items()):
        out += ["", *range_diff_section(f"series {series}: the patches on the old pin against the new pin", text)]
    if payload.get("range_diff_note"):
        out += ["", f"git range-diff: {md_prose(payload['range_diff_note'])}"]
    if payload.get("gates"):
        out += [
            "",
            "### Gates",
            "",
            "| series | gate | kind | result | duration | detail |",
            "|---|---|---|---|---|---|",
        ]
        for gate in payload["gates"]:
            result = "pass" if gate["ok"] else "**FAIL**"
            out.append(
                f"| {md_cell(gate['series'])} | {md_cell(gate['name'])} | {md_cell(gate['kind'])} | {result} | "
                f"{gate['duration_s']:.1f} s | {md_cell(gate.get('detail'))} |"
            )
    if payload.get("files_changed"):
        verb = "would change" if state == "dry-run" else "changed"
        out += ["", f"### Files {verb}", ""] + [f"- {md_code(name)}" for name in payload["files_changed"]]
    if payload.get("to_refresh"):
        out += ["", "### Checksums to refresh", ""] + [f"- {md_prose(item)}" for item in payload["to_refresh"]]
    if payload.get("next_steps"):
        out += ["", "### Next steps", ""] + [f"- {md_prose(step)}" for step in payload["next_steps"]]
    return "\n".join(out) + "\n"


def stop_cause_markdown(cause: dict) -> list[str]:
    """Why a patch stops (`patchctl.loop.stopcause.StopCause`): per failed hunk, the upstream
    commits that changed its lines; where upstream may have its own version, what to do and
    both sides of each hunk, folded."""
    out = []
    for hunk in cause.get("hunks") or []:
        where = md_code(hunk["file"])
        if hunk.get("hunk"):  # "#N" is text GitHub would link to issue N: md_text keeps it from that
            where += " " + md_text(f"hunk #{hunk['hunk']}") + " " + md_code(hunk["header"])
        if hunk.get("old_lines"):
            where += f" (lines {md_text(hunk['old_lines'])} at the old pin" + (
                f", in {md_code(hunk['old_path'])})" if hunk.get("old_path") else ")"
            )
        commits = hunk.get("commits") or []
        said = f": {md_prose(hunk['note'])}" if hunk.get("note") else ""
        out.append(f"- {where}{said}" + (", changed upstream by:" if commits else ""))
        out += [f"  - {stop_commit_markdown(commit)}" for commit in commits]
        if hunk.get("more_commits"):
            out.append(f"  - … and {hunk['more_commits']} more")
        if hunk.get("series"):
            out.append(
                f"  - by earlier patches of the series, as carried: {', '.join(md_code(s) for s in hunk['series'])}"
            )
    if not out:
        out.append("- no hunk of the patch could be told apart (see its detail above)")
    if cause.get("upstream_version"):
        advice = md_prose(cause.get("advice") or "compare both sides, then drop the patch")
        out += [
            "",
            f"**Upstream may have its own version** (every hunk of the patch stands there in substance): {advice}",
        ]
        for hunk in cause.get("hunks") or []:
            if hunk.get("upstream_side") or hunk.get("patch_side"):
                title = f"{hunk['file']} hunk #{hunk.get('hunk')}: the patch, and upstream's lines there at the new pin"
                sides = ["The patch:", "", *md_fence(hunk.get("patch_side", ""), "diff"), "", "Upstream:", ""]
                out += ["", *_folded(title, sides + md_fence(hunk.get("upstream_side", "")))]
    return out


def stop_commit_markdown(commit: dict) -> str:
    """An upstream commit a stop names: short id, subject, date and, on github.com, its link."""
    link = f" {md_link(commit['url'])}" if commit.get("url") else ""
    return f"{_commit(commit)} ({md_text(commit.get('date') or '')}){link}"


def health_markdown(rows: list[dict]) -> list[str]:
    """The series' health as a short table in a fold: each patch's upstream status (with the
    URL it was submitted to, linked), its drift and its verdict; a note for a patch taken
    upstream or marked Accepted that the tip does not hold (`patchctl.loop.health.HealthRow`)."""
    if not rows:
        return []
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["upstream_status"]] = counts.get(row["upstream_status"], 0) + 1
    summary = f"Series health: {len(rows)} patch(es); upstream status: " + ", ".join(
        f"{count} {status}" for status, count in sorted(counts.items())
    )
    out = [
        "| series | patch | upstream status | drift | verdict | note |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows[:MAX_HEALTH_ROWS]:
        status = md_cell(row["upstream_status"])
        if row.get("upstream_url"):
            status += " " + md_link(row["upstream_url"], table=True)
        drift = "–" if row.get("drift") is None else str(row["drift"])
        out.append(
            f"| {md_cell(row['series'])} | {md_cell(row['patch'])} | {status} | {drift} | "
            f"{md_cell(row.get('verdict'))} | {md_cell(row.get('note'))} |"
        )
    if len(rows) > MAX_HEALTH_ROWS:
        out.append(f"\n… and {len(rows) - MAX_HEALTH_ROWS} more (`patchctl status` lists every patch)")
    out.append("")
    out.append("Drift: upstream commits between the pin and the tip that touched the patch's files.")
    return _folded(summary, out)


def range_diff_section(summary: str, text: str) -> list[str]:
    """A folded `git range-diff` block; the fence is longer than any backtick run in TEXT."""
    return _folded(f"git range-diff: {summary}", md_fence(text, "text"))


def _folded(summary: str, block: list[str]) -> list[str]:
    """BLOCK (Markdown lines) in a fold titled SUMMARY (HTML: Markdown is not read there)."""
    return [f"<details><summary>{html_text(summary)}</summary>", "", *block, "", "</details>"]


def canary_markdown(payload: dict) -> str:
    red = payload["red"]
    out = [
        f"## canary {md_text(payload['upstream'])}: {'❌ red' if red else '✅ green'}",
        "",
        f"- pin: {_short(payload['pin'])}",
        f"- tip: {_short(payload['tip'])} ({md_prose(payload['rev_spec'])})",
    ]
    if payload.get("commits_since_pin") is not None:
        out.append(f"- upstream commits since the pin: {payload['commits_since_pin']}")
    for series in payload["series"]:
        verdict = {
            "ok": "applies strictly",
            "mechanical": "fails strictly; a pin-sync would be mechanical",
            "stops": "fails; a pin-sync would stop (a conflict, a patch that needs a hand or a look, or one blocked)",
        }[series["verdict"]]
        out += ["", f"### series {md_text(series['name'])}: {verdict}", ""]
        if not series["patches"]:
            out.append("(no patches)")
            continue
        out += ["| patch | strict | 3-way trial | verdict | first breaking upstream commit |", "|---|---|---|---|---|"]
        for patch in series["patches"]:
            strict = patch["strict"] + (f": {patch['strict_detail']}" if patch.get("strict_detail") else "")
            breaking = patch.get("breaking_commit")
            first = _commit(breaking, table=True) if breaking else md_cell(patch.get("bisect_note"))
            out.append(
                f"| {md_cell(patch['patch'])} | {md_cell(strict)} | {md_cell(patch.get('trial'))} | "
                f"{md_cell(patch['verdict'])} | {first} |"
            )
        for patch in series["patches"]:
            if patch.get("stop_cause"):
                stops = "conflicts" if patch["verdict"] == "conflict" else patch["verdict"]
                out += [
                    "",
                    f"Why {md_code(patch['patch'])} {stops}:",
                    "",
                    *stop_cause_markdown(patch["stop_cause"]),
                ]
        if series.get("range_diff"):
            out += ["", *range_diff_section("the patches on the pin against the tip", series["range_diff"])]
    if payload.get("health"):
        out += ["", *health_markdown(payload["health"])]
    if payload.get("compiles"):
        out += [
            "",
            "### Compile",
            "",
            "| toolchain | series | image | result | detail | first breaking upstream commit |",
            "|---|---|---|---|---|---|",
        ]
        for record in payload["compiles"]:
            result = {"passed": "pass", "failed": "**FAIL**", "skipped": "skipped"}[record["state"]]
            durations = ", ".join(f"{s['name']} {s['duration_s']:.1f} s" for s in record.get("steps", []))
            detail = "; ".join(x for x in (record.get("detail"), durations) if x)
            breaking = record.get("breaking_commit")
            first = _commit(breaking, table=True) if breaking else md_cell(record.get("bisect_note"))
            image = md_code(record["image"], table=True) if record.get("image") else "as declared"
            out.append(
                f"| {md_cell(record['toolchain'])} | {md_cell(record['series'])} | "
                f"{image} | {result} | {md_cell(detail)} | {first} |"
            )
        for record in payload["compiles"]:
            if record.get("breaking_commit") and record.get("bisect_note"):  # how it was found: probes, full builds
                out += [
                    "",
                    f"{md_text(record['toolchain'])} / {md_text(record['series'])}: {md_prose(record['bisect_note'])}",
                ]
        for record in payload["compiles"]:
            if record.get("log_tail"):
                summary = f"{record['toolchain']} / {record['series']}: tail of the failing build log"
                out += ["", *_folded(summary, md_fence(record["log_tail"]))]
    if payload.get("work_dir"):
        out += ["", f"Logs: {md_code(payload.get('work_dir'))}"]
    return "\n".join(out) + "\n"
