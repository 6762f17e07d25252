"""`patchctl canary`: apply every series to the upstream tip, to learn early what breaks.

A signal only: it never writes to the repository. Its trees and logs live in a scratch
directory outside it (`--work-dir`, default a new temporary directory; the trees are
removed at the end, the logs are kept for the report).

For every series on the upstream:

* each patch is applied strictly at the tip; one that fails is tried again with a 3-way
  merge, which says whether a pin-sync would be mechanical (merged, or already upstream)
  or needs a hand (conflict, file gone);
* for each patch that fails strictly, the upstream history between the pin and the tip is
  bisected (first-parent line) to name the first commit at which it stops applying;
* with `compile`, the series' build steps run once per toolchain that matrix.yaml's
  `canary:` section lists for this upstream, in the toolchain's image, each in its own
  clean tree; without a `canary:` section for the upstream they run as declared.

The canary is red (exit 1) when any patch fails strictly or any compile fails.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import ClassVar

from . import git
from .applier import IndexBuilder, PatchOutcome, Status, apply_in_worktree
from .config import Config, Series
from .errors import UsageError
from .jsonout import json_field, to_json
from .patchset import PatchFile, read_series
from .runners import run_build
from .store import Mirror, Store

Progress = Callable[[str], None]
MECHANICAL = "mechanical"
NEEDS_HAND = "needs a hand"


@dataclass
class CanaryPatch:
    patch: str
    strict: str  # applier Status value
    strict_detail: str = ""
    trial: str | None = None  # 3-way trial outcome when strict failed
    verdict: str = "ok"  # ok | mechanical | needs a hand
    breaking_commit: dict | None = None  # {sha, subject}: first upstream commit it fails at
    bisect_note: str = ""


@dataclass
class CanarySeries:
    JSON_PROPERTIES: ClassVar[dict[str, str]] = {"verdict": "verdict"}

    name: str
    patches: list[CanaryPatch] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        verdicts = {p.verdict for p in self.patches}
        if NEEDS_HAND in verdicts:
            return NEEDS_HAND
        return MECHANICAL if MECHANICAL in verdicts else "ok"


@dataclass
class CompileRecord:
    toolchain: str
    series: str
    image: str | None
    state: str  # passed | failed | skipped
    detail: str = ""
    steps: list[dict] = field(default_factory=list)


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


@dataclass(frozen=True)
class Toolchain:
    name: str
    image: str | None  # None: run the build steps as the series declares them


def canary(
    config: Config,
    store: Store,
    upstream: str | None = None,
    *,
    rev: str | None = None,
    compile: bool = False,
    bisect: bool = True,
    toolchains: tuple[str, ...] = (),
    work_dir: Path | None = None,
    progress: Progress | None = None,
) -> CanaryReport:
    say = progress or (lambda _line: None)
    start = time.monotonic()
    name = _pick_upstream(config, upstream)
    up = config.get_upstream(name)
    mirror = store.mirror(up.url, base=config.root)
    tip = store.resolve(mirror, rev) if rev else store.branch_tip(mirror, up.branch)
    selected = _toolchains(config, name, toolchains) if compile else []
    workspace = Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix="patchctl-canary-"))
    _refuse_inside(config, workspace)
    workspace.mkdir(parents=True, exist_ok=True)
    report = CanaryReport(
        name,
        up.pin,
        tip,
        rev or f"tip of {up.branch}",
        _count_commits(mirror.path, up.pin, tip),
        work_dir=str(workspace),
    )
    heads: dict[str, str | None] = {}
    for series in config.series_on(name):
        say(f"applying {series.name} at {tip[:12]}")
        result, head = _trial(store, mirror, series, tip, workspace / "trees" / f"trial-{series.name}")
        report.series.append(result)
        heads[series.name] = head if result.verdict != NEEDS_HAND else None
        if bisect:
            _bisect_failures(mirror, series, result, up.pin, tip, say)
    if compile:
        for toolchain in selected:
            for series in config.series_on(name):
                say(f"compiling {series.name} with {toolchain.name}")
                report.compiles.append(
                    _compile(store, mirror, series, toolchain, heads.get(series.name), workspace, say)
                )
    report.duration_s = time.monotonic() - start
    return report


# ---------------------------------------------------------------- apply and 3-way trial


def _trial(store: Store, mirror: Mirror, series: Series, tip: str, tree: Path) -> tuple[CanarySeries, str]:
    """Apply each patch strictly at TIP; retry a failing one with 3-way. Returns the
    classification and the commit with every patch that could be applied."""
    result = CanarySeries(series.name)
    store.remove_worktree(mirror, tree)
    store.add_worktree(mirror, tip, tree)
    try:
        for patch in read_series(series):
            strict = apply_in_worktree(tree, patch, three_way=False, commit=True)
            entry = CanaryPatch(
                patch.name, strict.status.value, "" if strict.ok else strict.describe().split(": ", 1)[-1]
            )
            if not strict.ok:
                entry.trial, entry.verdict = _three_way_trial(tree, patch, strict)
            result.patches.append(entry)
        return result, git.rev_parse(tree, "HEAD")
    finally:
        store.remove_worktree(mirror, tree)


def _three_way_trial(tree: Path, patch: PatchFile, strict: PatchOutcome) -> tuple[str, str]:
    if strict.status == Status.ALREADY_APPLIED:
        return "already upstream: pin-sync drops it", MECHANICAL
    if strict.status in (Status.MALFORMED, Status.UNSAFE_PATH):
        return f"not tried: {strict.status.value}", NEEDS_HAND
    merged = apply_in_worktree(tree, patch, three_way=True, commit=True)
    if merged.status == Status.MERGED:
        return "merged 3-way without conflict", MECHANICAL
    if merged.ok:  # the strict failure was transient; should not happen, but it applies
        return merged.status.value, MECHANICAL
    # Leave the tree as it was before this patch, so the following patches are judged alone.
    git.run(["reset", "-q", "--hard", "HEAD"], tree)
    git.run(["clean", "-q", "-fd"], tree)
    if merged.status == Status.CONFLICT:
        return f"3-way conflict in {', '.join(merged.conflict_files)}", NEEDS_HAND
    return f"3-way failed: {merged.describe().split(': ', 1)[-1]}", NEEDS_HAND


# ---------------------------------------------------------------- bisect


def _bisect_failures(mirror: Mirror, series: Series, result: CanarySeries, pin: str, tip: str, say: Progress) -> None:
    failing = [i for i, p in enumerate(result.patches) if p.verdict != "ok"]
    if not failing:
        return
    patches = read_series(series)
    line, note = _first_parent_line(mirror.path, pin, tip)
    for index in failing:
        entry = result.patches[index]
        if line is None:
            entry.bisect_note = note
            continue
        say(f"bisecting {series.name}/{entry.patch} over {len(line)} commit(s)")
        if not applies_at(mirror.path, pin, patches, index):
            entry.bisect_note = "it does not apply at the pin either"
            continue
        first_bad = _first_failing(
            line, lambda commit, index=index: not applies_at(mirror.path, commit, patches, index)
        )
        if first_bad is None:
            entry.bisect_note = (
                "it applies at every commit on the line from pin to tip (it fails only on top of other changes)"
            )
            continue
        subject = git.run(["log", "-1", "--format=%s", first_bad], mirror.path).stdout.strip()
        entry.breaking_commit = {"sha": first_bad, "subject": subject}
        entry.bisect_note = f"first of {len(line)} upstream commit(s) since the pin at which it stops applying"


def applies_at(repo: Path, commit: str, patches: list[PatchFile], index: int) -> bool:
    """Whether patch INDEX applies strictly at COMMIT on top of the earlier patches that do."""
    with IndexBuilder(repo, commit) as builder:
        for earlier in patches[:index]:
            builder.apply(earlier, commit=False)
        return builder.apply(patches[index], commit=False).ok


def _first_failing(line: list[str], fails: Callable[[str], bool]) -> str | None:
    """The first commit of LINE (oldest first) at which FAILS holds, assuming it keeps
    holding after that; None when it holds nowhere."""
    low, high = -1, len(line) - 1  # fails(line[high]) is what we are looking to confirm
    if not line or not fails(line[high]):
        return None
    while high - low > 1:
        middle = (low + high) // 2
        if fails(line[middle]):
            high = middle
        else:
            low = middle
    return line[high]


def _first_parent_line(repo: Path, pin: str, tip: str) -> tuple[list[str] | None, str]:
    if not git.run(["merge-base", "--is-ancestor", pin, tip], repo, check=False).ok:
        return None, f"no bisect: the tip does not descend from the pin {pin[:12]}"
    out = git.run(["rev-list", "--reverse", "--first-parent", "--ancestry-path", f"{pin}..{tip}"], repo).stdout.split()
    return out, ""


def _count_commits(repo: Path, pin: str, tip: str) -> int | None:
    found = git.run(["rev-list", "--count", f"{pin}..{tip}"], repo, check=False)
    return int(found.stdout.strip()) if found.ok else None


# ---------------------------------------------------------------- compile


def _toolchains(config: Config, upstream: str, names: tuple[str, ...] = ()) -> list[Toolchain]:
    """The canary toolchains of UPSTREAM (only NAMES when given: one CI job per toolchain)."""
    from .matrix import from_config

    section = from_config(config).canary
    if section is None or section.upstream != upstream or not section.toolchains:
        if names:
            raise UsageError(
                f"--toolchain {names[0]}: matrix.yaml declares no canary toolchains for upstream {upstream}"
            )
        return [Toolchain("declared", None)]
    known = [Toolchain(t.name, t.image) for t in section.toolchains]
    unknown = [n for n in names if n not in {t.name for t in known}]
    if unknown:
        raise UsageError(
            f"unknown canary toolchain {unknown[0]!r} (matrix.yaml declares: {', '.join(t.name for t in known)})"
        )
    return [t for t in known if not names or t.name in names]


def _compile(
    store: Store, mirror: Mirror, series: Series, toolchain: Toolchain, head: str | None, workspace: Path, say: Progress
) -> CompileRecord:
    record = CompileRecord(toolchain.name, series.name, toolchain.image, "skipped")
    if head is None:
        record.detail = "the series does not apply at the tip, even with 3-way"
        return record
    if not series.build:
        record.detail = "the series declares no build steps"
        return record
    tree = workspace / "trees" / f"build-{toolchain.name}-{series.name}"
    logs = workspace / "logs" / toolchain.name / series.name
    store.remove_worktree(mirror, tree)
    store.add_worktree(mirror, head, tree)  # a clean tree per toolchain: no build shares objects
    try:
        record.state = "passed"
        for index, step in enumerate(series.build):
            if toolchain.image is not None:
                step = replace(step, runner="docker", image=toolchain.image)
            result = run_build(step, tree, logs / f"{index + 1:02d}-{step.name}.log", say)
            record.steps.append(to_json(result))
            if not result.ok:
                record.state, record.detail = "failed", f"{step.name}: {result.reason}"
                break
    finally:
        store.remove_worktree(mirror, tree)
    return record


# ---------------------------------------------------------------- helpers


def _pick_upstream(config: Config, name: str | None) -> str:
    if name is not None:
        config.get_upstream(name)
        return name
    from .matrix import from_config

    section = from_config(config).canary
    if section is not None:
        return section.upstream
    roots = [u.name for u in config.upstreams.values() if u.tracks is None]
    if len(roots) != 1:
        raise UsageError(
            f"name the upstream for the canary (matrix.yaml defines: {', '.join(sorted(config.upstreams)) or 'none'})"
        )
    return roots[0]


def _refuse_inside(config: Config, workspace: Path) -> None:
    resolved = workspace.resolve()
    if resolved == config.root or config.root in resolved.parents:
        raise UsageError(f"--work-dir {workspace} is inside the repository; the canary never writes there")
