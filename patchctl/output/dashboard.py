"""The dashboard issue's body, rendered from the dashboard's JSON form (`patchctl.loop.dashboard`),
so that `dashboard --json` and the issue never disagree.

Everything that came from the series, the upstream or GitHub (series, upstream and patch names,
pull request and issue titles, branch names, the trial's words, flags, URLs) is escaped for where
it stands (`patchctl.output.escape`); numbers are written as numbers. The body stays under GitHub's
limit for an issue body (65,536 characters): the fold with every patch, then the table of patches
to look at, keeps as many rows as fit and says how many it left out.
"""

from __future__ import annotations

from collections.abc import Callable

from .escape import html_text, linkable_url, md_cell, md_code, md_link, md_prose, md_text
from .report import stop_commit_markdown

MAX_BODY = 60000
TRIAL_SHOWN = 300  # characters of a trial's words in a table cell
STOPS = ("conflict", "needs a hand", "needs a look")  # docs/reference/index.md#stops
VERDICT_ORDER = (*STOPS, "blocked", "mechanical", "ok")
CAUSE_DROP = "upstream may have its own version: compare, then `patchctl pin-sync --continue --drop`"
PULL_MERGEABLE = {
    "MERGEABLE": "mergeable",
    "CONFLICTING": "conflicts with its base",
    "UNKNOWN": "mergeable: not known yet",
}
PULL_REVIEW = {"APPROVED": "approved", "CHANGES_REQUESTED": "changes requested", "REVIEW_REQUIRED": "review required"}
ISSUE_KINDS = {"canary": "canary", "pin-sync": "pin-sync stop"}


def dashboard_markdown(payload: dict, limit: int = MAX_BODY) -> str:
    """The body for PAYLOAD (`Dashboard` as JSON), at most LIMIT characters."""
    look = sorted(
        (p for p in payload["patches"] if p.get("reasons")), key=lambda p: (-p["priority"], -(p["drift"] or 0))
    )
    every = payload["patches"]
    shown_all = _most_that_fit(lambda n: _body(payload, look, len(look), every, n), len(every), limit)
    if shown_all is None:  # even with no row in the fold, the patches to look at are too many
        shown_look = _most_that_fit(lambda n: _body(payload, look, n, every, 0), len(look), limit) or 0
        return _body(payload, look, shown_look, every, 0)
    return _body(payload, look, len(look), every, shown_all)


def _most_that_fit(render: Callable[[int], str], rows: int, limit: int) -> int | None:
    """The most rows (0..ROWS) whose RENDER fits in LIMIT; None when not even 0 does."""
    if len(render(rows)) <= limit:
        return rows
    if len(render(0)) > limit:
        return None
    low, high = 0, rows  # render(low) fits, render(high) does not
    while high - low > 1:
        middle = (low + high) // 2
        if len(render(middle)) <= limit:
            low = middle
        else:
            high = middle
    return low


def _body(payload: dict, look: list[dict], look_rows: int, every: list[dict], all_rows: int) -> str:
    out = [_headline(payload), ""]
    out += ["### Series", "", *_series_table(payload["series"])]
    out += ["", "### Pin-sync pull requests", "", *_pulls(payload)]
    out += ["", "### Issues patchctl's workflows opened", "", *_issues(payload)]
    several = len(payload["series"]) > 1  # a series column only where it tells rows apart
    out += ["", "### Patches to look at", "", *_look_list(look, look_rows, several)]
    if every:
        out += ["", *_all_patches(every, all_rows, several)]
    out += ["", _footer(payload)]
    return "\n".join(out) + "\n"


def _headline(payload: dict) -> str:
    series = payload["series"]
    stop = [s for s in series if any(s["verdicts"].get(word) for word in (*STOPS, "blocked"))]
    strict = [s for s in series if s["verdicts"].get("mechanical")]
    untried = [s for s in series if not s["verdicts"] and s["patches"]]
    if stop:
        words = f"❌ **{len(stop)} of {len(series)} series {_verb(stop, 'stops', 'stop')} at the upstream tip**"
    elif strict:
        words = (
            f"⚠️ **{len(strict)} of {len(series)} series {_verb(strict, 'fails', 'fail')} strictly at the upstream tip; "
            f"a pin-sync would carry {_verb(strict, 'it', 'them')} (mechanical)**"
        )
    elif untried:
        words = f"**{len(untried)} of {len(series)} series not tried at the upstream tip**"
    else:
        words = "✅ **Every series applies strictly at the upstream tip**"
    if payload["github"]:
        pulls, issues = len(payload["pulls"]), len(payload["issues"])
        words += f" · {pulls} pin-sync pull request{'s' if pulls != 1 else ''} open"
        words += f" · {issues} issue{'s' if issues != 1 else ''} open"
    return words


