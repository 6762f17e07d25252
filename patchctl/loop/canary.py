"""`patchctl canary`: apply every series to the upstream tip, to learn early what breaks.

A signal only: it never writes to the repository's files. Its trees live in a scratch
directory (`--work-dir`, default a temporary directory removed at the end); the compile
logs go to `--work-dir`/logs, or by default to `.patchctl/logs/canary/UPSTREAM/`.

For every series on the upstream:

* each patch is applied strictly at the tip; one that fails is tried again with a 3-way
  merge, which says whether a pin-sync would be mechanical (merged, or already upstream)
  or stop, and at what (docs/reference/index.md#stops): a conflict, a patch that needs a
  hand (file gone, with git's own reason) or a look (the same edit upstream); every failing file and
  hunk is named. The blobs 3-way needs are created from the pin first, every time, so the
  verdicts never depend on what the cache happens to hold; moved files, foreign index lines
  and identical edits upstream made for another reason are handled as pin-sync does
  (`patchctl.loop.carry`);
* a failing patch that touches files an earlier, unapplied patch touches is "blocked by"
  that patch (a cascade, not an upstream break): it is neither merged nor bisected;
* for each other patch that fails strictly, the upstream history between the pin and the
  tip is bisected (first-parent line) to name the first commit at which it stops
  applying. Probes share their work: at each commit the series is applied once, as far as
  the patches asked about, in a private index kept for the next question;
* with `compile`, each toolchain that matrix.yaml's `canary:` section lists for this
  upstream builds the series at the tip in its own clean tree, in its image (pulled when
  the engine lacks it, or built from the toolchain's `dockerfile:`), with its own
  `command:` (the series' `build:` steps when it has none); without a `canary:` section
  the build steps run as declared. A build that fails at the tip is bisected over the
  same first-parent line, in the same tree (its build directory kept), to name the first
  upstream commit that breaks the build with the series applied: by default each probe
  compiles only the translation units that failed at the tip and two full builds confirm
  the commit named (`compile_bisect`, `probe_build`); the report quotes the failing log's tail;
* every break (a patch that fails strictly, not blocked by another; a toolchain whose
  build fails) gets a stable key: upstream, kind, patch or toolchain, first bad commit.
  `CanaryReport.issues()` renders one issue per key (title, body with a hidden key
  marker) for the workflow to open, comment on, or close.

The canary is red (exit 1) when any patch fails strictly or any compile fails.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from .. import git
from ..confined import confined_path
from ..confined import scratch as scratch_dirs
from ..errors import GitError, UsageError
from ..output.jsonout import to_json
from ..project.config import BuildStep, Config, Series
from ..records import dataclass
from ..series.applier import IndexBuilder, PatchOutcome, Status, apply_in_worktree, seed_three_way_objects
from ..series.patchset import PatchFile, read_series
from ..state import worktree
from ..upstream.store import Mirror, Store
from . import carry, compile_bisect, health, probe_build, stopcause, submitted
from .canary_report import (
    BLOCKED,
    CONFLICT,
    MECHANICAL,
    NEEDS_HAND,
    NEEDS_LOOK,
    STOPS,
    CanaryPatch,
    CanaryReport,
    CanarySeries,
    CompileRecord,
)
from .rangediff import series_range_diff
from .runners import ensure_image, log_tail, run_build

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Toolchain:
    name: str
    image: str | None  # None: run the build steps as the series declares them
    command: str = ""  # the toolchain's own build; empty: the series' build steps
    dockerfile: Path | None = None  # built into IMAGE from BASE_IMAGE before the compile
    base_image: str | None = None


def canary(
    config: Config,
    store: Store,
    upstream: str | None = None,
    *,
    rev: str | None = None,
    compile: bool = False,
    bisect: bool = True,
    bisect_builds: str = compile_bisect.PROBE,
    toolchains: tuple[str, ...] = (),
    work_dir: Path | None = None,
    check_submitted: bool = False,
    progress: Progress | None = None,
) -> CanaryReport:
    say = progress or (lambda _line: None)
    start = time.monotonic()
    name = _pick_upstream(config, upstream)
    up = config.get_upstream(name)
    if not config.series_on(name):
        raise UsageError(f"no series in {config.path.name} is on upstream {name}: the canary would check nothing")
    read = {series.name: read_series(series) for series in config.series_on(name)}  # fail closed, before fetching
    pulls = submitted.notes([patch for patches in read.values() for patch in patches]) if check_submitted else {}
    mirror = store.mirror(up.url, base=config.root)
    store.resolve_pin(mirror, config, name)  # a pin that is no commit: its matrix.yaml line, not git's words
    tip = store.resolve_requested(mirror, config, name, rev) if rev else store.branch_tip(mirror, up.branch)
    commit_url = stopcause.commit_url_base(stopcause.upstream_urls(config, name))
    selected = _toolchains(config, name, toolchains) if compile else []
    if work_dir is not None:
        _refuse_inside(config, Path(work_dir))
        Path(work_dir).mkdir(parents=True, exist_ok=True)
    logs = Path(work_dir) / "logs" if work_dir else worktree.canary_logs(config.root, name)
    if not work_dir:
        logs = confined_path(worktree.state_owner(config.root), logs)
    # Trees are scratch: a temporary directory removed at the end, whatever happens.
    scratch = Path(work_dir) if work_dir else scratch_dirs.make("patchctl-canary-")
    report = CanaryReport(
        name,
        up.pin,
        tip,
        rev or f"tip of {up.branch}",
        _count_commits(mirror.path, up.pin, tip),
        work_dir=str(logs) if compile else (str(work_dir) if work_dir else ""),
    )
    try:
        heads: dict[str, str | None] = {}
        for series in config.series_on(name):
            say(f"applying {series.name} at {tip[:12]}")
            patches = read[series.name]
            seed_three_way_objects(mirror.path, up.pin, patches)
            result, head = _trial(
                store,
                mirror,
                series,
                patches,
                tip,
                scratch / "trees" / f"trial-{series.name}",
                pin=up.pin,
                commit_url=commit_url,
            )
            report.series.append(result)
            result.range_diff = _range_diff(mirror.path, up.pin, patches, tip, head)
            outcomes = {p.patch: {**to_json(p), "submitted": pulls.get(p.patch)} for p in result.patches}
            report.health += health.health_rows(mirror.path, up.pin, tip, series.name, patches, outcomes)
            heads[series.name] = head if result.verdict != "stops" else None
            if bisect:
                _bisect_failures(mirror, patches, result, up.pin, tip, say)
        if compile:
            for toolchain in selected:
                if toolchain.image is not None:
                    ensure_image(
                        toolchain.image, dockerfile=toolchain.dockerfile, base_image=toolchain.base_image, progress=say
                    )
                for series in config.series_on(name):
                    say(f"compiling {series.name} with {toolchain.name}")
                    record, tree = _compile(
                        store,
                        mirror,
                        series,
                        toolchain,
                        heads.get(series.name),
                        scratch,
                        logs,
                        say,
                        record_commands=bisect and bisect_builds == compile_bisect.PROBE,
                    )
                    try:
                        if bisect and record.state == "failed":
                            _bisect_compile(
                                mirror, series, toolchain, record, tree, up.pin, tip, logs, say, bisect_builds
                            )
                    finally:
                        store.remove_worktree(mirror, tree)
                    report.compiles.append(record)
    finally:
        if work_dir is None:
            scratch_dirs.remove(scratch)
    report.duration_s = time.monotonic() - start
    return report


def trial_at(
    store: Store,
    mirror: Mirror,
    series: Series,
    patches: list[PatchFile],
    pin: str,
    tip: str,
    scratch: Path,
    *,
    commit_url: str | None = None,
) -> CanarySeries:
    """The canary's verdict on each patch of SERIES at TIP (strict, else 3-way, taken upstream),
    in a tree under SCRATCH that is removed afterwards: what `patchctl status` reports. COMMIT_URL:
    where an upstream commit's page is, for the causes of the patches that need a hand."""
    seed_three_way_objects(mirror.path, pin, patches)
    result, _ = _trial(
        store, mirror, series, patches, tip, scratch / f"trial-{series.name}", pin=pin, commit_url=commit_url
    )
    return result


