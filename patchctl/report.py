"""Markdown reports for pin-sync and the canary, rendered from their JSON payloads so that
the two forms never disagree. Also where reports go: a file, or $GITHUB_STEP_SUMMARY."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from .paths import atomic_write_text

STEP_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"
MAX_COMMITS_SHOWN = 50


def _cell(value: Any) -> str:
    """Table cells must not break the row: escape pipes, fold newlines."""
    return str(value if value is not None else "").replace("|", "\\|").replace("\n", " ").strip() or "–"


def _short(sha: str | None) -> str:
    return f"`{sha[:12]}`" if sha else "–"


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
        f"## pin-sync {payload['upstream']}: {headline}",
        "",
        f"- old pin: {_short(payload['old_pin'])}",
        f"- new pin: {_short(payload['new_pin'])} (target: `{payload['target_spec']}`)",
    ]
    out += [f"- ⚠️ **warning**: {_cell(warning)}" for warning in payload.get("warnings") or []]
    moved = payload.get("moved_upstreams") or []
    if len(moved) > 1:
        out.append(f"- upstreams moved together: {', '.join(moved)}")
    commits = payload.get("commits")
    if commits is None:
        out.append(f"- upstream commits in between: not available ({payload.get('commits_note') or 'no history'})")
    else:
        out.append(
            f"- upstream commits in between: {len(commits)}"
            + (f" ({payload['commits_note']})" if payload.get("commits_note") else "")
        )
    if commits:
        out += ["", "<details><summary>Upstream commits</summary>", ""]
        for commit in commits[-MAX_COMMITS_SHOWN:]:
            out.append(f"- {_short(commit['sha'])} {_cell(commit.get('subject'))}")
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
                f"| {_cell(record['series'])} | {_cell(record['patch'])} | {_cell(record['classification'])} | "
                f"{_cell(detail)} |"
            )
    for series, text in sorted((payload.get("range_diffs") or {}).items()):
        out += ["", *range_diff_section(f"series {series}: the patches on the old pin against the new pin", text)]
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
                f"| {_cell(gate['series'])} | {_cell(gate['name'])} | {gate['kind']} | {result} | "
                f"{gate['duration_s']:.1f} s | {_cell(gate.get('detail'))} |"
            )
    if payload.get("files_changed"):
        verb = "would change" if state == "dry-run" else "changed"
        out += ["", f"### Files {verb}", ""] + [f"- `{name}`" for name in payload["files_changed"]]
    if payload.get("next_steps"):
        out += ["", "### Next steps", ""] + [f"- {step}" for step in payload["next_steps"]]
    return "\n".join(out) + "\n"


def range_diff_section(summary: str, text: str) -> list[str]:
    """A folded `git range-diff` block; the fence is longer than any backtick run in TEXT."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [
        f"<details><summary>git range-diff: {_cell(summary)}</summary>",
        "",
        fence + "text",
        text.rstrip("\n"),
        fence,
        "",
        "</details>",
    ]


def canary_markdown(payload: dict) -> str:
    red = payload["red"]
    out = [
        f"## canary {payload['upstream']}: {'❌ red' if red else '✅ green'}",
        "",
        f"- pin: {_short(payload['pin'])}",
        f"- tip: {_short(payload['tip'])} ({_cell(payload['rev_spec'])})",
    ]
    if payload.get("commits_since_pin") is not None:
        out.append(f"- upstream commits since the pin: {payload['commits_since_pin']}")
    for series in payload["series"]:
        verdict = {
            "ok": "applies strictly",
            "mechanical": "fails strictly; a pin-sync would be mechanical",
            "needs a hand": "fails; a pin-sync needs a hand",
            "blocked": "fails; a pin-sync needs a hand",
        }[series["verdict"]]
        out += ["", f"### series {series['name']}: {verdict}", ""]
        if not series["patches"]:
            out.append("(no patches)")
            continue
        out += ["| patch | strict | 3-way trial | verdict | first breaking upstream commit |", "|---|---|---|---|---|"]
        for patch in series["patches"]:
            strict = patch["strict"] + (f": {patch['strict_detail']}" if patch.get("strict_detail") else "")
            breaking = patch.get("breaking_commit")
            first = (
                f"{_short(breaking['sha'])} {_cell(breaking['subject'])}"
                if breaking
                else _cell(patch.get("bisect_note"))
            )
            out.append(
                f"| {_cell(patch['patch'])} | {_cell(strict)} | {_cell(patch.get('trial'))} | {patch['verdict']} | "
                f"{first} |"
            )
        if series.get("range_diff"):
            out += ["", *range_diff_section("the patches on the pin against the tip", series["range_diff"])]
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
            first = (
                f"{_short(breaking['sha'])} {_cell(breaking['subject'])}"
                if breaking
                else _cell(record.get("bisect_note"))
            )
            out.append(
                f"| {_cell(record['toolchain'])} | {_cell(record['series'])} | "
                f"{_cell(record.get('image') or 'as declared')} | {result} | {_cell(detail)} | {first} |"
            )
        for record in payload["compiles"]:
            if record.get("log_tail"):
                fence = "````" if "```" in record["log_tail"] else "```"
                out += [
                    "",
                    f"<details><summary>{_cell(record['toolchain'])} / {_cell(record['series'])}: "
                    "tail of the failing build log</summary>",
                    "",
                    fence,
                    record["log_tail"],
                    fence,
                    "",
                    "</details>",
                ]
    if payload.get("work_dir"):
        out += ["", f"Logs: `{payload.get('work_dir')}`"]
    return "\n".join(out) + "\n"


def write_text(path: Path, text: str) -> None:
    atomic_write_text(Path(path), text)


def write_json(path: Path, payload: dict) -> None:
    atomic_write_text(Path(path), json.dumps(payload, indent=2, sort_keys=True) + "\n")


def write_json_list(path: Path, items: list) -> None:
    atomic_write_text(Path(path), json.dumps(items, indent=2, sort_keys=True) + "\n")


def append_step_summary(markdown: str, env: dict[str, str] | None = None) -> Path | None:
    """Append to the file GitHub Actions names in $GITHUB_STEP_SUMMARY (steps share it)."""
    target = (env if env is not None else os.environ).get(STEP_SUMMARY_ENV)
    if not target:
        return None
    with open(target, "a", encoding="utf-8") as handle:
        handle.write(markdown)
    return Path(target)
