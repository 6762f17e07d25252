"""Benchmark: `patchctl status` on a long history (#46.3), against `git log` alone and against
the per-patch path it replaced, measured in the same run.

Two shapes:

  generated (default)  a downstream of --commits commits (30,000; made by `git fast-import` in
                       seconds, no network) carrying a --patches-patch series (10) that came in
                       under another directory, was moved, had patches added, renamed, rewritten
                       by pin-syncs (with their trailers), dropped as taken upstream and dropped
                       by hand, through a few merges; on a generated upstream of 2,000 commits
                       after its pin, in which one patch conflicts at the tip.
  --electron MIRROR    Electron's real chromium series (patches/chromium at the mirror's HEAD,
                       161 patches, in electron/electron's own 30,000-commit history), from a
                       shared clone of MIRROR (e.g. /work/.mirror/electron+electron/repo). Chromium
                       itself is far too large: the upstream is a stand-in of --upstream-commits
                       generated commits after its pin, each touching files the patches touch,
                       and the trial is off (`--no-trial`: it would only try the patches on the
                       stand-in). What it measures is the project's side (the history of 161
                       patches) and the drift from one log of the upstream range.

Each case runs `patchctl status --json` as a user runs it (a process), --runs times; it prints
the median wall and CPU seconds (CPU: the process and its git children), and ratios against:

  git log alone   `git log --format=%H -- SERIES_DIR`: one walk of the history, nothing read
  before #46.3    the same command with patchctl as it was at --old-rev (extracted with `git
                  archive`): `git log --follow` per patch, `ls-tree` per commit of the size
                  history. On Electron it takes minutes: only with --old.

    python bench/status_bench.py [--commits 30000] [--patches 10] [--runs 3]
    python bench/status_bench.py --electron /work/.mirror/electron+electron/repo [--runs 1] [--old]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OLD_REV = "6357148"  # main before status read the history once
EPOCH = 1_600_000_000
IDENTITY = "Bench <bench@example.com>"


def git(cwd: Path, *args: str, stdin: bytes | None = None) -> str:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    done = subprocess.run(["git", *args], cwd=cwd, input=stdin, capture_output=True, env=env)
    if done.returncode != 0:
        raise SystemExit(f"git {' '.join(args[:3])} failed: {done.stderr.decode(errors='replace').strip()}")
    return done.stdout.decode(errors="replace")


class FastImport:
    """A `git fast-import` stream, built in memory."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.mark = 0

    def commit(
        self,
        message: str,
        files: dict[str, str | None],
        *,
        when: int,
        parent: int | None,
        merge: int | None = None,
        ref: str = "refs/heads/main",
        renames: dict[str, str] | None = None,
    ) -> int:
        self.mark += 1
        body = message.encode()
        out = [f"commit {ref}\nmark :{self.mark}\ncommitter {IDENTITY} {when} +0000\n".encode()]
        out.append(f"data {len(body)}\n".encode() + body + b"\n")
        if parent is not None:
            out.append(f"from :{parent}\n".encode())
        if merge is not None:
            out.append(f"merge :{merge}\n".encode())
        for old, new in (renames or {}).items():
            out.append(f'R "{old}" "{new}"\n'.encode())
        for path, text in files.items():
            if text is None:
                out.append(f'D "{path}"\n'.encode())
            else:
                data = text.encode()
                out.append(f'M 100644 inline "{path}"\ndata {len(data)}\n'.encode() + data + b"\n")
        self.parts.append(b"".join(out))
        return self.mark

    def run(self, repo: Path) -> None:
        git(repo, "fast-import", "--quiet", "--force", stdin=b"".join(self.parts) + b"done\n")


def numbered(count: int, prefix: str) -> str:
    return "".join(f"{prefix} {i}\n" for i in range(1, count + 1))


# ---------------------------------------------------------------- the generated shape


