"""The compile bisect's search: which commit of the pin..tip line first breaks the build.

Two ways to judge a commit, both given by the caller (`patchctl.loop.canary`), both
answering True (fails), False (builds) or None (cannot tell: the series does not apply there,
skipped like `git bisect skip`):

* a full build: the build's own steps, an incremental rebuild in the tip's tree;
* a probe (`patchctl.loop.probe_build`): only the translation units that failed at the tip,
  compiled with their recorded commands.

The probe search bisects with probes, then confirms the commit it names with two full
builds: at that commit (it must fail) and at its parent (the nearest earlier commit the
series applies at; it must build). When they disagree (a link error the probes cannot see,
say), or the probes cannot start (no record of failed units), the full-build search runs
instead, reusing the full builds already done, and the note says why.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import field

from ..records import dataclass

Verdict = Callable[[str], "bool | None"]
PROBE = "probe"
FULL = "full"
IN_FULL = "in full"  # a probe's answer where the units cannot be compiled alone: build that commit in full


@dataclass
class BisectResult:
    first_bad: str | None
    note: str  # why nothing was named, or how the commit was found
    method: str  # probe | full: how FIRST_BAD was found
    fallback: str = ""  # why the probe search was not used or not believed
    full_builds: int = 0
    probes: int = 0
    full_builds_s: float = 0.0  # wall time of the full builds and of the probes (checkouts included)
    probes_s: float = 0.0
    units: list[str] = field(default_factory=list)
    compiler_cache: str = ""
    derived_again: int = 0  # probes at which CMake derived the compile commands again

    def record(self) -> dict:
        """The `bisect` entry of a compile record's JSON."""
        record: dict = {"method": self.method, "full_builds": self.full_builds}
        record["full_builds_s"] = round(self.full_builds_s, 1)
        if self.fallback:
            record["fallback"] = self.fallback
        if self.units:
            record |= {"units": self.units, "probes": self.probes, "probes_s": round(self.probes_s, 1)}
            record |= {"compiler_cache": self.compiler_cache, "derived_again": self.derived_again}
        return record


class _Memo:
    """VERDICT asked at most once per commit; COUNT is how many times it really ran, SECONDS
    how long that took."""

    def __init__(self, verdict: Verdict, tip: str):
        self.verdict = verdict
        self.known: dict[str, bool | None] = {tip: True}  # the tip's build failed: why we bisect
        self.count = 0
        self.seconds = 0.0

    def __call__(self, commit: str) -> bool | None:
        if commit not in self.known:
            self.count += 1
            start = time.monotonic()
            self.known[commit] = self.verdict(commit)
            self.seconds += time.monotonic() - start
        return self.known[commit]


def search(
    line: list[str],
    pin: str,
    tip: str,
    full_build: Verdict,
    probe: Callable[[str], bool | str | None] | None = None,
    *,
    no_probe: str = "",
    units: list[str] | None = None,
) -> BisectResult:
    """The first commit of LINE (the pin's first-parent descendants up to TIP, oldest first)
    at which the build fails. PROBE None: full builds only, NO_PROBE says why. PROBE may
    answer IN_FULL: that commit is judged by a full build."""
    full = _Memo(full_build, tip)
    if probe is None:
        return _full_search(line, pin, full, fallback=no_probe)

    def judged(commit: str) -> bool | None:
        said = probe(commit)
        if said != IN_FULL:
            return said  # type: ignore[return-value]
        before = full.seconds
        said = full(commit)
        probes.seconds -= full.seconds - before  # that time is the full builds', not the probes'
        return said

    probes = _Memo(judged, tip)
    at_pin = probes(pin)
    if at_pin is None:
        return _done(None, "the series does not apply at the pin", PROBE, full, probes, units)
    if at_pin:
        why = "the failed units do not compile at the pin either: fell back to the full-build bisect"
        return _full_search(line, pin, full, fallback=why, probes=probes, units=units)
    first_bad = _first_failing_skipping(line, probes)
    assert first_bad is not None  # the line ends at the tip, whose build failed
    chain = [pin, *line]
    at = chain.index(first_bad)
    good = next(c for c in reversed(chain[:at]) if probes(c) is False)  # the pin at worst
    bad_full, good_full = full(first_bad), full(good)
    parent = "its parent" if chain[at - 1] == good else "its nearest ancestor the series applies at"
    if bad_full is True and good_full is False:
        note = (
            f"found by compiling only the {_count(units, 'translation unit')} that failed at the tip "
            f"({', '.join(units or [])}) at {probes.count} commit(s), confirmed by full builds at "
            f"{first_bad[:12]} (fails) and {parent} {good[:12]} (builds)"
        )
        return _done(first_bad, note, PROBE, full, probes, units, skipped=_skipped(probes))
    why = (
        f"the probes named {first_bad[:12]}, but the full build there {_says(bad_full)} and at {parent} "
        f"{good[:12]} it {_says(good_full)}: fell back to the full-build bisect"
    )
    return _full_search(line, pin, full, fallback=why, probes=probes, units=units)


