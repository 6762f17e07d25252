"""Real patch series of public downstreams, kept in `fixtures/status_corpus/` (README.md there
names each repository, commit and directory), and built again as a project for `patchctl status`.

Each fixture keeps, of one series at one commit: its patches in their order (name, subject,
`Upstream-Status:` line), when each entered the series, and the patches that left it (when they
came and went, their last upstream status), as `patchctl status` read them from the real
history. Nothing of their code: `build` writes each patch again as a one-line edit of a file of
its own (`src/pNNN.c`) on a generated upstream, with its real name, subject and header, and
replays the series' history (every arrival and departure at its real date) as the project's
commits. The upstream's tip is made to give every verdict: a patch whose line upstream edited
is a conflict, one whose context it edited is mechanical, one that also edits the file of a
patch that is a conflict is blocked by it, the others are ok.

    python -m tests.patchctl.status_corpus MIRROR...   # refresh from mirrors (a `fetch` of each)
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

CORPUS_DIR = Path(__file__).resolve().parent / "fixtures" / "status_corpus"
# owner/name -> (series directory, commit or None for the mirror's HEAD, list file giving the order)
CORPUS: dict[str, tuple[str, str | None, str | None]] = {
    "mudler/LocalAI": ("backend/cpp/llama-cpp/patches", None, None),
    # llama/patches is empty at Ollama's HEAD (the patches moved): the series at its largest.
    "ollama/ollama": ("llama/patches", "485da9fd358eb17ba0a659a554f44be6c72efd2e", None),
    "electron/electron": ("patches/chromium", None, ".patches"),
}
LINES = 20  # of each patch's file at the pin
EDITED = 10  # the line each patch edits
IDENTITY = "Fixture <fixture@example.com>"


@dataclass
class Built:
    project: Path
    upstream: Path
    names: list[str]  # the series, in order
    verdicts: dict[str, str]  # what the tip was made to give each patch


def load(repository: str) -> dict:
    return json.loads((CORPUS_DIR / f"{repository.replace('/', '+')}.json").read_text())


def _blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _file(index: int) -> str:
    return f"src/p{index:03}.c"


def _lines(index: int) -> list[str]:
    return [f"p{index:03} line {n}\n" for n in range(1, LINES + 1)]


def _hunk(path: str, before: list[str], after: list[str], line: int) -> str:
    """A one-line edit of PATH at LINE (1-based), three lines of context each side, git's form."""
    start, end = max(line - 3, 1), min(line + 3, len(before))
    old = "".join(before).encode()
    new = "".join(after).encode()
    body = [f" {before[n - 1]}" for n in range(start, line)]
    body += [f"-{before[line - 1]}", f"+{after[line - 1]}"]
    body += [f" {before[n - 1]}" for n in range(line + 1, end + 1)]
    count = end - start + 1
    return (
        f"diff --git a/{path} b/{path}\nindex {_blob_id(old)}..{_blob_id(new)} 100644\n--- a/{path}\n+++ b/{path}\n"
        f"@@ -{start},{count} +{start},{count} @@\n" + "".join(body)
    )


def _patch_text(subject: str, status: str | None, date: str, hunks: list[str]) -> str:
    when = datetime.fromisoformat(date).strftime("%a, %d %b %Y %H:%M:%S %z")
    header = f"{status}\n\n" if status else ""
    return (
        "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
        f"From: {IDENTITY}\nDate: {when}\nSubject: [PATCH] {subject}\n\n"
        f"{header}Rebuilt from a real series (tests/patchctl/status_corpus.py).\n---\n"
        + "".join(hunks)
        + "-- \n2.43.0\n"
    )


def _status_line(value: str | None) -> str | None:
    """An `Upstream-Status:` line of VALUE (a departed patch's last), its detail made up where one is needed."""
    if value in (None, "none", "malformed"):
        return None
    return (
        f"Upstream-Status: {value} [rebuilt]"
        if value in ("Submitted", "Backport", "Inappropriate")
        else f"Upstream-Status: {value}"
    )


def _roles(count: int) -> list[str]:
    """What the tip does to each of COUNT patches (see the module's docstring)."""
    roles = []
    for index in range(count):
        if index % 7 == 3:
            roles.append("conflict")
        elif index % 7 == 4 and index > 0 and roles[index - 1] == "conflict":
            roles.append("blocked")
        elif index % 5 == 1:
            roles.append("mechanical")
        else:
            roles.append("ok")
    return roles


