"""Submitted patches, watched: what became of the pull request a patch was sent upstream as.

A patch whose `Upstream-Status: Submitted [URL]` names a GitHub pull request
(`https://github.com/OWNER/NAME/pull/N`) is asked about with `gh pr view N --repo OWNER/NAME`
(the GitHub CLI, with the token it finds: `GH_TOKEN` in a workflow). Only when asked: the
scheduled canary does (`canary --check-submitted` in its workflow), `status` does with
`--check-submitted`; nothing reaches the network otherwise.

* merged: "expect taken upstream at the next bump" (pin-sync drops a patch upstream holds);
* closed without merging: "rejected upstream: update the status" (Denied, or Pending with a new
  pull request);
* open: nothing to say.

A pull request gh cannot tell about (not found, no token, rate limit) gets "not checked" with
gh's own first line; the report goes on. Without gh at all, asking is an environment failure.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess

from ..errors import EnvironmentFailure
from ..git import first_line
from ..records import dataclass
from ..series.patchset import PatchFile

MERGED_NOTE = "expect taken upstream at the next bump: its pull request was merged"
CLOSED_NOTE = "rejected upstream: update the status (its pull request was closed without merging)"
GH_TIMEOUT_S = 60
# A GitHub pull request's address, nothing after its number but a path, query or fragment of it.
_PULL_URL_RE = re.compile(
    r"https://github\.com/(?P<repo>[A-Za-z0-9][A-Za-z0-9-]{0,38}/[A-Za-z0-9._-]{1,100})/pull/(?P<number>[1-9]\d{0,9})"
    r"(?:[/?#][^\s]*)?"
)


@dataclass
class PullRequest:
    """What became of one patch's pull request (its JSON form goes in the patch's `submitted`)."""

    url: str
    state: str  # open | merged | closed | not checked
    note: str = ""  # MERGED_NOTE, CLOSED_NOTE, or why it was not checked

    @property
    def flag(self) -> str | None:
        """The line that goes among the patch's flags, when there is something to do."""
        return self.note if self.state in ("merged", "closed") else None


def notes(patches: list[PatchFile]) -> dict[str, str]:
    """Patch name -> the note on what became of its pull request, for each Submitted patch of
    PATCHES whose pull request merged, closed, or could not be checked (the canary's health rows)."""
    sent = {patch.name: patch.upstream_status.url for patch in patches if _submitted(patch)}
    pulls = check([url for url in sent.values() if url])
    found = {}
    for name, url in sent.items():
        pull = pulls.get(url or "")
        if pull is not None and pull.state != "open":
            found[name] = pull.flag or f"pull request not checked: {pull.note}"
    return found


def _submitted(patch: PatchFile) -> bool:
    status = patch.upstream_status
    return status is not None and status.ok and status.value == "Submitted"


def pull_request(url: str | None) -> tuple[str, int] | None:
    """(OWNER/NAME, number) of the GitHub pull request URL names; None when it names none."""
    match = _PULL_URL_RE.fullmatch(url or "")
    return (match["repo"], int(match["number"])) if match else None


def check(urls: list[str]) -> dict[str, PullRequest]:
    """URL -> what became of it, for each of URLS that names a GitHub pull request (each asked once)."""
    wanted = {url: found for url in urls if (found := pull_request(url))}
    if not wanted:
        return {}
    gh = shutil.which("gh")
    if gh is None:
        raise EnvironmentFailure(
            "checking Submitted patches asks the GitHub CLI, which is not installed: "
            "install gh (https://cli.github.com) or leave --check-submitted out"
        )
    asked: dict[tuple[str, int], PullRequest] = {}
    for url, (repo, number) in sorted(wanted.items()):
        if (repo, number) not in asked:
            asked[(repo, number)] = _ask(gh, url, repo, number)
    return {url: asked[found] for url, found in wanted.items()}


def _ask(gh: str, url: str, repo: str, number: int) -> PullRequest:
    try:
        done = subprocess.run(
            [gh, "pr", "view", str(number), "--repo", repo, "--json", "state,mergedAt,url"],
            capture_output=True,
            text=True,
            timeout=GH_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return PullRequest(url, "not checked", f"gh did not answer in {GH_TIMEOUT_S} s")
    except OSError as exc:
        return PullRequest(url, "not checked", f"gh could not run: {exc.strerror or exc}")
    if done.returncode != 0:
        return PullRequest(url, "not checked", f"gh: {first_line(done.stderr) or f'exit {done.returncode}'}")
    try:
        answer = json.loads(done.stdout)
        state = str(answer["state"]).lower()
    except (ValueError, KeyError, TypeError):
        return PullRequest(url, "not checked", "gh's answer was not the JSON asked for")
    if state == "merged" or (state == "closed" and answer.get("mergedAt")):
        return PullRequest(url, "merged", MERGED_NOTE)
    if state == "closed":
        return PullRequest(url, "closed", CLOSED_NOTE)
    if state == "open":
        return PullRequest(url, "open")
    return PullRequest(url, "not checked", f"gh said the pull request is {state!r}")
