"""A review aid: `git range-diff` of a patch series before and after its pin moves.

The old series is the patches as commits on the old pin; the new one is the same series as
commits on the new pin (what a pin-sync replayed, or what a canary applied at the tip). The
text is git's own, made deterministic: no colour, a fixed abbreviation length and diff
algorithm, and none of the user's config (every git call is isolated). A workflow can put
it in a pull-request body as it is.
"""

from __future__ import annotations

from pathlib import Path

from .. import git
from ..errors import GitError
from ..series.applier import apply_series_to_index
from ..series.patchset import PatchFile

# Pinned so that the text depends on the commits alone, not on how many objects the cache holds
# (git picks its abbreviation length from that) or on a diff setting.
RANGE_DIFF_CONFIG = ["-c", "core.abbrev=12", "-c", "diff.algorithm=myers", "-c", "color.ui=false"]
CREATION_FACTOR = 60  # git's default, written out so that a new git default cannot change the report


def range_diff(repo: Path, old_base: str, old_tip: str, new_base: str, new_tip: str) -> str:
    """`git range-diff OLD_BASE..OLD_TIP NEW_BASE..NEW_TIP` in REPO, as text ("" when both
    ranges are empty). Raises GitError when git cannot compute it."""
    old_empty, new_empty = _empty(repo, old_base, old_tip), _empty(repo, new_base, new_tip)
    if old_empty and new_empty:
        return ""
    if old_empty or new_empty:
        # git refuses an empty range ("need two commit ranges"): the lines it would print, in its format.
        return _one_sided(repo, *((new_base, new_tip) if old_empty else (old_base, old_tip)), new_side=old_empty)
    result = git.run(
        [
            *RANGE_DIFF_CONFIG,
            "range-diff",
            "--no-color",
            f"--creation-factor={CREATION_FACTOR}",
            f"{old_base}..{old_tip}",
            f"{new_base}..{new_tip}",
        ],
        repo,
        check=False,
    )
    if not result.ok:
        raise GitError(f"git range-diff failed in {repo}: {git.first_line(result.stderr)}")
    return result.stdout


def _empty(repo: Path, base: str, tip: str) -> bool:
    return git.run(["rev-list", "--count", f"{base}..{tip}"], repo).stdout.strip() == "0"


def _one_sided(repo: Path, base: str, tip: str, *, new_side: bool) -> str:
    """range-diff's lines for commits on one side only: `N:  <id> < -:  ----` (dropped) or
    `-:  ---- > N:  <id>` (added)."""
    log = git.run(
        [*RANGE_DIFF_CONFIG, "log", "-z", "--reverse", "--no-color", "--format=%h%x00%s", f"{base}..{tip}"], repo
    ).stdout
    fields = log.split("\0")  # NUL-separated: a \r in a subject must not make an entry
    lines = []
    for number, (sha, subject) in enumerate(zip(fields[0::2], fields[1::2]), 1):
        dashes = "-" * len(sha)
        left, right = (f"-:  {dashes}", f"{number}:  {sha}") if new_side else (f"{number}:  {sha}", f"-:  {dashes}")
        lines.append(f"{left} {'>' if new_side else '<'} {right} {subject}")
    return "".join(line + "\n" for line in lines)


def old_series_head(repo: Path, old_pin: str, patches: list[PatchFile]) -> str:
    """The series as commits on OLD_PIN in REPO's object store (as far as it applies there);
    its last commit. The commits are deterministic, so the same series gives the same ids."""
    _, head = apply_series_to_index(repo, old_pin, patches)
    return head


def series_range_diff(repo: Path, old_pin: str, patches: list[PatchFile], new_base: str, new_tip: str) -> str:
    """The range-diff of PATCHES as applied on OLD_PIN against NEW_BASE..NEW_TIP (the series
    as it stands on the new pin), both in REPO."""
    return range_diff(repo, old_pin, old_series_head(repo, old_pin, patches), new_base, new_tip)