def _fast_import(repo: Path, commits: list[tuple[str, int, dict[str, str | None]]]) -> None:
    """COMMITS (message, unix time, path -> text or None to delete) on main, in order."""
    parts = []
    for mark, (message, when, files) in enumerate(commits, 1):
        data = message.encode()
        parts.append(f"commit refs/heads/main\nmark :{mark}\ncommitter {IDENTITY} {when} +0000\n".encode())
        parts.append(f"data {len(data)}\n".encode() + data + b"\n")
        if mark > 1:
            parts.append(f"from :{mark - 1}\n".encode())
        for path, text in files.items():
            if text is None:
                parts.append(f'D "{path}"\n'.encode())
            else:
                blob = text.encode()
                parts.append(f'M 100644 inline "{path}"\ndata {len(blob)}\n'.encode() + blob + b"\n")
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", "init", "-q", "--initial-branch=main", str(repo)], check=True, capture_output=True, env=env)
    subprocess.run(
        ["git", "-C", str(repo), "fast-import", "--quiet"], input=b"".join(parts) + b"done\n", check=True, env=env
    )
    subprocess.run(["git", "-C", str(repo), "checkout", "-q", "-f", "main"], check=True, capture_output=True, env=env)


def build(fixture: dict, root: Path, *, limit: int | None = None) -> Built:
    """The project and upstream for FIXTURE under ROOT (its first LIMIT patches only, when given)."""
    patches = fixture["patches"][:limit]
    count = len(patches)
    roles = _roles(count)
    names = [p["name"] for p in patches]
    base = {index: _lines(index) for index in range(count)}
    # The upstream: the pin, then a commit per patch upstream disturbs (and some that touch only far lines).
    upstream_commits: list[tuple[str, int, dict[str, str | None]]] = [
        ("the pin", 1_600_000_000, {_file(i): "".join(base[i]) for i in range(count)})
    ]
    for index, role in enumerate(roles):
        lines = list(base[index])
        if role == "conflict":
            lines[EDITED - 1] = f"p{index:03} line {EDITED}, upstream's way\n"
        elif role == "mechanical":
            lines[EDITED - 4] = f"p{index:03} line {EDITED - 3}, reworded upstream\n"
        else:
            lines.append(f"p{index:03} appended upstream\n")  # drift, far from the patch
        for repeat in range(1 + index % 4):
            upstream_commits.append(
                (
                    f"upstream touches {_file(index)} ({repeat})",
                    1_600_100_000 + index * 10 + repeat,
                    {_file(index): "".join(lines) + "\n" * repeat},
                )
            )
    upstream = root / "upstream"
    _fast_import(upstream, upstream_commits)
    pin = subprocess.run(
        ["git", "-C", str(upstream), "rev-list", "--max-parents=0", "main"], capture_output=True, text=True, check=True
    ).stdout.strip()
    # Each patch's text: a one-line edit of its own file; a blocked one also edits the file of the patch before it.
    texts = {}
    for index, patch in enumerate(patches):
        after = list(base[index])
        after[EDITED - 1] = f"p{index:03} line {EDITED}, patched\n"
        hunks = [_hunk(_file(index), base[index], after, EDITED)]
        if roles[index] == "blocked":
            before = list(base[index - 1])
            before[EDITED - 1] = f"p{index - 1:03} line {EDITED}, patched\n"
            later = list(before)  # two lines below the line the patch before it edits: that line is its context
            later[EDITED + 1] = f"p{index - 1:03} line {EDITED + 2}, patched by {patch['name']}\n"
            hunks.append(_hunk(_file(index - 1), before, later, EDITED + 2))
        texts[patch["name"]] = _patch_text(patch["subject"], patch.get("status"), patch["added"], hunks)
    # The project: its history replayed, then the series as it stands.
    directory = fixture["dir"]
    events: list[tuple[str, str, str | None]] = []  # (date, path, text or None)
    for gone in fixture["departed"]:
        text = _patch_text(gone["name"], _status_line(gone["status"]), gone["added"], [])
        events += [
            (gone["added"], f"{directory}/{gone['name']}", text),
            (gone["left"], f"{directory}/{gone['name']}", None),
        ]
    events += [(p["added"], f"{directory}/{p['name']}", texts[p["name"]]) for p in patches]
    # A list file gives the order: here a quilt `series` file (patchctl's own reading of such a list).
    naming = ", naming: quilt" if fixture.get("list_file") else ""
    config = (
        f"version: 1\nupstreams:\n  upstream: {{url: '{upstream}', branch: main, pin: {pin}}}\n"
        f"series:\n  {fixture['series']}: {{upstream: upstream, dir: {directory}{naming}}}\n"
    )
    first = min((e[0] for e in events), default="2020-01-01T00:00:00+00:00")
    commits: list[tuple[str, int, dict[str, str | None]]] = [
        ("Add matrix.yaml", int(datetime.fromisoformat(first).timestamp()) - 60, {"matrix.yaml": config})
    ]
    for date, path, text in sorted(events, key=lambda e: (e[0], e[2] is not None)):
        when = int(datetime.fromisoformat(date).timestamp())
        if commits and commits[-1][1] == when:
            commits[-1][2][path] = text
        else:
            commits.append((f"{'Carry' if text else 'Drop'} {path.rsplit('/', 1)[-1]}", when, {path: text}))
    if fixture.get("list_file"):
        listing = "".join(f"{name}\n" for name in names)
        commits.append(("The series' list", commits[-1][1] + 60, {f"{directory}/series": listing}))
    project = root / "project"
    _fast_import(project, commits)
    return Built(project, upstream, names, dict(zip(names, roles)))


