"""The upstream's commits between a pin-sync's two pins, and the range's logs a stopped sync
keeps for every --continue."""

from __future__ import annotations

from pathlib import Path

from .. import git
from ..state.sync_state import MAX_RANGE_LOG, SyncState
from . import health

MAX_LISTED_COMMITS = 500


def upstream_logs(repo: Path, old: str, new: str) -> tuple[list[dict] | None, str]:
    """`upstream_commits`, and the log of the range the health rows read (kept for this process)."""
    listed = upstream_commits(repo, old, new)
    health.ask_drift(repo, old, new)
    return listed


def listing_log(old: str, new: str) -> list[str]:
    """The one `git log` `upstream_commits` reads."""
    return ["log", "-z", "--reverse", "--topo-order", "--boundary", "--format=%m%H%x00%s", f"{old}..{new}"]


def _range_logs(state: SyncState) -> dict[str, list[str]]:
    """The logs of the range a sync reads at every round, for the report alone (the upstream's
    commits, the health rows' drift), by the name the state keeps their output under."""
    return {
        "commits": listing_log(state.old_pin, state.target),
        "drift": health.drift_log(state.old_pin, state.target),
    }


def keep_range_logs(state: SyncState, repo: Path) -> None:
    """Keep in STATE what git answered this process to `_range_logs` in REPO: a --continue takes
    them (`take_range_logs`) instead of asking again (the range is fixed: both pins are commit
    ids). On a real bump, two git processes a round that git spends the longer on, the longer the range."""
    kept = state.upstream_facts.setdefault("range_logs", {})
    for name, args in _range_logs(state).items():
        if (answer := git.fixed_answer(args, repo)) is not None and len(answer) <= MAX_RANGE_LOG:
            kept[name] = answer


def take_range_logs(state: SyncState, repo: Path) -> None:
    for name, args in _range_logs(state).items():
        if (answer := state.upstream_facts.get("range_logs", {}).get(name)) is not None:
            git.take_fixed_answer(args, repo, answer)


def upstream_commits(repo: Path, old: str, new: str) -> tuple[list[dict] | None, str]:
    """Commits in NEW that OLD lacks, oldest first (at most MAX_LISTED_COMMITS), with a note."""
    if old == new:
        return [], ""
    # One git log: NUL-separated (a subject may hold any other character: a \r must not make an
    # entry), each commit marked ('-' for the boundary, the commits OLD has that the listed ones
    # stand on: OLD is one of them exactly when NEW descends from it).
    log = listing_log(old, new)
    listed = git.run_fixed(log, repo, commits=(old, new))
    if not listed.ok:
        if not git.run(["cat-file", "-e", f"{old}^{{commit}}"], repo, check=False).ok:
            return None, f"the old pin {old[:12]} is not in the upstream's history"
        git.run(log, repo)  # raises, with git's words
    fields = listed.stdout.split("\0")
    marked = list(zip(fields[0::2], fields[1::2]))
    ancestor = any(marked_sha == "-" + old for marked_sha, _ in marked)
    commits = [{"sha": sha[1:], "subject": subject} for sha, subject in marked if not sha.startswith("-")]
    note = (
        ""
        if ancestor
        else f"the new rev does not descend from {old[:12]} (history was rewritten); listing commits only in the "
        "new rev"
    )
    if len(commits) > MAX_LISTED_COMMITS:
        note = (note + "; " if note else "") + f"{len(commits)} commits, the newest {MAX_LISTED_COMMITS} listed"
        commits = commits[-MAX_LISTED_COMMITS:]
    return commits, note
