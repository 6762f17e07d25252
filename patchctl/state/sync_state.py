"""A stopped pin-sync's state file, and the journal of the pin update that ends a sync.

The state (`sync/UPSTREAM/state.json` in the repository's git directory, `.git/patchctl/`:
see `patchctl.state.statehome`) is what `pin-sync --continue` resumes from: the target, the series
being replayed (in their trees under `.patchctl/sync/UPSTREAM/`), the next patch of each with
the commit its tree stood at then, the series as commits on the old pin (made once, with the
blobs 3-way needs), and the records so far. `--continue` and `--abort` remove those trees, so a state is trusted only
when each tree it names is the one patchctl puts there; anything else is one line (exit 3).
The pin update (patches/, `pin:` and every pin_files entry) is written through the project's
journal (`patchctl.state.journal`) so that an interrupted update is rolled forward or back before
the next command reads the repository.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, field
from pathlib import Path

from ..errors import EnvironmentFailure, UsageError
from ..output.escape import shell_command
from ..output.jsonout import json_field
from ..patterns import lazy
from ..records import dataclass
from . import journal, statehome, worktree

STATE_VERSION = 2
READABLE_VERSIONS = (1, 2)  # 1 lacks what spares a --continue the work done before (read as "not done yet")
_NAME = lazy(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")  # an upstream or series name (patchctl.project.config)
_COMMIT = lazy(r"^[0-9a-f]{40}$")
_PATCH_ID = lazy(r"^(?:[0-9a-f]{40,64}|-|)$")
_SHA256 = lazy(r"^[0-9a-f]{64}$")
_OBJECT_PREFIX = lazy(r"^[0-9a-f]{4,40}$")  # an id as an index line may abbreviate it
_FACT_KEY = lazy(r"^(?:[0-9a-f]{40}|[0-9a-f]{64}|patch:[0-9a-f]{64})$")  # a commit, or a patch by its sha256


@dataclass
class PatchRecord:
    series: str
    patch: str
    classification: str
    detail: str = ""
    conflicts: list[str] = field(default_factory=list)  # FILE:START-END of each marker block
    renames: list[str] = json_field(omit_empty=True, default_factory=list)  # "OLD → NEW": moved files followed
    # {commit, subject, how, url}: the upstream commit between the pins that holds the patch's change
    taken_upstream: dict | None = json_field(omit_empty=True, default=None)


@dataclass
class SeriesProgress:
    name: str
    upstream: str
    tree: str
    digest: str  # of patches/ when the sync started: --continue refuses if it changed
    next: int = 0  # index of the next patch to replay
    head_before: str | None = None  # HEAD before the patch that stopped the replay
    head: str | None = None  # HEAD of the tree when the state was saved: the patches before `next`, carried
    # The series as commits on the old pin, as far as it applies in order (the old side of the
    # range-diff), made when the blobs 3-way needs were created; None until then.
    old_head: str | None = None
    unseeded: list[str] = field(default_factory=list)  # preimage ids the index lines name that seeding cannot make
    # Commits the replay made from a patch file: commit -> [the file's sha256, whether a strict
    # `git apply` of it on the commit's parent made the commit]. What export need not ask again
    # (`exporter.plan_export`).
    replayed: dict[str, list] = field(default_factory=dict)


@dataclass
class SyncState:
    upstream: str
    old_pin: str
    target: str
    target_spec: str
    series: list[SeriesProgress]
    records: list[PatchRecord] = field(default_factory=list)
    phase: str = "replaying"  # replaying | conflict | gates-failed
    version: int = STATE_VERSION
    # What was learnt of the upstream between the pins (patch-ids of its commits, its renames):
    # kept so that each --continue does not ask git again (patchctl.loop.carry.PinMove's memo).
    upstream_facts: dict = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: dict) -> SyncState:
        return cls(
            upstream=data["upstream"],
            old_pin=data["old_pin"],
            target=data["target"],
            target_spec=data["target_spec"],
            series=[SeriesProgress(**s) for s in data["series"]],
            records=[PatchRecord(**r) for r in data["records"]],
            phase=data["phase"],
            version=data["version"],
            upstream_facts=data.get("upstream_facts", {}),
        )


def save_state(root: Path, state: SyncState) -> None:
    text = json.dumps(asdict(state), indent=2, sort_keys=True) + "\n"
    statehome.ensure(root)
    statehome.state_root(root).write_bytes(worktree.sync_state_file(root, state.upstream), text.encode())


def drop_state(root: Path, upstream: str) -> None:
    """Forget UPSTREAM's stopped sync (its trees are removed by the caller)."""
    path = worktree.sync_state_file(root, upstream)
    state = statehome.state_root(root)
    if os.path.lexists(path):
        worktree.check_state_path(root, path, "pin-sync state")
        state.unlink(path)
    state.rmdir(path.parent)  # only when empty