def _verb(items: list, one: str, many: str) -> str:
    return one if len(items) == 1 else many


def _counts(counts: dict[str, int], order: tuple[str, ...] = ()) -> str:
    names = [n for n in order if counts.get(n)] + sorted(n for n in counts if n not in order and counts[n])
    return ", ".join(f"{counts[name]} {name}" for name in names)


def _series_table(series: list[dict]) -> list[str]:
    out = [
        "| series | upstream | pin | tip | commits since the pin | at the tip | upstream status | left the series |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for entry in series:
        tip = f"{md_code(entry['tip'][:12], table=True)} ({md_cell(entry['rev_spec'])})"
        since = "–" if entry["commits_since_pin"] is None else str(entry["commits_since_pin"])
        verdicts = _counts(entry["verdicts"], VERDICT_ORDER) or ("not tried" if entry["patches"] else "no patches")
        left = f"{entry['left']} ({entry['went_upstream']} upstream)" if entry["left"] else "–"
        out.append(
            f"| {md_cell(entry['name'])} | {md_cell(entry['upstream'])} | {md_code(entry['pin'][:12], table=True)} | "
            f"{tip} | {since} | {md_cell(verdicts)} | {md_cell(_counts(entry['statuses']))} | {left} |"
        )
    return out


def _pulls(payload: dict) -> list[str]:
    if not payload["github"]:
        return [_not_asked()]
    if not payload["pulls"]:
        return ["None open."]
    out = []
    for pull in payload["pulls"]:
        state = ["draft"] if pull["draft"] else []
        state += [PULL_MERGEABLE[pull["mergeable"]]] if pull["mergeable"] in PULL_MERGEABLE else []
        state += [PULL_REVIEW[pull["review"]]] if pull["review"] in PULL_REVIEW else []
        if pull["checks"] is None:
            state.append("checks: not readable with this token (statuses: read, checks: read)")
        else:
            checks = _counts(pull["checks"], ("failing", "pending", "passed"))
            state.append(f"checks: {checks}" if checks else "no checks reported")
        out.append(f"- #{pull['number']} {md_text(pull['title'])} ({md_code(pull['branch'])}): {', '.join(state)}")
    return out


def _issues(payload: dict) -> list[str]:
    if not payload["github"]:
        return [_not_asked()]
    if not payload["issues"]:
        return ["None open."]
    return [
        f"- #{issue['number']} ({ISSUE_KINDS.get(issue['kind'], md_text(issue['kind']))}) {md_text(issue['title'])}"
        for issue in payload["issues"]
    ]


def _not_asked() -> str:
    return "Not asked (GitHub is asked with `patchctl dashboard --github`, and by `--update`)."


def _series_cell(patch: dict, several: bool) -> str:
    return f"{md_cell(patch['series'])} | " if several else ""


def _look_list(look: list[dict], rows: int, several: bool) -> list[str]:
    """The patches to look at as a list (its items are sentences: a table of them runs off the
    issue's column), most urgent first."""
    if not look:
        return ["Nothing to look at: no patch stops at the tip, none is flagged, and no drift stands out."]
    out = []
    for patch in look[:rows]:
        name = (f"{md_code(patch['series'])} / " if several else "") + md_code(patch["patch"])
        facts = [
            f"drift {_number(patch['drift'])}",
            f"age {_age(patch['age_days'])}",
            f"upstream status {_status(patch, table=False)}",
        ]
        if patch.get("issue"):
            facts.append(f"canary issue #{patch['issue']}")
        out.append(f"- {name}: {_why(patch)} ({', '.join(facts)})")
    if rows < len(look):
        out += ["", f"… and {len(look) - rows} more (`patchctl dashboard --json` lists every one)"]
    out += [
        "",
        "Drift: upstream commits between the pin and the tip that touched the patch's files. "
        "Age: days since the patch entered the series.",
    ]
    return out


def _why(patch: dict) -> str:
    """Why PATCH is worth a look: its reasons, with the words that explain them."""
    said = []
    for reason in patch["reasons"]:
        if reason in STOPS:
            trial = patch.get("trial") or ""
            if len(trial) > TRIAL_SHOWN:
                trial = trial[:TRIAL_SHOWN] + " …"
            said.append(f"**{reason}** at the tip" + (f": {md_prose(trial)}" if trial else ""))
            said += _cause(patch)
        elif reason == "blocked":
            said.append(f"**blocked** at the tip by {md_code(patch.get('blocked_by') or '?')}")
        elif reason == "mechanical":
            said.append("fails strictly at the tip, merges 3-way (a pin-sync carries it)")
        elif reason == "taken upstream":
            said.append(f"taken upstream in {md_code(patch['taken_upstream'][:12])}: pin-sync drops it")
        elif reason == "flagged":
            said += [md_prose(flag) for flag in patch["flags"]]
        elif reason == "drift" and len(patch["reasons"]) == 1:  # else its drift, said after, is enough
            said.append(f"drift {_number(patch['drift'])}: among the highest of its series")
        elif reason == "long carried":
            said.append(f"carried {_age(patch['age_days'])} and never sent upstream")
    return "; ".join(said) or "–"


def _cause(patch: dict) -> list[str]:
    """What status found behind PATCH's stop: the upstream commits that changed its lines, and
    whether upstream may hold its own version of it."""
    commits = [stop_commit_markdown(commit) for commit in patch.get("cause") or []]
    if patch.get("more_causes"):
        commits.append(f"{patch['more_causes']} more")
    said = [f"upstream changed its lines in {', '.join(commits)}"] if commits else []
    return [*said, CAUSE_DROP] if patch.get("upstream_version") else said


def _all_patches(every: list[dict], rows: int, several: bool) -> list[str]:
    table = [
        "| series " * several + "| patch | upstream status | age | drift | at the tip |",
        "|---" * several + "|---|---|---|---|---|",
    ]
    for patch in every[:rows]:
        verdict = patch["verdict"] or "not tried"
        if patch.get("blocked_by"):
            verdict += f" by {patch['blocked_by']}"
        table.append(
            f"| {_series_cell(patch, several)}{md_cell(patch['patch'])} | {_status(patch)} | "
            f"{_age(patch['age_days'])} | {_number(patch['drift'])} | {md_cell(verdict)} |"
        )
    if rows < len(every):
        table += ["", f"… and {len(every) - rows} more (`patchctl status` lists every patch)"]
    summary = f"Every patch ({len(every)})"
    return [f"<details><summary>{html_text(summary)}</summary>", "", *table, "", "</details>"]


def _status(patch: dict, *, table: bool = True) -> str:
    """PATCH's upstream status, its URL linked, and what became of its pull request (in a table cell or not)."""
    text = md_cell(patch["upstream_status"]) if table else md_prose(patch["upstream_status"])
    if patch.get("upstream_url"):
        text += " " + md_link(patch["upstream_url"], table=table)
    if patch.get("submitted"):
        text += f" (pull request {md_prose(patch['submitted'], table=table)})"
    return text


def _number(value: int | None) -> str:
    return "–" if value is None else str(value)


def _age(days: int | None) -> str:
    return "–" if days is None else f"{days} day{'s' if days != 1 else ''}"


def _footer(payload: dict) -> str:
    run = payload.get("run")
    last = ""
    if run and linkable_url(run["url"]):
        last = f" Last updated by the {md_code(run['workflow'])} workflow: {md_link(run['url'])}."
    return (
        "Kept up to date by patchctl's scheduled workflows (`patchctl dashboard --update`)." + last + " "
        "This issue is found by its label `patchctl-dashboard` and its author, never by its title; "
        "edits by hand are overwritten. Closed, it stays closed and is still updated; "
        "take the label off to have a new one opened."
    )
