"""`patchctl status`: the health report of the named series, each tried at the upstream tip with
the canary's own trial (`canary.trial_at`, so that the two never disagree); the rows and the
text form are `patchctl.loop.health`'s, the project's history `patchctl.loop.series_history`'s
(one pass over each series directory), what became of Submitted pull requests
`patchctl.loop.submitted`'s (only when asked)."""

from __future__ import annotations

from .. import git
from ..confined import scratch as scratch_dirs
from ..errors import UsageError
from ..output.jsonout import to_json
from ..project.config import Config
from ..series.patchset import read_series
from ..upstream.store import Store
from . import stopcause
from . import submitted as submitted_mod
from .canary import trial_at
from .health import (
    MALFORMED,
    RECENT_SYNCS,
    HealthReport,
    PatchHealth,
    Progress,
    SeriesHealth,
    accepted_flag,
    drifts,
    status_of,
)
from .series_history import ProjectHistory


def status(
    config: Config,
    store: Store,
    series_names: tuple[str, ...] = (),
    *,
    rev: str | None = None,
    trial: bool = True,
    check_submitted: bool = False,
    progress: Progress | None = None,
) -> HealthReport:
    """The health of the named series (every series when none), at their pins and at REV (or
    each upstream's branch tip). TRIAL: apply each series at the tip for its verdicts.
    CHECK_SUBMITTED: ask gh what became of each Submitted patch's pull request."""
    say = progress or (lambda _line: None)
    selected = config.select_series(series_names)
    if not selected:
        raise UsageError(f"{config.path.name} defines no series: status would report nothing")
    read = {series.name: read_series(series) for series in selected}  # fail closed, before fetching
    history = ProjectHistory(config.root)
    pulls: dict[str, submitted_mod.PullRequest] = {}
    if check_submitted:
        say("asking GitHub about the Submitted patches' pull requests")
        urls = [status_of(patch) for patches in read.values() for patch in patches]
        pulls = submitted_mod.check([url for value, _, url in urls if value == "Submitted" and url])

    def commit_url(upstream: str) -> str | None:
        return stopcause.commit_url_base(stopcause.upstream_urls(config, upstream))

    report = HealthReport()
    tips: dict[str, str] = {}
    for series in selected:
        up = config.get_upstream(series.upstream)
        mirror = store.mirror(up.url, base=config.root)
        pin = store.resolve_pin(mirror, config, up.name)
        if up.name not in tips:
            tips[up.name] = (
                store.resolve_requested(mirror, config, up.name, rev) if rev else store.branch_tip(mirror, up.branch)
            )
        tip = tips[up.name]
        patches = read[series.name]
        counted = git.run(["rev-list", "--count", f"{pin}..{tip}"], mirror.path, check=False)
        result = SeriesHealth(
            series.name,
            up.name,
            pin,
            tip,
            rev or f"tip of {up.branch}",
            int(counted.stdout.strip()) if counted.ok else None,
        )
        # A --rev older than the pin counts no commit "since" it: say so rather than report no drift.
        behind = git.run(["rev-list", "--count", f"{tip}..{pin}"], mirror.path, check=False)
        result.commits_pin_is_ahead = int(behind.stdout.strip()) if behind.ok else None
        outcomes: dict[str, dict] = {}
        if trial and patches:
            say(f"trying {series.name} at {tip[:12]}")
            with scratch_dirs.directory("patchctl-status-") as scratch:
                tried = trial_at(store, mirror, series, patches, pin, tip, scratch, commit_url=commit_url(up.name))
            outcomes = {
                p.patch: {
                    "verdict": p.verdict,
                    "trial": p.trial or "",
                    "taken_upstream": p.taken_upstream,
                    "upstream_holds": p.upstream_holds,
                    "blocked_by": p.blocked_by,
                    "stop_cause": p.stop_cause,
                }
                for p in tried.patches
            }
        say(f"reading the history of {series.name}")
        past = history.series(series.dir, series.name, up.name)
        result.dropped, result.moved_from = past.dropped, past.moved_from
        result.size_history, result.departures = past.sizes, [to_json(d) for d in past.departures]
        counts = drifts(mirror.path, pin, tip, [patch.touched_paths() for patch in patches])
        for patch, count in zip(patches, counts):
            value, detail, url = status_of(patch)
            outcome = outcomes.get(patch.name, {})
            relative = history.relative(patch.path)
            lineage = past.lineages.get(relative) if relative is not None else None
            added = lineage.added if lineage else None
            entry = PatchHealth(
                patch.name,
                patch.title,
                value,
                detail,
                url,
                added,
                history.age_days(added),
                patch.touched_paths(),
                count,
                outcome.get("verdict"),
                outcome.get("trial", ""),
                outcome.get("taken_upstream"),
                syncs=list(reversed(lineage.fates))[:RECENT_SYNCS] if lineage else [],
                pin_syncs=len(lineage.fates) if lineage else 0,
                pin_syncs_stopped=lineage.stops if lineage else 0,
                blocked_by=outcome.get("blocked_by"),
                stop_cause=outcome.get("stop_cause"),
            )
            if value == MALFORMED:
                entry.flags.append(f"malformed Upstream-Status: {detail}")
            if trial and (flag := accepted_flag(value, bool(outcome.get("upstream_holds")))):
                entry.flags.append(flag)
            stops = [fate.fate for fate in entry.syncs if fate.fate in ("conflict", "needed a hand", "needed a look")]
            if len(stops) > 1:
                kinds = ", ".join(sorted(set(stops)))
                entry.flags.append(f"stopped {len(stops)} of the last {len(entry.syncs)} pin-syncs ({kinds})")
            if value == "Submitted" and url in pulls:
                pull = pulls[url]
                entry.submitted = to_json(pull)
                if pull.flag:
                    entry.flags.append(pull.flag)
            result.patches.append(entry)
            result.statuses[value] = result.statuses.get(value, 0) + 1
            if entry.verdict is not None:
                result.verdicts[entry.verdict] = result.verdicts.get(entry.verdict, 0) + 1
        report.series.append(result)
    return report