def load_state(root: Path, upstream: str) -> SyncState:
    return parse_state(root, upstream, worktree.sync_state_file(root, upstream))


def parse_state(root: Path, upstream: str, path: Path) -> SyncState:
    """The pin-sync state of UPSTREAM at PATH. Unreadable, of another version, or naming a
    tree that is not UPSTREAM's sync tree of its series: one line (exit 3), nothing touched."""
    raw = worktree.read_state(root, path, "pin-sync state")  # a FIFO or a directory there: one line
    shown = statehome.display(root, path)
    try:
        state = SyncState.from_json(json.loads(raw if raw is not None else b""))
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc) or type(exc).__name__
        raise EnvironmentFailure(
            f"{shown}: unreadable pin-sync state ({reason[:200]}); nothing was changed: {_remove_by_hand(root, path)}"
        ) from None
    if state.version not in READABLE_VERSIONS:
        raise OtherVersionState(f"{shown}: sync state of another patchctl version; run `{_abort(upstream)}`")
    state.version = STATE_VERSION  # what a save writes: the fields an older version lacks are read as defaults
    problem = _untrusted(root, upstream, state)
    if problem is not None:
        raise EnvironmentFailure(
            f"{shown}: not a pin-sync state patchctl wrote ({problem}); nothing was changed: "
            f"{_remove_by_hand(root, path)}"
        )
    return state


class OtherVersionState(UsageError):
    """A sync state another patchctl wrote: only --abort, which reads none of it, goes on. (Damaged or
    planted state is refused by every command, --abort included: it is removed by hand.)"""


def _remove_by_hand(root: Path, path: Path) -> str:
    sync_root = worktree.sync_root(root, path.parent.name)
    return f"remove it and its sync trees by hand (`{shell_command(['rm', '-r', '--', path.parent, sync_root])}`)"


def _abort(upstream: str) -> str:
    return shell_command(["patchctl", "pin-sync", upstream, "--abort"])


def _untrusted(root: Path, upstream: str, state: SyncState) -> str | None:
    """Why STATE is not one pin-sync of UPSTREAM writes in the repository at ROOT, or None.
    Every field is checked, as the journal's are: the revisions are full commit ids (so none
    reaches git where it could be read as an option), names are names, texts are bounded."""
    if state.upstream != upstream or not isinstance(upstream, str) or not _NAME.match(upstream):
        return f"upstream {str(state.upstream)[:80]!r} in the state of {upstream}"
    for what, commit in (("old pin", state.old_pin), ("target", state.target)):
        if not (isinstance(commit, str) and _COMMIT.match(commit)):
            return f"{what} {str(commit)[:80]!r}"
    if not _text_ok(state.target_spec):
        return f"target {str(state.target_spec)[:80]!r}"
    if state.phase not in PHASES:
        return f"phase {str(state.phase)[:80]!r}"
    if not _facts_ok(state.upstream_facts):
        return f"upstream facts {str(state.upstream_facts)[:80]!r}"
    if not isinstance(state.series, list) or not isinstance(state.records, list):
        return "series or records that are not lists"
    names = set()
    for entry in state.series:
        if not isinstance(entry.name, str) or not _NAME.match(entry.name) or entry.name in names:
            return f"series name {str(entry.name)[:80]!r}"
        names.add(entry.name)
        expected = str(worktree.sync_tree(root, upstream, entry.name))
        if entry.tree != expected:
            return f"tree {str(entry.tree)[:200]!r} of series {entry.name} is not {expected}"
        if not isinstance(entry.upstream, str) or not _NAME.match(entry.upstream):
            return f"upstream {str(entry.upstream)[:80]!r} of series {entry.name}"
        for commit in (entry.head_before, entry.head, entry.old_head):
            if commit is not None and not (isinstance(commit, str) and _COMMIT.match(commit)):
                return f"commit {str(commit)[:80]!r} of series {entry.name}"
        if not isinstance(entry.unseeded, list) or not all(
            isinstance(i, str) and _OBJECT_PREFIX.match(i) for i in entry.unseeded
        ):
            return f"preimage ids {str(entry.unseeded)[:80]!r} of series {entry.name}"
        if not isinstance(entry.replayed, dict) or not all(
            isinstance(c, str) and _COMMIT.match(c) and _replayed_ok(v) for c, v in entry.replayed.items()
        ):
            return f"replayed commits {str(entry.replayed)[:80]!r} of series {entry.name}"
        if not isinstance(entry.next, int) or isinstance(entry.next, bool) or entry.next < 0:
            return f"next patch {str(entry.next)[:80]!r} of series {entry.name}"
        if not (isinstance(entry.digest, str) and _SHA256.match(entry.digest)):
            return f"digest {str(entry.digest)[:80]!r} of series {entry.name}"
    for record in state.records:
        if (problem := _record_problem(record, names)) is not None:
            return problem
    return None