def _range_diff(repo: Path, pin: str, patches: list[PatchFile], tip: str, head: str) -> str:
    """The series on the pin against the series as the trial applied it at the tip (a review
    aid: when git cannot compute it, the report says so in its place)."""
    try:
        return series_range_diff(repo, pin, patches, tip, head)
    except GitError as exc:
        return f"(range-diff not available: {exc})\n"


# ---------------------------------------------------------------- apply and 3-way trial


def _trial(
    store: Store,
    mirror: Mirror,
    series: Series,
    patches: list[PatchFile],
    tip: str,
    tree: Path,
    *,
    pin: str,
    commit_url: str | None = None,
) -> tuple[CanarySeries, str]:
    """Apply each patch strictly at TIP; retry a failing one with 3-way. Returns the
    classification and the commit with every patch that could be applied."""
    result = CanarySeries(series.name)
    store.remove_worktree(mirror, tree)
    store.add_worktree(mirror, tip, tree)
    unapplied: dict[str, str] = {}  # path -> the earlier patch that touches it and could not be applied
    move = carry.PinMove(tree, pin, tip, patches)
    pins = stopcause.Pins(tree, pin, tip, commit_url)
    try:
        for patch in patches:
            strict = apply_in_worktree(tree, patch, three_way=False, commit=True)
            entry = CanaryPatch(
                patch.name, strict.status.value, "" if strict.ok else strict.describe().split(": ", 1)[-1]
            )
            if not strict.ok:
                blocker = next((unapplied[p] for p in patch.touched_paths() if p in unapplied), None)
                if blocker is not None and strict.status != Status.ALREADY_APPLIED:
                    entry.trial, entry.verdict, entry.blocked_by = f"blocked by {blocker}", BLOCKED, blocker
                else:
                    entry.trial, entry.verdict, entry.stop_cause = _three_way_trial(tree, patch, strict, move, pins)
                    _note_taken(entry, tree, patch, move)
                    if entry.verdict not in STOPS:
                        entry.stop_cause = None  # taken upstream after all: pin-sync drops it
                if entry.verdict in STOPS:
                    unapplied.update(dict.fromkeys(patch.touched_paths(), patch.name))
            result.patches.append(entry)
        return result, git.rev_parse(tree, "HEAD")
    finally:
        store.remove_worktree(mirror, tree)