def make_upstream(path: Path, patches: int, commits: int) -> tuple[str, str, list[str]]:
    """A small upstream: 300 files; its pin after 50 commits, then COMMITS commits that edit far
    from the patches' lines, except one at the last patch's line. Returns (pin, tip, patch texts)."""
    git(path.parent, "init", "-q", "--initial-branch=main", str(path))
    stream = FastImport()
    rng = random.Random(46)
    files = {f"src/u{i:03}.c": numbered(60, f"u{i}") for i in range(300)}
    head = stream.commit("initial", files, when=EPOCH, parent=None)
    for n in range(1, 50):
        name = f"src/u{rng.randrange(300):03}.c"
        files[name] = files[name].replace(f" {40 + n % 20}\n", f" {40 + n % 20}.{n}\n", 1)
        head = stream.commit(f"before the pin {n}", {name: files[name]}, when=EPOCH + n * 60, parent=head)
    pin_files = dict(files)
    for n in range(commits):
        name = f"src/u{rng.randrange(300 if n % 3 else patches):03}.c"
        # Far from the patches' lines (their third): they still apply strictly.
        files[name] = (
            files[name].replace(" 30\n", f" 30\nupstream {n}\n", 1) if n % 7 == 0 else files[name] + f"// {n}\n"
        )
        head = stream.commit(f"upstream change {n}", {name: files[name]}, when=EPOCH + 10_000 + n * 60, parent=head)
    last = f"src/u{patches - 1:03}.c"
    files[last] = files[last].replace(f"u{patches - 1} 3\n", f"u{patches - 1} three, upstream's way\n")
    stream.commit("upstream edits the last patch's line", {last: files[last]}, when=EPOCH + 900_000, parent=head)
    stream.run(path)
    pin, tip = git(path, "rev-parse", f"main~{commits + 1}", "main").split()
    texts = []
    scratch = path.parent / "scratch"
    git(path.parent, "clone", "-q", str(path), str(scratch))
    git(scratch, "checkout", "-q", "--detach", pin)
    for k in range(patches):
        name = f"src/u{k:03}.c"
        (scratch / name).write_text(pin_files[name].replace(f"u{k} 3\n", f"u{k} 3, patched\n"))
        git(scratch, "-c", "user.name=Bench", "-c", "user.email=bench@example.com", "commit", "-qam", f"Patch u{k}")
        texts.append(git(scratch, "format-patch", "-1", "--stdout", "--zero-commit", "--full-index", "HEAD"))
        git(scratch, "reset", "-q", "--hard", pin)
    shutil.rmtree(scratch)
    return pin, tip, texts


STATUSES = ["Pending", "Submitted [https://github.com/example/up/pull/{n}]", "Backport [https://example.com/{n}]", None]


def with_header(text: str, n: int, revision: int) -> str:
    """TEXT with an Upstream-Status header (patch N's) and a revision line in its description."""
    status = STATUSES[n % len(STATUSES)]
    extra = f"Revision {revision}.\n" + (f"\nUpstream-Status: {status.format(n=n)}\n" if status else "")
    return text.replace("\n---\n", f"\n{extra}---\n", 1)