# ---------------------------------------------------------------- refreshing from a mirror


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def refresh(mirror: Path) -> None:
    from patchctl.loop.series_history import ProjectHistory, is_patch_name
    from patchctl.series.patchset import parse_message, parse_upstream_status

    repository = mirror.parent.name.replace("+", "/") if mirror.name == "repo" else mirror.name.replace("+", "/")
    directory, commit, list_file = CORPUS[repository]
    commit = _git(mirror, "rev-parse", commit or "HEAD").strip()
    with tempfile.TemporaryDirectory() as scratch:
        clone = Path(scratch) / "clone"
        _git(Path(scratch), "clone", "-q", "--shared", "--no-checkout", str(mirror), str(clone))
        _git(clone, "sparse-checkout", "set", directory)
        # A mirror may lack a large blob outside the series (the `fetch` tool's do): checkout says so and goes on.
        subprocess.run(["git", "-C", str(clone), "checkout", "-q", commit], capture_output=True)
        history = ProjectHistory(clone)
        past = history.series(clone / directory, "series", "upstream")
        listed = [n for n in os.listdir(clone / directory) if is_patch_name(n)]
        if list_file:
            order = [line.strip() for line in (clone / directory / list_file).read_text().splitlines() if line.strip()]
            listed = [n for n in order if n in listed]
        else:
            listed.sort()
        patches = []
        for name in listed:
            text = (clone / directory / name).read_text(errors="replace")
            status = parse_upstream_status(text)
            lineage = past.lineages.get(f"{directory}/{name}")
            patches.append(
                {
                    "name": name,
                    "subject": parse_message(text).subject or name,
                    "status": status.text.rstrip("\r") if status else None,
                    "added": lineage.added if lineage else history.head_date,
                }
            )
    fixture = {
        "repository": repository,
        "commit": commit,
        "dir": directory,
        "series": repository.split("/")[1].lower(),
        "list_file": list_file,
        "patches": patches,
        "departed": [
            {"name": d.patch, "added": d.added, "left": d.date, "status": d.upstream_status} for d in past.departures
        ],
    }
    CORPUS_DIR.mkdir(parents=True, exist_ok=True)
    target = CORPUS_DIR / f"{repository.replace('/', '+')}.json"
    lines = ["{\n"] + [f' "{k}": {json.dumps(v)},\n' for k, v in fixture.items() if k not in ("patches", "departed")]
    for key in ("patches", "departed"):
        items = fixture[key]
        lines.append(
            f' "{key}": [\n' + ",\n".join(f"  {json.dumps(item)}" for item in items) + ("\n ]" if items else " ]")
        )
        lines.append(",\n" if key == "patches" else "\n")
    lines.append("}\n")
    target.write_text("".join(lines))
    json.loads(target.read_text())  # what was written reads back
    print(f"{repository} {commit[:12]} {directory}: {len(patches)} patch(es), {len(fixture['departed'])} departed")


if __name__ == "__main__":
    for argument in sys.argv[1:]:
        refresh(Path(argument))
