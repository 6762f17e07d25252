"""What a canary reports: each patch's verdict at the upstream's tip (its strict apply, its
3-way trial, the commit that broke it), each compile's, and the issue opened for each break."""

from __future__ import annotations

from dataclasses import field
from typing import ClassVar

from ..output.escape import marker_token, md_code, md_fence, md_link, md_prose, md_text, visible
from ..output.jsonout import json_field, to_json
from ..output.report import stop_cause_markdown
from ..records import dataclass
from . import stopcause
from .health import HealthRow

# The words of docs/reference/index.md#stops, as every command, page, report and trailer uses them.
MECHANICAL = "mechanical"
CONFLICT = "conflict"  # the 3-way merge leaves conflict markers: a person resolves them
NEEDS_HAND = "needs a hand"  # git cannot merge it at all (nothing applied): a person applies it
NEEDS_LOOK = "needs a look"  # it merges, but upstream made the same edit for another reason
BLOCKED = "blocked"  # not tried: an earlier patch touching the same files stopped
STOPS = (CONFLICT, NEEDS_HAND, NEEDS_LOOK, BLOCKED)  # a pin-sync stops at each


@dataclass
class CanaryPatch:
    patch: str
    strict: str  # applier Status value
    strict_detail: str = ""
    trial: str | None = None  # 3-way trial outcome when strict failed
    verdict: str = "ok"  # ok | mechanical | conflict | needs a hand | needs a look | blocked
    breaking_commit: dict | None = None  # {sha, subject}: first upstream commit it fails at
    bisect_note: str = ""
    blocked_by: str | None = json_field(omit_empty=True, default=None)  # the earlier failing patch it depends on
    # {commit, subject, how, url}: the upstream commit since the pin that holds the patch's change
    taken_upstream: dict | None = json_field(omit_empty=True, default=None)
    upstream_holds: bool = False  # the tip already holds the patch's change (taken upstream or already applied)
    # a patch that needs a hand: the upstream commits behind each hunk that fails (patchctl.loop.stopcause)
    stop_cause: stopcause.StopCause | None = json_field(omit_empty=True, default=None)


@dataclass
class CanarySeries:
    JSON_PROPERTIES: ClassVar[dict[str, str]] = {"verdict": "verdict"}

    name: str
    patches: list[CanaryPatch] = field(default_factory=list)
    # `git range-diff` of the series on the pin against the series as applied at the tip
    range_diff: str = json_field(omit_empty=True, default="")

    @property
    def verdict(self) -> str:
        verdicts = {p.verdict for p in self.patches}
        if verdicts & set(STOPS):
            return "stops"  # a pin-sync would stop: the patches say where and why
        return MECHANICAL if MECHANICAL in verdicts else "ok"


@dataclass
class CompileRecord:
    toolchain: str
    series: str
    image: str | None
    state: str  # passed | failed | skipped
    detail: str = ""
    steps: list[dict] = field(default_factory=list)
    log: str = json_field(omit_empty=True, default="")  # the failing step's log
    log_tail: str = json_field(omit_empty=True, default="")  # its last lines
    breaking_commit: dict | None = json_field(omit_empty=True, default=None)  # {sha, subject}: first that fails
    bisect_note: str = json_field(omit_empty=True, default="")
    # how the bisect judged commits: method (probe | full), full builds, fallback, units, probes, compiler cache
    bisect: dict | None = json_field(omit_empty=True, default=None)


ISSUE_MARKER = "patchctl-canary-key"


@dataclass(frozen=True)
class CanaryIssue:
    """One break, as the workflow files it: KEY is stable across runs (no tip, no date)."""

    key: str
    title: str
    body: str