def make_project(path: Path, upstream: Path, pin: str, texts: list[str], commits: int) -> None:
    """The downstream's history, COMMITS commits: see the module's docstring."""
    git(path.parent, "init", "-q", "--initial-branch=main", str(path))
    stream = FastImport()
    count = len(texts)
    config = (
        "version: 1\nupstreams:\n"
        f"  up: {{url: '{upstream}', branch: main, pin: {pin}}}\n"
        "series:\n  main: {upstream: up, dir: patches/main}\n"
    )
    names = [f"{k + 1:04}-patch-u{k}.patch" for k in range(count)]
    extra = [f"{count + 1:04}-taken.patch", f"{count + 2:04}-abandoned.patch"]
    # When each happens, as fractions of the history.
    at = {
        "import": 0.03,  # the first half of the series, under patches/old
        "move": 0.2,  # patches/old -> patches/main
        "renumber": 0.5,  # names[1] renamed
        "drop taken": 0.66,  # a pin-sync drops extra[0] as taken upstream
        "drop by hand": 0.8,  # extra[1] deleted in a plain commit
    }
    events = {round(commits * share): what for what, share in at.items()}
    adds = {round(commits * (0.25 + 0.04 * k)): k for k in range(count // 2, count)}
    syncs = set(range(commits // 10, commits, commits // 12))
    merges = set(range(997, commits, 1000))
    directory = "patches/old"
    present: dict[str, str] = {}  # name -> text
    revision = 0
    head = stream.commit(
        "Add matrix.yaml", {"matrix.yaml": config, "README.md": "# downstream\n"}, when=EPOCH, parent=None
    )
    other = {f"app/f{i:03}.c": numbered(20, f"f{i}") for i in range(400)}
    for n in range(1, commits):
        when = EPOCH + n * 600
        files: dict[str, str | None] = {}
        renames: dict[str, str] = {}
        message = f"Work on the app, step {n}"
        what = events.get(n)
        if what == "import":
            for k in range(count // 2):
                present[names[k]] = with_header(texts[k], k, revision)
            present[extra[0]] = with_header(texts[0].replace("u0 3, patched", "u0 3, taken"), 1, revision)
            present[extra[1]] = with_header(texts[1].replace("u1 3, patched", "u1 3, abandoned"), 0, revision)
            files = {f"{directory}/{name}": text for name, text in present.items()}
            message = "Carry our patches"
        elif what == "move":
            renames = {f"{directory}/{name}": f"patches/main/{name}" for name in present}
            directory = "patches/main"
            message = "Move the series to patches/main"
        elif what == "renumber":
            renamed = names[1].replace("patch-u1", "patch-u1-renamed")
            renames = {f"{directory}/{names[1]}": f"{directory}/{renamed}"}
            present[renamed] = present.pop(names[1])
            names[1] = renamed
            message = "Rename a patch"
        elif what == "drop taken":
            files = {f"{directory}/{extra[0]}": None}
            present.pop(extra[0])
            message = (
                f"pin-sync: move up to {pin[:12]}\n\nPatchctl-Dropped: main/{extra[0]} (taken upstream in {'a' * 40})\n"
            )
        elif what == "drop by hand":
            files = {f"{directory}/{extra[1]}": None}
            present.pop(extra[1])
            message = "Drop a patch we no longer need"
        elif n in adds:
            k = adds[n]
            present[names[k]] = with_header(texts[k], k, revision)
            files = {f"{directory}/{names[k]}": present[names[k]]}
            message = f"Carry {names[k]}"
        elif n in syncs and present:
            revision += 1
            hand = sorted(present)[revision % len(present)]
            for name in sorted(present)[revision % 3 :: 3]:
                k = names.index(name) if name in names else 0
                present[name] = with_header(texts[k], k, revision) if name in names else present[name]
                files[f"{directory}/{name}"] = present[name]
            message = f"pin-sync: move up to {pin[:12]}\n\nPatchctl-Needed-A-Hand: main/{hand}\n"
        else:
            name = f"app/f{n % 400:03}.c"
            other[name] = other[name] + f"// step {n}\n"
            files = {name: other[name]}
        if n in merges and not what:
            side = stream.commit(f"Side work {n}", files, when=when, parent=head, ref="refs/heads/side")
            head = stream.commit(f"Merge branch 'side' (step {n})", {}, when=when + 1, parent=head, merge=side)
            continue
        head = stream.commit(message, files, when=when, parent=head, renames=renames)
    # Every patch of the series at HEAD applies at the pin: its last version, as made from the upstream.
    final = {f"patches/main/{name}": with_header(texts[k], k, revision + 1) for k, name in enumerate(names)}
    stream.commit("The series as it stands", final, when=EPOCH + commits * 600, parent=head)
    stream.run(path)
    git(path, "checkout", "-q", "main")


# ---------------------------------------------------------------- Electron


def electron_project(mirror: Path, into: Path, upstream_commits: int) -> tuple[Path, Path]:
    """A shared clone of MIRROR with only patches/chromium checked out, and a stand-in chromium
    upstream whose UPSTREAM_COMMITS commits after its pin each touch a file the patches touch."""
    project = into / "electron"
    git(into, "clone", "-q", "--shared", "--no-checkout", str(mirror), str(project))
    git(project, "sparse-checkout", "set", "patches/chromium")
    git(project, "checkout", "-q")
    touched: list[str] = []
    for patch in sorted((project / "patches/chromium").glob("*.patch")):
        for line in patch.read_text(errors="replace").splitlines():
            if line.startswith("+++ b/"):
                touched.append(line[6:])
    touched = sorted(set(touched))
    upstream = into / "chromium-stand-in"
    git(into, "init", "-q", "--initial-branch=main", str(upstream))
    stream = FastImport()
    rng = random.Random(161)
    head = stream.commit("initial", {p: f"{p}\n" for p in touched}, when=EPOCH, parent=None)
    for n in range(upstream_commits):
        picked = rng.sample(touched, 3) + [f"other/o{n % 5000}.cc"]
        head = stream.commit(
            f"chromium change {n}", {p: f"{p} {n}\n" for p in picked}, when=EPOCH + (n + 1) * 60, parent=head
        )
    stream.run(upstream)
    pin = git(upstream, "rev-list", "--max-parents=0", "main").strip()
    (project / "matrix.yaml").write_text(
        "version: 1\nupstreams:\n"
        f"  chromium: {{url: '{upstream}', branch: main, pin: {pin}}}\n"
        "series:\n  chromium: {upstream: chromium, dir: patches/chromium}\n"
    )
    return project, upstream


# ---------------------------------------------------------------- timing


@dataclass
class Timing:
    wall: float
    cpu: float


def timed(command: list[str], cwd: Path, env: dict[str, str]) -> tuple[Timing, str]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command[:6])} failed ({done.returncode}): {done.stderr.strip()[-800:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Timing(wall, cpu), done.stdout


def old_checkout(into: Path, rev: str) -> Path | None:
    """patchctl as it was at REV, extracted from this repository (None when it lacks REV)."""
    found = subprocess.run(["git", "rev-parse", "--verify", "-q", f"{rev}^{{commit}}"], cwd=REPO, capture_output=True)
    if found.returncode != 0:
        return None
    target = into / f"patchctl-{rev}"
    target.mkdir()
    archive = subprocess.run(["git", "archive", rev, "patchctl"], cwd=REPO, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return target


def median(timings: list[Timing]) -> Timing:
    return Timing(statistics.median(t.wall for t in timings), statistics.median(t.cpu for t in timings))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--commits", type=int, default=30_000)
    parser.add_argument("--patches", type=int, default=10)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--electron", type=Path, help="an electron/electron git directory: its real series instead")
    parser.add_argument("--upstream-commits", type=int, default=2_000, help="the upstream range (default 2000)")
    parser.add_argument("--old", action="store_true", help="with --electron, also time the path before #46.3")
    parser.add_argument("--old-rev", default=OLD_REV, help=f"patchctl before #46.3 (default {OLD_REV})")
    parser.add_argument("--keep", type=Path, help="build the repositories here and keep them")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="status-bench-")) if args.keep is None else args.keep
    work.mkdir(parents=True, exist_ok=True)
    cache = work / "cache"
    env = {**os.environ, "PATCHCTL_CACHE": str(cache), "PATCHCTL_QUIET": "1", "XDG_STATE_HOME": str(work / "state")}
    try:
        start = time.perf_counter()
        if args.electron:
            project, _ = electron_project(args.electron.resolve(), work, args.upstream_commits)
            series_dir, trial = "patches/chromium", ["--no-trial"]
            shape = f"Electron's patches/chromium at {git(project, 'rev-parse', '--short=12', 'HEAD').strip()}"
        else:
            pin, _, texts = make_upstream(work / "upstream", args.patches, args.upstream_commits)
            project = work / "project"
            make_project(project, work / "upstream", pin, texts, args.commits)
            series_dir, trial = "patches/main", []
            shape = f"a generated {args.patches}-patch series"
        commits = int(git(project, "rev-list", "--count", "HEAD"))
        print(f"{shape}: {commits} commits in the project, built in {time.perf_counter() - start:.1f} s")
        command = [sys.executable, "-m", "patchctl", "status", "--json", *trial]
        _, first = timed(command, project, env)  # fills the cache's mirror: not timed
        report = json.loads(first)["series"][0]
        ours = [timed(command, project, env)[0] for _ in range(args.runs)]
        floor = [timed(["git", "log", "--format=%H", "--", series_dir], project, env)[0] for _ in range(args.runs)]
        rows = [("patchctl status " + " ".join(trial), median(ours)), ("git log -- SERIES_DIR alone", median(floor))]
        old = None if args.electron and not args.old else old_checkout(work, args.old_rev)
        if old is not None:
            old_env = {**env, "PYTHONPATH": str(old)}
            before = [timed(command, project, old_env)[0] for _ in range(1 if args.electron else args.runs)]
            rows.append((f"patchctl status before #46.3 ({args.old_rev})", median(before)))
        elif not args.electron:
            print(f"(patchctl at {args.old_rev} is not in this repository: no before figure)")
        ages = sorted(p["age_days"] for p in report["patches"] if p["age_days"] is not None)
        print(
            f"{len(report['patches'])} patches (ages {ages[0] if ages else '?'}..{ages[-1] if ages else '?'} days), "
            f"{len(report['size_history'])} points of history, {len(report['departures'])} departures, "
            f"moved from {[m['dir'] for m in report['moved_from']]}, verdicts {report['verdicts'] or 'not tried'}"
        )
        print(f"\n{'case':<52} {'wall s':>8} {'CPU s':>8} {'wall vs ours':>13}")
        for name, timing in rows:
            print(f"{name:<52} {timing.wall:8.2f} {timing.cpu:8.2f} {timing.wall / rows[0][1].wall:13.2f}")
        target = 15.0 if args.electron else 2.0
        print(f"\ntarget: under {target:g} s; median wall {rows[0][1].wall:.2f} s over {args.runs} run(s)")
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