def _note_taken(entry: CanaryPatch, tree: Path, patch: PatchFile, move: carry.PinMove) -> None:
    """Say which upstream commit took the patch, a patch the tip already holds (found with
    every hunk present, or by its patch-id): pin-sync drops it. One that does not apply whose
    patch-id an upstream commit has is not taken (a patch-id ignores whitespace): pin-sync stops
    there for a look, and the trial says so, naming the commit."""
    holds = entry.trial.startswith("already upstream")
    taken = carry.taken_upstream(move, patch, tree if holds else None)
    entry.upstream_holds = holds
    if taken is None:
        return
    url = patch.upstream_status.url if patch.upstream_status is not None else None
    if holds:
        entry.taken_upstream = taken.record(url)
        entry.trial = f"already upstream, {taken.describe(url)}: pin-sync drops it"
    elif entry.verdict in (CONFLICT, NEEDS_HAND, NEEDS_LOOK):
        # A patch-id is no proof of the exact change: a stop that needs a look (3-way's word kept in the trial).
        entry.trial = f"{carry.NOT_EXACT}: {carry.describe_not_exact(taken)} (3-way alone: {entry.trial})"
        entry.verdict = NEEDS_LOOK
    else:  # it merges: upstream's twin commit is worth knowing, not a reason to drop it
        entry.trial += f"; {carry.describe_not_exact(taken)}"