PHASES = ("replaying", "conflict", "gates-failed")
_MAX_TEXT = 64 * 1024  # a record's detail: a git message, a list of files
# A log of the range kept in the state (NUL-separated: git's -z output), well within MAX_STATE_BYTES;
# a longer one is not kept: each --continue asks git again.
MAX_RANGE_LOG = 2 * 1024 * 1024


def _text_ok(value: object, limit: int = _MAX_TEXT) -> bool:
    return isinstance(value, str) and len(value) <= limit and "\0" not in value


def _record_problem(record: PatchRecord, series: set[str]) -> str | None:
    """Why RECORD is not one a replay of SERIES writes, or None."""
    if record.series not in series:
        return f"record of series {str(record.series)[:80]!r}"
    name = record.patch
    if not (_text_ok(name, 255) and name and "/" not in name and name not in (".", "..")):
        return f"patch {str(name)[:80]!r} in the records of {record.series}"
    if not all(_text_ok(v) for v in (record.classification, record.detail)):
        return f"record of {name[:80]!r}: classification or detail {str(record.classification)[:80]!r}"
    for listed in (record.conflicts, record.renames):
        if not isinstance(listed, list) or not all(_text_ok(v, 4096) for v in listed):
            return f"record of {name[:80]!r}: files {str(listed)[:80]!r}"
    taken = record.taken_upstream
    if taken is not None and not (
        isinstance(taken, dict)
        and all(isinstance(k, str) and _text_ok(v, 4096) for k, v in taken.items())
        and isinstance(taken.get("commit"), str)
        and _COMMIT.match(taken["commit"])
    ):
        return f"record of {name[:80]!r}: taken upstream by {str(taken)[:80]!r}"
    return None


def _replayed_ok(value: object) -> bool:
    """[a patch file's sha256, whether it applied strictly]: what SeriesProgress.replayed holds."""
    return (
        isinstance(value, list)
        and len(value) == 2
        and isinstance(value[0], str)
        and bool(_SHA256.match(value[0]))
        and isinstance(value[1], bool)
    )


def _facts_ok(facts: object) -> bool:
    """FACTS is what `PinMove` keeps: patch-ids (hex, "" for no change, "-" for none) by commit or
    patch digest, and renames as old path -> new path; and the output of the range's logs a sync
    reads at every round (`patchctl.loop.sync_history.keep_range_logs`)."""
    if not isinstance(facts, dict) or not set(facts) <= {"patch_ids", "renames", "range_logs"}:
        return False
    ids = facts.get("patch_ids", {})
    renames = facts.get("renames", {})
    logs = facts.get("range_logs", {})
    return (
        isinstance(logs, dict)
        and set(logs) <= {"commits", "drift"}
        and all(isinstance(output, str) and len(output) <= MAX_RANGE_LOG for output in logs.values())
        and isinstance(ids, dict)
        and all(
            isinstance(k, str) and _FACT_KEY.match(k) and isinstance(v, str) and _PATCH_ID.match(v)
            for k, v in ids.items()
        )
        and isinstance(renames, dict)
        and all(_text_ok(k, 4096) and _text_ok(v, 4096) for k, v in renames.items())
    )


def commit_pin_update(config_file: Path, changes: list[journal.FileChange]) -> None:
    """Write CHANGES all together or not at all, through the journal of CONFIG_FILE's repository."""
    journal.commit(config_file, changes)
