"""A replayed patch's record: how it fared, what was mended to carry it, and the conflict
blocks a stop left in the sync tree."""

from __future__ import annotations

import re
import stat
from pathlib import Path

from ..confined import Refused
from ..patterns import lazy
from ..series.applier import PatchOutcome, Status
from ..series.patchset import PatchFile
from ..state import worktree
from ..state.sync_state import PatchRecord
from . import carry
from .sync_report import CLASSIFICATION

_MARKER_RE = lazy(rb"^([<>])\1{6} ", re.MULTILINE)  # a line that opens or closes a conflict block


MAX_TREE_FILE_BYTES = 64 * 1024 * 1024


def patch_record(series: str, patch: PatchFile, outcome: PatchOutcome, tree: Path) -> PatchRecord:
    label = CLASSIFICATION.get(outcome.status, f"needs a hand: {outcome.status.value}")
    detail = ""
    if outcome.status == Status.MERGED and outcome.upstream_parts:
        label = "partially upstream (merged 3-way)"
        detail = f"already in the upstream tree: {', '.join(outcome.upstream_parts)}; the rest merged 3-way"
    elif outcome.status == Status.OFFSET:
        detail = ", ".join(f"{o.file} hunk #{o.hunk} {o.offset:+d}" for o in outcome.offsets)
    elif outcome.status == Status.ALREADY_APPLIED:
        detail = "its change is already in the upstream tree; the patch is dropped from the series"
    elif not outcome.ok:
        detail = outcome.describe().split(": ", 1)[-1]
        if outcome.status != Status.CONFLICT:
            detail += "; nothing was applied"
        if outcome.status == Status.CONFLICT and outcome.hunk:
            detail += "; the patch's " + ", ".join(
                f"{f.file} hunk #{f.hunk} {f.hunk_header or ''} (line {f.patch_line} of {patch.name})"
                for f in outcome.failures
                if f.hunk
            )
    conflicts = conflict_blocks(tree, outcome.conflict_files) if outcome.status == Status.CONFLICT else []
    return PatchRecord(series, patch.name, label, detail, conflicts)


def carried_record(series: str, patch: PatchFile, carried: carry.Carried, tree: Path) -> PatchRecord:
    """The record of a replayed patch, saying what was mended to carry it (a rename followed,
    a preimage rebuilt) and stopping at an edit upstream made for another reason."""
    record = patch_record(series, patch, carried.outcome, tree)
    if carried.needs_look:
        record.classification = carry.SAME_EDIT
        record.detail = carry.describe_same_edits(carried.same_edits)
        if carried.outcome.status == Status.MERGED:
            record.detail += "; the rest merged 3-way, staged and not committed"
    notes = carried.notes()
    if notes:
        record.detail = "; ".join(notes + ([record.detail] if record.detail else []))
    record.renames = [f"{old} → {new}" for old, new in carried.renames]
    return record


def conflict_blocks(tree: Path, files: list[str]) -> list[str]:
    """FILE:START-END for every conflict-marker block git left in FILES."""
    blocks = []
    for name in files:
        data = tree_file(tree, name)
        if data is None:
            blocks.append(f"{name} (deleted on one side)")
            continue
        start = None
        number, counted = 1, 0
        for marker in _MARKER_RE.finditer(data):  # lines as git counts them: after each \n
            number += data.count(b"\n", counted, marker.start())
            counted = marker.start()
            if marker[1] == b"<":
                start = number
            elif start is not None:
                blocks.append(f"{name}:{start}-{number}")
                start = None
    return blocks


def has_marker(data: bytes) -> bool:
    """Whether DATA has a line that opens or closes a conflict block. (The plain search first: the
    pattern alone tries every line start of what may be megabytes of source.)"""
    return (b"<<<<<<< " in data or b">>>>>>> " in data) and _MARKER_RE.search(data) is not None


def tree_file(tree: Path, name: str) -> bytes | None:
    """The bytes of the regular file NAME in TREE (a sync tree), read without following a link on
    the way (from the repository), or None when it is absent or not a regular file."""
    try:
        where = worktree.reached_through(tree)
        info = where.lstat(tree / name)
        if info is None or not stat.S_ISREG(info.st_mode):
            return None
        return where.read_bytes(tree / name, MAX_TREE_FILE_BYTES)
    except Refused:
        return None