def _three_way_trial(
    tree: Path, patch: PatchFile, strict: PatchOutcome, move: carry.PinMove, pins: stopcause.Pins
) -> tuple[str, str, stopcause.StopCause | None]:
    """The 3-way trial of a patch that failed strictly: what it says, the verdict, and for one
    that needs a hand the upstream commits behind the hunks that fail (PINS)."""
    if strict.status == Status.ALREADY_APPLIED:
        if edits := carry.same_edits(tree, move, patch):
            cause = pins.explain(patch, patch, [stopcause.Failed(e.file, e.hunk) for e in edits], stopcause.SAME_EDIT)
            _advise(patch, cause)
            return f"{carry.SAME_EDIT}: {carry.describe_same_edits(edits)}", NEEDS_LOOK, cause
        return "already upstream: pin-sync drops it", MECHANICAL, None
    if strict.status in (Status.MALFORMED, Status.UNSAFE_PATH):
        return f"not tried: {strict.status.value}", NEEDS_HAND, None
    carried = carry.carry_patch(tree, move, patch)
    merged = carried.outcome
    mended = "".join(f"; {note}" for note in carried.notes())
    if carried.needs_look:
        cause = _advise(patch, pins.explain_carried(patch, carried))
        git.run(["reset", "-q", "--hard", "HEAD"], tree)
        return f"{carry.SAME_EDIT}: {carry.describe_same_edits(carried.same_edits)}", NEEDS_LOOK, cause
    if merged.status == Status.ALREADY_APPLIED:
        return "already upstream (a 3-way merge changes nothing): pin-sync drops it" + mended, MECHANICAL, None
    if merged.status == Status.MERGED:
        partial = f"; partially upstream already: {', '.join(merged.upstream_parts)}" if merged.upstream_parts else ""
        return "merged 3-way without conflict" + partial + mended, MECHANICAL, None
    if merged.ok:  # the strict failure was transient; should not happen, but it applies
        return merged.status.value, MECHANICAL, None
    cause = _advise(patch, pins.explain_carried(patch, carried))  # (a conflict's lines are read from the index)
    # Leave the tree as it was before this patch, so the following patches are judged alone.
    git.run(["reset", "-q", "--hard", "HEAD"], tree)
    git.run(["clean", "-q", "-fd"], tree)
    if merged.status == Status.CONFLICT:
        return f"3-way conflict in {', '.join(merged.conflict_files)}" + mended, CONFLICT, cause
    return f"3-way failed: {merged.three_way or merged.describe().split(': ', 1)[-1]}" + mended, NEEDS_HAND, cause


def _advise(patch: PatchFile, cause: stopcause.StopCause) -> stopcause.StopCause:
    """CAUSE, with what to do where upstream may have its own version of PATCH."""
    if cause.upstream_version:
        cause.advice = (
            f"compare both sides, then drop {patch.name} (where pin-sync stops on it, its report gives the command)"
        )
    return cause


# ---------------------------------------------------------------- bisect


def _bisect_failures(
    mirror: Mirror, patches: list[PatchFile], result: CanarySeries, pin: str, tip: str, say: Progress
) -> None:
    failing = [i for i, p in enumerate(result.patches) if p.verdict != "ok"]
    if not failing:
        return
    line, note = _first_parent_line(mirror.path, pin, tip)
    with SeriesProbes(mirror.path, patches) as probes:
        for index in failing:
            entry = result.patches[index]
            if entry.blocked_by is not None:
                entry.bisect_note = f"blocked by {entry.blocked_by}: not bisected (a cascade, not an upstream break)"
                continue
            if line is None:
                entry.bisect_note = note
                continue
            say(f"bisecting {entry.patch} over {len(line)} commit(s)")
            if not probes.applies(pin, index):
                entry.bisect_note = "it does not apply at the pin either"
                continue
            first_bad = _first_failing(line, lambda commit, index=index: not probes.applies(commit, index))
            if first_bad is None:
                entry.bisect_note = (
                    "it applies at every commit on the line from pin to tip (it fails only on top of other changes)"
                )
                continue
            subject = git.run(["log", "-1", "--format=%s", first_bad], mirror.path).stdout.strip()
            entry.breaking_commit = {"sha": first_bad, "subject": subject}
            entry.bisect_note = f"first of {len(line)} upstream commit(s) since the pin at which it stops applying"