@dataclass
class CanaryReport:
    JSON_PROPERTIES: ClassVar[dict[str, str]] = {"red": "red"}

    upstream: str
    pin: str
    tip: str
    rev_spec: str
    commits_since_pin: int | None
    series: list[CanarySeries] = field(default_factory=list)
    compiles: list[CompileRecord] = field(default_factory=list)
    work_dir: str = ""
    duration_s: float = json_field(digits=3, default=0.0)
    health: list[HealthRow] = json_field(omit_empty=True, default_factory=list)  # the short table of `status`

    @property
    def red(self) -> bool:
        strict_failed = any(p.verdict != "ok" for s in self.series for p in s.patches)
        return strict_failed or any(c.state == "failed" for c in self.compiles)

    def red_reason(self) -> str:
        """Why the canary is red, in one line: the failing patches (first five) and compiles."""
        failing = [f"{s.name}/{p.patch}" for s in self.series for p in s.patches if p.verdict != "ok"]
        broken = [f"{c.toolchain}/{c.series}" for c in self.compiles if c.state == "failed"]
        reasons = [
            f"{len(failing)} patch(es) fail strictly ({', '.join(failing[:5])})" if failing else "",
            f"compile failed for {', '.join(broken)}" if broken else "",
        ]
        return "canary is red: " + "; ".join(x for x in reasons if x)

    def issues(self) -> list[CanaryIssue]:
        """One issue per break, in report order; [] when green."""
        found: dict[str, CanaryIssue] = {}
        for series in self.series:
            for patch in series.patches:
                if patch.verdict == "ok" or patch.blocked_by is not None:
                    continue  # a cascade is reported in its blocker's issue
                first = patch.breaking_commit["sha"] if patch.breaking_commit else "unbisected"
                key = _key(self.upstream, "apply", series.name, patch.patch, first)
                blocked = [p.patch for p in series.patches if p.blocked_by == patch.patch]
                found.setdefault(
                    key, self._issue(key, f"{series.name}/{patch.patch} no longer applies", _patch_body(patch, blocked))
                )
        for record in self.compiles:
            if record.state != "failed":
                continue
            first = record.breaking_commit["sha"] if record.breaking_commit else "unbisected"
            key = _key(self.upstream, "compile", record.toolchain, record.series, first)
            found.setdefault(
                key, self._issue(key, f"{record.series} does not build with {record.toolchain}", _compile_body(record))
            )
        return list(found.values())

    def _issue(self, key: str, what: str, details: str) -> CanaryIssue:
        title = visible(f"canary {self.upstream}: {what}")  # a title is plain text, on one line
        body = "\n".join(
            [
                f"<!-- {ISSUE_MARKER}: {key} -->",  # the key's words are marker tokens (_key)
                f"The canary found a break on upstream **{md_text(self.upstream)}**.",
                "",
                f"- pin: {md_code(self.pin)}",
                f"- tip: {md_code(self.tip)} ({md_prose(self.rev_spec)})",
                f"- key: {md_code(key)}",
                "",
                details,
                "",
                "Filed by patchctl's canary workflow; it comments while the break persists and closes this issue "
                "when the canary is green again.",
            ]
        )
        return CanaryIssue(key, title[:250], body)


def _key(*words: str) -> str:
    """A break's key: its words (a patch's name among them) as marker tokens, joined by `/`."""
    return "/".join(marker_token(word) for word in words)


# An issue body is Markdown that GitHub renders: what comes from the upstream or the series
# (subjects, names, git's and the build's words) is escaped for where it stands (patchctl.output.escape).
def _commit_line(commit: dict | None, note: str) -> str:
    if commit:
        return f"- first bad upstream commit: {md_code(commit['sha'])} {md_code(commit['subject'])}"
    return f"- first bad upstream commit: not found ({md_prose(note or 'not bisected')})"


def _patch_body(patch: CanaryPatch, blocked: list[str]) -> str:
    strict = f"{patch.strict} {patch.strict_detail}".rstrip()
    lines = [
        f"Patch {md_code(patch.patch)} fails to apply strictly: {md_prose(strict)}",
        f"- 3-way trial: {md_prose(patch.trial)} (a pin-sync: {md_text(patch.verdict)})",
        _commit_line(patch.breaking_commit, patch.bisect_note),
    ]
    if blocked:
        lines.append(f"- blocked behind it: {', '.join(md_code(b) for b in blocked)}")
    if patch.stop_cause is not None:
        lines += ["", "Why it fails, hunk by hunk:", "", *stop_cause_markdown(to_json(patch.stop_cause))]
    if patch.taken_upstream:
        taken = patch.taken_upstream
        sent = f" (sent as {md_link(taken['url'])})" if taken.get("url") else ""
        lines.append(
            f"- taken upstream in {md_code(taken['commit'][:12])} {md_code(taken['subject'])}{sent}: "
            f"{md_text(taken['how'])}; pin-sync drops the patch"
        )
    return "\n".join(lines)


def _compile_body(record: CompileRecord) -> str:
    lines = [
        f"Series {md_code(record.series)} does not build with toolchain {md_code(record.toolchain)} "
        f"(image {md_code(record.image or 'as declared')}): {md_prose(record.detail)}",
        _commit_line(record.breaking_commit, record.bisect_note),
    ]
    if record.breaking_commit and record.bisect_note:  # how it was found: probes confirmed, or full builds
        lines.append(f"- bisect: {md_prose(record.bisect_note)}")
    if record.log_tail:
        lines += ["", "Tail of the failing build log:", "", *md_fence(record.log_tail)]
    return "\n".join(lines)