def _full_search(
    line: list[str],
    pin: str,
    full: _Memo,
    *,
    fallback: str,
    probes: _Memo | None = None,
    units: list[str] | None = None,
) -> BisectResult:
    at_pin = full(pin)
    if at_pin is not False:
        note = "it does not build at the pin either" if at_pin else "the series does not apply at the pin"
        return _done(None, note, FULL, full, probes, units, fallback=fallback)
    first_bad = _first_failing_skipping(line, full)
    if first_bad is None:
        note = "it builds at every commit on the line from pin to tip that the series applies at"
        return _done(None, note, FULL, full, probes, units, fallback=fallback)
    note = f"found by full builds at {full.count} commit(s)"
    return _done(first_bad, note, FULL, full, probes, units, fallback=fallback, skipped=_skipped(full))


def _done(
    first_bad: str | None,
    note: str,
    method: str,
    full: _Memo,
    probes: _Memo | None,
    units: list[str] | None,
    *,
    fallback: str = "",
    skipped: int = 0,
) -> BisectResult:
    if skipped:
        note += f" ({skipped} probed commit(s) skipped: the series does not apply there)"
    if fallback:
        note += f"; {fallback}"
    result = BisectResult(first_bad, note, method, fallback, full.count, full_builds_s=full.seconds)
    if probes is not None:
        result.probes, result.probes_s, result.units = probes.count, probes.seconds, list(units or [])
    return result


def _skipped(memo: _Memo) -> int:
    return sum(1 for verdict in memo.known.values() if verdict is None)


def _says(verdict: bool | None) -> str:
    return {True: "fails", False: "builds", None: "cannot be judged (the series does not apply)"}[verdict]


def _count(items: list[str] | None, noun: str) -> str:
    count = len(items or [])
    return f"{count} {noun}" + ("" if count == 1 else "s")


def _first_failing_skipping(line: list[str], fails: Callable[[str], bool | None]) -> str | None:
    """The first commit of LINE (oldest first) at which FAILS holds, assuming it keeps holding
    after that, where FAILS may say None (cannot tell): such a commit is skipped, and the
    answer is the first failing commit after the last good one. None when the last commit
    does not fail."""
    low, high = -1, len(line) - 1
    if fails(line[high]) is not True:
        return None
    while high - low > 1:
        middle = (low + high) // 2
        probe = middle
        while probe < high and fails(line[probe]) is None:
            probe += 1
        if probe == high:  # everything from middle up is untestable: look below it
            below = middle - 1
            while below > low and fails(line[below]) is None:
                below -= 1
            if below == low:
                return line[high]  # nothing testable between the last good and the first bad
            if fails(line[below]):
                high = below
            else:
                low = below
            continue
        if fails(line[probe]):
            high = probe
        else:
            low = probe
    return line[high]