class SeriesProbes:
    """Whether patch I applies strictly at COMMIT on top of the earlier patches that do there.

    Every commit asked about keeps a private index with the series applied as far as asked
    so far, so each patch is applied at most once per commit, however many failing patches
    are bisected over the same commits."""

    def __init__(self, repo: Path, patches: list[PatchFile]):
        self.repo = repo
        self.patches = patches
        self._builders: dict[str, IndexBuilder] = {}
        self._results: dict[str, list[bool]] = {}

    def applies(self, commit: str, index: int) -> bool:
        builder = self._builders.get(commit)
        if builder is None:
            builder = self._builders[commit] = IndexBuilder(self.repo, commit)
            self._results[commit] = []
        results = self._results[commit]
        while len(results) <= index:
            results.append(builder.apply(self.patches[len(results)], commit=False).ok)
        return results[index]

    def close(self) -> None:
        for builder in self._builders.values():
            builder.close()
        self._builders.clear()

    def __enter__(self) -> SeriesProbes:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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
    from ..matrix import from_config

    section = from_config(config).canary
    if section is None or section.upstream != upstream or not section.toolchains:
        if names:
            raise UsageError(
                f"--toolchain {names[0]}: matrix.yaml declares no canary toolchains for upstream {upstream}"
            )
        return [Toolchain("declared", None)]
    known = [
        Toolchain(
            t.name,
            t.build_image,
            t.command,
            confined_path(config.root, config.root / t.dockerfile, "read") if t.dockerfile else None,
            t.image if t.dockerfile else None,
        )
        for t in section.toolchains
    ]
    unknown = [n for n in names if n not in {t.name for t in known}]
    if unknown:
        raise UsageError(
            f"unknown canary toolchain {unknown[0]!r} (matrix.yaml declares: {', '.join(t.name for t in known)})"
        )
    return [t for t in known if not names or t.name in names]


def _build_steps(series: Series, toolchain: Toolchain, *, record_commands: bool = False) -> list[BuildStep]:
    """What TOOLCHAIN runs: its own command, or the series' build steps, in its image
    (RECORD_COMMANDS: asking CMake for the compile commands a probe bisect reads)."""
    if toolchain.command:
        timeout = max((step.timeout for step in series.build), default=5400)
        steps = [BuildStep(f"{toolchain.name}-build", toolchain.command, timeout=timeout)]
    else:
        steps = list(series.build)
    if toolchain.image is not None:
        steps = [replace(step, runner="docker", image=toolchain.image) for step in steps]
    return probe_build.recording(steps) if record_commands else steps


def _run_steps(steps: list[BuildStep], tree: Path, logs: Path, say: Progress, record: CompileRecord) -> bool:
    record.steps = []
    for index, step in enumerate(steps):
        log = logs / f"{index + 1:02d}-{worktree.log_name(step.name)}.log"
        result = run_build(step, tree, log, say)
        record.steps.append(to_json(result))
        if not result.ok:
            record.detail = f"{step.name}: {result.reason}"
            record.log, record.log_tail = str(log), log_tail(log)
            return False
    return True


def _compile(
    store: Store,
    mirror: Mirror,
    series: Series,
    toolchain: Toolchain,
    head: str | None,
    workspace: Path,
    log_root: Path,
    say: Progress,
    *,
    record_commands: bool = False,
) -> tuple[CompileRecord, Path]:
    """Build the series (applied at the tip: HEAD) in a new clean tree, which the caller
    removes after bisecting in it (RECORD_COMMANDS: the build records its compile commands
    for a probe bisect)."""
    record = CompileRecord(toolchain.name, series.name, toolchain.image, "skipped")
    tree = workspace / "trees" / f"build-{toolchain.name}-{series.name}"
    store.remove_worktree(mirror, tree)
    if head is None:
        record.detail = "the series does not apply at the tip, even with 3-way"
        return record, tree
    steps = _build_steps(series, toolchain, record_commands=record_commands)
    if not steps:
        record.detail = "the series declares no build steps"
        return record, tree
    store.add_worktree(mirror, head, tree)  # a clean tree per toolchain: no build shares objects
    try:
        ok = _run_steps(steps, tree, log_root / toolchain.name / series.name, say, record)
    except BaseException:
        store.remove_worktree(mirror, tree)  # Ctrl-C or SIGTERM mid-build: the tree goes, and its mirror entry
        raise
    record.state = "passed" if ok else "failed"
    return record, tree


