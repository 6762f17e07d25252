"""What a pin-sync reports: its gates, its patches' fates in the report's words, the report
itself, the stop that carries it, and the time each phase took."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import field
from typing import ClassVar

from ..errors import CheckFailed
from ..output.jsonout import json_field
from ..records import dataclass
from ..series.applier import Status
from ..state.sync_state import PatchRecord
from . import health, stopcause

Progress = Callable[[str], None]


# How a patch fared in the replay, in the words of the report.
CLASSIFICATION = {
    Status.APPLIED: "clean",
    Status.OFFSET: "applied with offset",
    Status.MERGED: "merged 3-way",
    Status.ALREADY_APPLIED: "already upstream (dropped)",
    Status.CONFLICT: "conflict",
}


# What a stop's report says in place of the range-diff: it is computed once, when the sync ends.
RANGE_DIFF_AT_THE_END = "at the end: computed once, when every patch is carried and the gates pass"


@dataclass
class GateRecord:
    series: str
    kind: str  # "strict-apply" | "build" | "gate"
    name: str
    ok: bool
    duration_s: float = json_field(digits=3)
    detail: str = ""
    log: str | None = None


@dataclass
class SyncReport:
    JSON_PROPERTIES: ClassVar[dict[str, str]] = {"ok": "ok"}

    state: str  # synced | dry-run | up-to-date | conflict | needs-hand | needs-look | gate-failed | aborted
    upstream: str
    old_pin: str
    new_pin: str
    target_spec: str
    moved_upstreams: list[str] = field(default_factory=list)
    commits: list[dict] | None = None  # upstream commits between the pins, oldest first
    commits_note: str = ""
    patches: list[PatchRecord] = field(default_factory=list)
    gates: list[GateRecord] = field(default_factory=list)
    files_changed: list[str] = field(default_factory=list)
    next_steps: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # patches dropped from the series, said loudly
    # series -> `git range-diff` of the series on the old pin against the series on the new pin
    range_diffs: dict[str, str] = json_field(omit_empty=True, default_factory=dict)
    health: list[health.HealthRow] = json_field(omit_empty=True, default_factory=list)  # the short table of `status`
    range_diff_note: str = json_field(omit_empty=True, default="")  # at a stop: RANGE_DIFF_AT_THE_END
    # checksums of the downstream's manifests pin-sync could not remake (patchctl.loop.versionpin)
    to_refresh: list[str] = json_field(omit_empty=True, default_factory=list)
    # at a stop: the upstream commits behind each failed hunk (patchctl.loop.stopcause)
    stop_cause: stopcause.StopCause | None = json_field(omit_empty=True, default=None)
    # series -> the git tree id its build steps and gates passed on (the series applied at the new
    # pin): the pin-sync workflow's push job applies what it is handed and compares.
    gated_trees: dict[str, str] = json_field(omit_empty=True, default_factory=dict)
    phase_seconds: dict[str, float] = json_field(digits=3, default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.state in ("synced", "dry-run", "up-to-date", "aborted")

    @property
    def failed_gate(self) -> GateRecord | None:
        return next((g for g in self.gates if not g.ok), None)


class SyncStopped(CheckFailed):
    """The sync stopped at a conflict or a failing gate; the report says where and what next."""

    def __init__(self, report: SyncReport, message: str):
        super().__init__(message)
        self.report = report


class Timer:
    def __init__(self, seconds: dict[str, float]):
        self.seconds = seconds

    def phase(self, name: str):
        timer = self

        class _Phase:
            def __enter__(self) -> None:
                self.start = time.monotonic()

            def __exit__(self, *exc: object) -> None:
                timer.seconds[name] = timer.seconds.get(name, 0.0) + time.monotonic() - self.start

        return _Phase()