def _bisect_compile(
    mirror: Mirror,
    series: Series,
    toolchain: Toolchain,
    record: CompileRecord,
    tree: Path,
    pin: str,
    tip: str,
    log_root: Path,
    say: Progress,
    method: str = compile_bisect.PROBE,
) -> None:
    """Name the first commit of the pin..tip line at which the series, applied there,
    stops building (`patchctl.loop.compile_bisect`). The tree keeps its build directory:
    every probe checks out the probe's commit over it (untracked files stay) and either
    compiles the units that failed at the tip (`probe_build`) or rebuilds incrementally.
    A commit the series does not apply at cannot be judged and is skipped, like `git bisect skip`."""
    line, note = _first_parent_line(mirror.path, pin, tip)
    if line is None:
        record.bisect_note = note
        return
    patches = read_series(series)
    steps = _build_steps(series, toolchain, record_commands=method == compile_bisect.PROBE)
    probe_logs = log_root / toolchain.name / series.name / "bisect"
    heads: dict[str, str | None] = {}

    def check_out(commit: str) -> str | None:
        """The series applied at COMMIT, checked out in the tree; None when it does not apply."""
        if commit not in heads:
            with IndexBuilder(mirror.path, commit) as builder:
                heads[commit] = builder.head if all(builder.apply(patch).ok for patch in patches) else None
        if heads[commit] is not None:
            git.run(["-c", "advice.detachedHead=false", "checkout", "-q", "-f", "--detach", heads[commit]], tree)
        return heads[commit]

    def full_build(commit: str) -> bool | None:
        if check_out(commit) is None:
            return None
        say(f"bisect {toolchain.name}: building {series.name} at {commit[:12]}")
        probe = CompileRecord(toolchain.name, series.name, toolchain.image, "probe")
        return not _run_steps(steps, tree, probe_logs / commit[:12], say, probe)

    plan: probe_build.ProbePlan | None = None
    no_probe = ""
    if method == compile_bisect.PROBE:
        try:
            plan = probe_build.plan(tree, Path(record.log), steps[len(record.steps) - 1])
        except probe_build.Unprobeable as exc:
            no_probe = f"no probe compiles: {exc}"

    def probe(commit: str) -> bool | str | None:
        assert plan is not None
        head = check_out(commit)
        if head is None:
            return None
        say(f"bisect {toolchain.name}: probing {series.name} at {commit[:12]}")
        failed = plan.probe(head, probe_logs / f"{commit[:12]}-probe", say)
        return compile_bisect.IN_FULL if failed is None else failed

    say(f"bisecting the {toolchain.name} build of {series.name} over {len(line)} commit(s)")
    found = compile_bisect.search(
        line,
        pin,
        tip,
        full_build,
        probe if plan is not None else None,
        no_probe=no_probe,
        units=plan.sources() if plan is not None else None,
    )
    if plan is not None:
        found.probes, found.derived_again, found.compiler_cache = plan.probes, plan.derivations, plan.compiler_cache()
    record.bisect = found.record()
    if found.first_bad is None:
        record.bisect_note = found.note
        return
    subject = git.run(["log", "-1", "--format=%s", found.first_bad], mirror.path).stdout.strip()
    record.breaking_commit = {"sha": found.first_bad, "subject": subject}
    record.bisect_note = f"first of {len(line)} upstream commit(s) since the pin at which the build fails, {found.note}"


# ---------------------------------------------------------------- helpers


def _pick_upstream(config: Config, name: str | None) -> str:
    if name is not None:
        config.get_upstream(name)
        return name
    from ..matrix import from_config

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
