"""Replay Ollama's real llama.cpp vendor bumps with patchctl and with Ollama's own `git am -3`
recipe, and say how each fares (issue 32's bar, measured on bumps the tests never see).

Not part of the test suite, and nothing of Ollama or llama.cpp is written into this repository:
everything is built under a scratch directory from a bare clone of github:ollama/ollama.

Upstream is rebuilt the way the issue's filer did (llama.cpp's own history is too large): for a
bump commit B (Makefile.sync's FETCH_HEAD changes), the upstream tree at the old pin is the
vendored trees at B^ (`llama/llama.cpp/` as the root, `ml/backend/ggml/ggml/` as `ggml/`, without
Ollama's *.go files and .rsync-filter) with B^'s `llama/patches/` reverse-applied (`git apply -R`,
last patch first); the tree at the new pin is the same at B with B's series. Both are committed
into a local upstream repository (old, then new).

The maintainers' result is B's series applied one patch at a time on the new pin, in a separate
repository (so that its blobs never help either side); a stop is resolved as the maintainers did:
every file the stopped patch (or its counterpart in B's series, matched by subject) touches is
written as it stands after that counterpart. A patch B's series no longer has is dropped
(`--continue --drop` / `git reset --hard` + `--continue` for patchctl, `git am --skip`).

    patchctl  a project (matrix.yaml: upstream = the local repository, pin = old, series =
              B^'s files under llama/patches/, names as they are); `pin-sync up --to NEW`,
              each stop resolved, `git add`, `pin-sync --continue`, every command its own process
              and timed. The upstream cache is warmed first (untimed), as a previous sync leaves it.
    --wait    the same with one `pin-sync up --to NEW --wait` run, answered at its prompt after
              each resolution (Enter, or `drop`); each round timed from the answer to the next
              prompt or the exit. Its series must be byte for byte the one of a run per stop.
    recipe    Ollama's Makefile.sync: a clone at old with B^'s series applied (the previous sync,
              untimed); `git checkout -f NEW`; `git am -3` per patch, a stop resolved, `git add`,
              `git am --continue`; `git format-patch --no-signature --no-numbered --zero-commit`.

    python bench/ollama_replay.py OLLAMA_GIT_DIR [--bump COMMIT ...] [--repeat N] [--work DIR] [--json FILE] [--keep]
                                  [--profile DIR]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# The bumps issue 32 names, and a few ordinary recent ones.
DEFAULT_BUMPS = ["d7d7e9966", "8dd12c873", "0cefd46f2", "1a19df1f3", "c68f367ef", "544b6739d", "0cf7794b1"]
VENDORED = {"llama/llama.cpp/": "", "ml/backend/ggml/ggml/": "ggml/"}  # Ollama's path -> llama.cpp's
PATCHES = "llama/patches/"
SERIES = "ollama"
FORMAT_PATCH = ["format-patch", "--no-signature", "--no-numbered", "--zero-commit"]  # Makefile.sync's
DATE = "2025-01-01T00:00:00Z"
DIFFSTAT = re.compile(r"^ \d+ files? changed", re.MULTILINE)
INDEX = re.compile(r"^index ([0-9a-f]+)\.\.([0-9a-f]+)", re.MULTILINE)
DIFF_PATHS = re.compile(r"^diff --git a/(\S+) b/(\S+)$", re.MULTILINE)
COUNTS = re.compile(r"static_assert\(GGML_OP_COUNT == (\d+)")


def git_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    return {
        **env,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_AUTHOR_NAME": "nobody",
        "GIT_AUTHOR_EMAIL": "<>",
        "GIT_COMMITTER_NAME": "nobody",
        "GIT_COMMITTER_EMAIL": "<>",
        "GIT_AUTHOR_DATE": DATE,
        "GIT_COMMITTER_DATE": DATE,
    }


def git(cwd: Path, *args: str, check: bool = True, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, input=stdin, env=git_env())
    if check and done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} in {cwd} failed: {done.stderr.decode(errors='replace')}")
    return done


def out(cwd: Path, *args: str) -> str:
    return git(cwd, *args).stdout.decode().strip()


# ---------------------------------------------------------------- rebuilding the bump


@dataclass
class Patch:
    name: str
    text: str

    @property
    def subject(self) -> str:
        match = re.search(r"^Subject: (?:\[PATCH[^\]]*\] )?(.*(?:\n [^\n]*)*)", self.text, re.MULTILINE)
        return " ".join(match.group(1).split()) if match else self.name

    @property
    def paths(self) -> list[str]:
        seen: list[str] = []
        for a, b in DIFF_PATHS.findall(self.text):
            seen += [p for p in (a, b) if p not in seen]
        return seen


@dataclass
class Bump:
    commit: str
    fetch_old: str
    fetch_new: str
    upstream: Path
    old: str
    new: str
    maint: Path  # the maintainers' repository: B's series on the new pin, one commit per patch
    old_series: list[Patch]
    new_series: list[Patch]
    after: dict[str, str]  # subject in B's series -> the maintainers' commit after that patch
    before_first: str  # the new pin in the maintainers' repository


def fetch_head(mirror: Path, rev: str) -> str:
    text = out(mirror, "show", f"{rev}:Makefile.sync")
    match = re.search(r"^FETCH_HEAD=(\S+)", text, re.MULTILINE)
    return match.group(1) if match else "?"


def series_at(mirror: Path, rev: str) -> list[Patch]:
    names = out(mirror, "ls-tree", "--name-only", rev, PATCHES).splitlines()
    vendored = set(vendored_paths(mirror, rev))
    series = []
    for name in sorted(n for n in names if n.endswith(".patch")):
        text = vendored_only(git(mirror, "show", f"{rev}:{name}").stdout.decode(), vendored)
        if text is not None:
            series.append(Patch(Path(name).name, text))
    return series


def vendored_paths(mirror: Path, rev: str) -> list[str]:
    """The vendored files at REV as llama.cpp's paths."""
    paths = []
    for name in out(mirror, "ls-tree", "-r", "--name-only", rev, *VENDORED).splitlines():
        prefix = next(p for p in VENDORED if name.startswith(p))
        paths.append(VENDORED[prefix] + name[len(prefix) :])
    return paths


def vendored_only(text: str, vendored: set[str]) -> str | None:
    """TEXT without its file diffs of paths Ollama does not vendor (the ggml backends it leaves
    out, tests/): the patch as far as it reaches the vendored trees, its diffstat cut to match
    and its summary line counted again. None when nothing is left."""
    head, *sections = re.split(r"(?m)^(?=diff --git )", text)
    kept = [s for s in sections if DIFF_PATHS.match(s) and DIFF_PATHS.match(s).group(2) in vendored]
    if len(kept) == len(sections):
        return text
    if not kept:
        return None
    dropped = [DIFF_PATHS.match(s).group(2) for s in sections if s not in kept]
    plus = minus = 0
    for section in kept:
        body = section.split("\n@@", 1)[1] if "\n@@" in section else ""
        for line in body.splitlines()[1:]:
            if line.startswith("+"):
                plus += 1
            elif line.startswith("-"):
                minus += 1
    lines = []
    for line in head.splitlines(keepends=True):
        stat = re.match(r"^ (\S+) +\| ", line)
        if stat and any(p == stat.group(1) or (stat.group(1).startswith(".../") and p.endswith(stat.group(1)[3:]))
                        for p in dropped):  # fmt: skip
            continue
        if re.match(r"^ \d+ files? changed", line):
            parts = [f"{len(kept)} file{'s' * (len(kept) != 1)} changed"]
            parts += [f"{plus} insertion{'s' * (plus != 1)}(+)"] if plus else []
            parts += [f"{minus} deletion{'s' * (minus != 1)}(-)"] if minus else []
            line = " " + ", ".join(parts) + "\n"
        lines.append(line)
    return "".join(lines) + "".join(kept)


def upstream_tree(mirror: Path, rev: str, series: list[Patch], into: Path) -> None:
    """INTO: llama.cpp's layout of the vendored trees at REV with REV's series reverse-applied."""
    archive = into.parent / f"{into.name}.tar"
    with open(archive, "wb") as sink:
        subprocess.run(
            ["git", "archive", rev, *VENDORED], cwd=mirror, stdout=sink, stderr=subprocess.DEVNULL, check=True,
            env=git_env(),
        )  # fmt: skip
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            if not member.isfile():
                continue
            prefix = next(p for p in VENDORED if member.name.startswith(p))
            rel = VENDORED[prefix] + member.name[len(prefix) :]
            if rel.endswith(".go") or Path(rel).name == ".rsync-filter":
                continue
            target = into / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            source = tar.extractfile(member)
            assert source is not None
            target.write_bytes(source.read())
            target.chmod(0o755 if member.mode & 0o100 else 0o644)
    archive.unlink()
    for patch in reversed(series):
        done = git(into, "apply", "-R", "--whitespace=nowarn", "-", stdin=patch.text.encode(), check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{rev}: {patch.name} does not reverse-apply: {done.stderr.decode()[:500]}")


def commit_tree(repo: Path, tree: Path, message: str) -> str:
    for entry in repo.iterdir():
        if entry.name != ".git":
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
    for entry in tree.iterdir():
        shutil.move(str(entry), repo / entry.name)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", message)
    return out(repo, "rev-parse", "HEAD")


def build_bump(mirror: Path, commit: str, root: Path) -> Bump:
    parent = out(mirror, "rev-parse", f"{commit}^")
    old_series, new_series = series_at(mirror, parent), series_at(mirror, commit)
    upstream = root / "upstream"
    upstream.mkdir()
    git(upstream, "init", "-q", "-b", "main")
    revs = []
    for rev, series, label in ((parent, old_series, "old"), (commit, new_series, "new")):
        tree = root / f"tree-{label}"
        tree.mkdir()
        upstream_tree(mirror, rev, series, tree)
        revs.append(commit_tree(upstream, tree, f"llama.cpp {fetch_head(mirror, rev)} (rebuilt from ollama {rev[:9]})"))
        shutil.rmtree(tree)
    maint = root / "maintainers"
    git(root, "clone", "-q", str(upstream), str(maint))
    git(maint, "checkout", "-q", "--detach", revs[1])
    after = {}
    for patch in new_series:
        git(maint, "am", "-q", "--keep-cr", "-", stdin=patch.text.encode())
        after[patch.subject] = out(maint, "rev-parse", "HEAD")
    return Bump(
        commit, fetch_head(mirror, parent), fetch_head(mirror, commit), upstream, revs[0], revs[1], maint,
        old_series, new_series, after, revs[1],
    )  # fmt: skip


def counterpart(bump: Bump, patch: Patch) -> Patch | None:
    """PATCH's patch in B's series: the same subject, else the same name without its number."""
    by_subject = {p.subject: p for p in bump.new_series}
    if patch.subject in by_subject:
        return by_subject[patch.subject]
    stem = patch.name.split("-", 1)[-1]
    return next((p for p in bump.new_series if p.name.split("-", 1)[-1] == stem), None)


def resolve(bump: Bump, patch: Patch, tree: Path) -> bool:
    """Write in TREE what the maintainers have after PATCH's counterpart; False when B's series
    no longer has it (the maintainers dropped it)."""
    twin = counterpart(bump, patch)
    if twin is None:
        return False
    commit = bump.after[twin.subject]
    for path in dict.fromkeys(patch.paths + twin.paths):
        blob = git(bump.maint, "show", f"{commit}:{path}", check=False)
        target = tree / path
        if blob.returncode == 0:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(blob.stdout)
            git(tree, "add", "--", path)
        elif target.exists() or git(tree, "ls-files", "--error-unmatch", "--", path, check=False).returncode == 0:
            git(tree, "rm", "-q", "-f", "--ignore-unmatch", "--", path)
    return True


# ---------------------------------------------------------------- the two ways through it


@dataclass
class Round:
    step: str
    seconds: float
    stopped_at: str = ""
    kind: str = ""  # the classification (patchctl) or "git am -3 failed" (recipe)
    detail: str = ""
    resolution: str = ""  # "maintainers' files" | "dropped (not in B's series)"
    phases: dict[str, float] = field(default_factory=dict)  # patchctl's own phase_seconds


class ChildCPU:
    """CPU seconds (user and system) of the child processes waited for while this clock is on,
    the harness's own git calls (the resolutions) left out by turning it off around them: what
    each side costs the machine, which the load of a shared machine moves less than wall time.
    A `--wait` run counts when it exits."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._since: float | None = None

    @staticmethod
    def now() -> float:
        times = os.times()
        return times.children_user + times.children_system

    def on(self) -> None:
        self._since = self.now()

    def off(self) -> None:
        assert self._since is not None
        self.seconds += self.now() - self._since
        self._since = None


def patchctl_env(cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPROFILEIMPORTTIME")}
    return {**env, "PATCHCTL_QUIET": "1", "PATCHCTL_CACHE": str(cache), "PYTHONPATH": str(REPO)}


PROFILE: Path | None = None  # --profile: each command runs under cProfile, its stats written here
# `python -m cProfile` swallows the exit code, which tells a stop from a finish: keep it.
PROFILED = (
    "import cProfile, runpy, sys; p = cProfile.Profile(); out = sys.argv.pop(1); sys.argv[0] = 'patchctl'\n"
    "try:\n p.runcall(runpy.run_module, 'patchctl', run_name='__main__')\n"
    "finally:\n p.dump_stats(out)"
)


def patchctl(project: Path, cache: Path, *args: str) -> tuple[float, int, dict, str]:
    report = project.parent / f"report-{time.monotonic_ns()}.json"
    command = ["-m", "patchctl"]
    if PROFILE:
        command = ["-c", PROFILED, str(PROFILE / f"{time.monotonic_ns()}-{args[0].lstrip('-')}.prof")]
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, *command, "-C", str(project), "pin-sync", *args, "--json-file", str(report)],
        capture_output=True,
        cwd=REPO,
        env=patchctl_env(cache),
    )
    elapsed = time.perf_counter() - start
    if done.returncode not in (0, 1) or not report.exists():
        raise RuntimeError(f"pin-sync {' '.join(args)} exited {done.returncode}: {done.stderr.decode()[-2000:]}")
    return elapsed, done.returncode, json.loads(report.read_text()), done.stderr.decode()


class Waiting:
    """One `pin-sync --wait` process, answered at its prompt as a user would: a round is timed
    from the answer (from the start, for the first) to the next prompt or to the exit."""

    def __init__(self, project: Path, cache: Path, *args: str):
        self.report = project.parent / f"report-wait-{time.monotonic_ns()}.json"
        command = ["-m", "patchctl"]
        if PROFILE:
            command = ["-c", PROFILED, str(PROFILE / f"{time.monotonic_ns()}-wait.prof")]
        start = time.perf_counter()
        self.process = subprocess.Popen(
            [sys.executable, *command, "-C", str(project), "pin-sync", *args, "--wait", "--json-file",
             str(self.report)],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=REPO,
            env=patchctl_env(cache),
        )  # fmt: skip
        self.first = self._round(start)

    def answer(self, *args: str) -> tuple[float, int, dict, str]:
        """The round `pin-sync ARGS` (--continue [--drop]) would be: its answer at the prompt."""
        assert self.process.stdin is not None
        start = time.perf_counter()
        self.process.stdin.write(b"drop\n" if "--drop" in args else b"\n")
        self.process.stdin.flush()
        return self._round(start)

    def _round(self, start: float) -> tuple[float, int, dict, str]:
        assert self.process.stderr is not None
        said = []
        while line := self.process.stderr.readline():
            said.append(line.decode(errors="replace"))
            if line.startswith(b"patchctl: error:"):
                self.process.kill()
                raise RuntimeError(f"pin-sync --wait refused an answer: {line.decode(errors='replace')}")
            if b" is waiting: " in line:
                return time.perf_counter() - start, 1, json.loads(self.report.read_text()), "".join(said)
        code = self.process.wait()
        elapsed = time.perf_counter() - start
        if code not in (0, 1) or not self.report.exists():
            raise RuntimeError(f"pin-sync --wait exited {code}: {''.join(said)[-2000:]}")
        return elapsed, code, json.loads(self.report.read_text()), "".join(said)


# What every pin-sync command imports before it does anything (`pin-sync --help` imports none
# of it: commands are loaded lazily).
PIN_SYNC_IMPORTS = "import patchctl.cli, patchctl.commands.pin_sync, patchctl.loop.sync"


def startup() -> float:
    """Seconds of starting Python and importing what pin-sync runs (the first run, untimed,
    writes the bytecode)."""
    env = patchctl_env(Path(tempfile.gettempdir()) / "unused-cache")
    subprocess.run([sys.executable, "-c", PIN_SYNC_IMPORTS], cwd=REPO, env=env, capture_output=True, check=True)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", PIN_SYNC_IMPORTS], cwd=REPO, env=env, capture_output=True, check=True)
    return time.perf_counter() - start


def make_project(root: Path, bump: Bump) -> Path:
    project = root / "project"
    series_dir = project / PATCHES
    series_dir.mkdir(parents=True)
    for patch in bump.old_series:
        (series_dir / patch.name).write_text(patch.text)
    (project / "matrix.yaml").write_text(
        f"version: 1\nupstreams:\n  up:\n    url: {bump.upstream}\n    branch: main\n    pin: {bump.old}\n"
        f"series:\n  {SERIES}:\n    upstream: up\n    dir: {PATCHES.rstrip('/')}\n"
    )
    git(project, "init", "-q")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "downstream project")
    return project


def run_patchctl(root: Path, bump: Bump, *, waiting: bool = False) -> tuple[list[Round], Path, list[dict], float]:
    """The bump with patchctl, a run per stop (`--continue`), or with WAITING one `--wait` run
    answered at each stop; its rounds, project, records and CPU seconds (`ChildCPU`)."""
    cache = root / "cache"
    warm = subprocess.run(
        [sys.executable, "-c", "import sys; from patchctl.upstream.store import Store; Store().mirror(sys.argv[1])",
         str(bump.upstream)],
        cwd=REPO, env=patchctl_env(cache), capture_output=True,
    )  # fmt: skip
    if warm.returncode != 0:
        raise RuntimeError(f"warming the cache failed: {warm.stderr.decode()}")
    project = make_project(root, bump)
    by_name = {p.name: p for p in bump.old_series}
    tree = project / ".patchctl" / "sync" / "up" / SERIES
    rounds: list[Round] = []
    cpu = ChildCPU()
    cpu.on()
    if waiting:
        session = Waiting(project, cache, "up", "--to", bump.new)
        seconds, rc, report, stderr = session.first
        go_on = session.answer
    else:
        seconds, rc, report, stderr = patchctl(project, cache, "up", "--to", bump.new)
        go_on = functools.partial(patchctl, project, cache)
    step = "pin-sync --to"
    while True:
        this = Round(step, seconds, phases=report.get("phase_seconds", {}))
        rounds.append(this)
        if rc == 0:
            break
        if report["state"] not in ("conflict", "needs-hand", "needs-look"):
            raise RuntimeError(f"pin-sync stopped {report['state']}: {stderr[-2000:]}")
        stopped = next(
            r for r in reversed(report["patches"]) if not r["classification"].startswith(("blocked", "not replayed"))
        )
        this.stopped_at, this.kind, this.detail = stopped["patch"], stopped["classification"], stopped["detail"]
        name = stopped["patch"].split("/", 1)[-1]
        args = ["--continue"]
        cpu.off()  # the resolution: the user's, on neither side's clock
        if resolve(bump, by_name[name], tree):
            this.resolution = "maintainers' files"
            if (
                report["state"] != "conflict"
                and not git(tree, "diff", "--cached", "--quiet", "HEAD", check=False).returncode
            ):
                this.resolution = "maintainers' files: no change left, dropped"
                args.append("--drop")
        else:
            this.resolution = "dropped (not in B's series)"
            if report["state"] != "conflict":
                args.append("--drop")
            else:
                git(tree, "reset", "-q", "--hard")
        cpu.on()
        seconds, rc, report, stderr = go_on(*args)
        step = " ".join(args)
    cpu.off()
    return rounds, project, report["patches"], cpu.seconds


def run_recipe(root: Path, bump: Bump) -> tuple[list[Round], Path, list[str], float]:
    work = root / "vendor"
    git(root, "clone", "-q", "--no-checkout", str(bump.upstream), str(work))
    git(work, "checkout", "-q", "--detach", bump.old)
    files = []
    for patch in bump.old_series:  # the previous sync left the series applied (untimed)
        files.append(root / patch.name)
        files[-1].write_text(patch.text)
        git(work, "am", "-q", "-3", str(files[-1]))
    foreign = missing_blobs(bump, work)
    formatted = root / "formatted"
    rounds = []
    cpu = ChildCPU()
    cpu.on()
    start = time.perf_counter()
    git(work, "checkout", "-q", "-f", bump.new)
    rounds.append(Round("checkout -f", time.perf_counter() - start))
    for patch, path in zip(bump.old_series, files, strict=True):
        start = time.perf_counter()
        done = git(work, "am", "-q", "-3", str(path), check=False)
        if done.returncode == 0:
            rounds.append(Round(f"am -3 {patch.name}", time.perf_counter() - start))
            continue
        failed = time.perf_counter() - start
        this = Round(f"am -3 {patch.name}", 0.0, patch.name, "git am -3 failed", done.stderr.decode()[-300:].strip())
        # The resolution is the user's time, on neither side's clock (patchctl's is not timed either).
        cpu.off()
        resolved = (
            resolve(bump, patch, work) and git(work, "diff", "--cached", "--quiet", "HEAD", check=False).returncode
        )
        cpu.on()
        if resolved:
            this.resolution = "maintainers' files"
            start = time.perf_counter()
            git(work, "am", "--continue")
        else:
            this.resolution = "skipped (nothing left)" if counterpart(bump, patch) else "dropped (not in B's series)"
            start = time.perf_counter()
            git(work, "am", "--skip")
        this.seconds = failed + time.perf_counter() - start
        rounds.append(this)
    start = time.perf_counter()
    git(work, *FORMAT_PATCH, "-q", "-o", str(formatted), bump.new)
    rounds.append(Round("format-patch", time.perf_counter() - start))
    cpu.off()
    return rounds, work, foreign, cpu.seconds


# ---------------------------------------------------------------- judging the results


def style(text: str) -> tuple[bool, int]:
    """(has a diffstat, the length of its index ids; 0 when it has none)."""
    ids = INDEX.findall(text)
    return bool(DIFFSTAT.search(text)), (len(ids[0][0]) if ids else 0)


def result_commit(bump: Bump, patches: list[Path], label: str) -> str:
    """The maintainers' repository at the new pin plus PATCHES applied strictly, as a commit."""
    git(bump.maint, "checkout", "-q", "--detach", bump.new)
    for patch in patches:
        done = git(bump.maint, "am", "-q", "--keep-cr", str(patch), check=False)
        if done.returncode != 0:
            git(bump.maint, "am", "--abort", check=False)
            raise RuntimeError(f"{label}: {patch.name} does not apply strictly: {done.stderr.decode()[:300]}")
    return out(bump.maint, "rev-parse", "HEAD")


def differing(bump: Bump, commit: str, leave_out: set[str]) -> list[str]:
    """The files where COMMIT differs from the maintainers' result (but those in LEAVE_OUT), each
    with the lines added and removed to get from it to theirs."""
    final = bump.after[bump.new_series[-1].subject] if bump.new_series else bump.new
    rows = [line.split("\t") for line in out(bump.maint, "diff", "--numstat", commit, final).splitlines()]
    return [f"{path} (+{plus} -{minus})" for plus, minus, path in rows if path not in leave_out]


@dataclass
class BumpResult:
    bump: str
    fetch_old: str
    fetch_new: str
    patches: int
    patches_after: int
    patchctl_rounds: list[Round]
    recipe_rounds: list[Round]
    patchctl_classes: dict[str, int] = field(default_factory=dict)
    patchctl_seconds: float = 0.0
    recipe_seconds: float = 0.0
    ratio: float = 0.0
    missing_blob_patches: dict[str, str] = field(default_factory=dict)  # patch -> its classification + detail
    clip_unicode: dict[str, str] = field(default_factory=dict)
    unpad: dict[str, object] = field(default_factory=dict)
    rewritten: int = 0
    style_kept: int = 0
    style_lost: list[str] = field(default_factory=list)
    # The same bump with one `pin-sync --wait` run, answered at each stop (its rounds, its time, its
    # ratio to the recipe) and whether it wrote byte for byte what the run per stop wrote.
    waiting_rounds: list[Round] = field(default_factory=list)
    waiting_seconds: float = 0.0
    waiting_ratio: float = 0.0
    waiting_same_series: bool = False
    # CPU seconds of each side's processes (`ChildCPU`), and the ratios to the recipe's
    patchctl_cpu: float = 0.0
    waiting_cpu: float = 0.0
    recipe_cpu: float = 0.0
    cpu_ratio: float = 0.0
    waiting_cpu_ratio: float = 0.0
    patchctl_vs_maintainers: list[str] = field(default_factory=list)  # files that differ
    recipe_vs_maintainers: list[str] = field(default_factory=list)
    explained_by_new_patches: list[str] = field(default_factory=list)  # files B's new patches touch


def missing_blobs(bump: Bump, work: Path) -> list[str]:
    """The patches whose index lines name a preimage blob neither upstream nor the series before
    them has, asked of WORK when it holds the old pin with the series applied."""
    names = []
    for patch in bump.old_series:
        for pre, _ in INDEX.findall(patch.text):
            if set(pre) != {"0"} and git(work, "cat-file", "-e", f"{pre}^{{blob}}", check=False).returncode:
                names.append(patch.name)
                break
    return names


def judge(bump: Bump, rounds: list[Round], project: Path, records: list[dict], recipe: list[Round], work: Path,
          foreign: list[str]) -> BumpResult:  # fmt: skip
    result = BumpResult(
        bump.commit, bump.fetch_old, bump.fetch_new, len(bump.old_series), len(bump.new_series), rounds, recipe
    )
    for record in records:
        result.patchctl_classes[record["classification"]] = result.patchctl_classes.get(record["classification"], 0) + 1
    result.patchctl_seconds = sum(r.seconds for r in rounds)
    result.recipe_seconds = sum(r.seconds for r in recipe)
    result.ratio = result.patchctl_seconds / result.recipe_seconds
    stops = {r.stopped_at.split("/", 1)[-1]: r for r in rounds if r.stopped_at}
    final = {r["patch"].split("/", 1)[-1]: r for r in records}

    def fate(name: str) -> str:
        stop = stops.get(name)
        if stop:
            return f"stopped: {stop.kind}: {stop.detail}"
        record = final.get(name, {})
        return f"{record.get('classification', '?')}: {record.get('detail', '')}".rstrip(": ")

    result.missing_blob_patches = {name: fate(name) for name in foreign}
    for patch in bump.old_series:
        if "clip-unicode" in patch.name:
            result.clip_unicode = {"patch": patch.name, "patchctl": fate(patch.name)}
    # What the two sides wrote.
    written = sorted((project / PATCHES).glob("*.patch"))
    inputs = {p.name: p.text for p in bump.old_series}
    input_styles = {style(t) for t in inputs.values()}
    for path in written:
        text = path.read_text()
        if inputs.get(path.name) == text:
            continue
        result.rewritten += 1
        wanted = style(inputs[path.name]) if path.name in inputs else next(iter(input_styles))
        if style(text) == wanted or (style(text)[0] == wanted[0] and style(text)[1] == 0):
            result.style_kept += 1
        else:
            result.style_lost.append(f"{path.name}: {style(text)} where the series has {wanted}")
    ours = result_commit(bump, written, "patchctl")
    theirs = out(work, "rev-parse", "HEAD")
    git(bump.maint, "fetch", "-q", str(work), theirs)
    new_only = {
        p for q in bump.new_series if not any(counterpart(bump, o) is q for o in bump.old_series) for p in q.paths
    }
    result.explained_by_new_patches = sorted(new_only)
    result.patchctl_vs_maintainers = differing(bump, ours, new_only)
    result.recipe_vs_maintainers = differing(bump, theirs, new_only)
    for patch in bump.old_series:
        if "unpad" not in patch.name:
            continue
        final_rev = bump.after[bump.new_series[-1].subject]
        counts = {}
        for label, rev in (("maintainers", final_rev), ("patchctl", ours), ("recipe", theirs)):
            text = git(bump.maint, "show", f"{rev}:ggml/src/ggml.c", check=False).stdout.decode()
            counts[label] = sorted(set(COUNTS.findall(text)))
        recipe_stop = next((r for r in recipe if r.stopped_at == patch.name), None)
        result.unpad = {
            "patch": patch.name,
            "patchctl": fate(patch.name),
            "recipe": "stopped (git am -3 failed)" if recipe_stop else "applied without a stop",
            "GGML_OP_COUNT": counts,
        }
    return result


def replay(mirror: Path, commit: str, root: Path, repeat: int = 1) -> BumpResult:
    """The bump with patchctl (a run per stop, then `--wait`) and with the recipe, judged. With
    REPEAT above 1, `--wait` and the recipe run REPEAT times each, one after the other, and
    each side's median time counts (on a shared machine one run of either moves by a fifth)."""
    root.mkdir(parents=True)
    start = time.perf_counter()
    bump = build_bump(mirror, commit, root)
    print(f"  rebuilt upstream and the maintainers' result in {time.perf_counter() - start:.1f} s", flush=True)
    (root / "patchctl").mkdir()
    rounds, project, records, cpu = run_patchctl(root / "patchctl", bump)
    waits, recipes = [], []
    for attempt in range(repeat):
        (root / f"waiting-{attempt}").mkdir()
        waits.append(run_patchctl(root / f"waiting-{attempt}", bump, waiting=True))
        (root / f"recipe-{attempt}").mkdir()
        recipes.append(run_recipe(root / f"recipe-{attempt}", bump))
    recipe, work, foreign, recipe_cpu = _median_run(recipes, lambda run: sum(r.seconds for r in run[0]))
    result = judge(bump, rounds, project, records, recipe, work, foreign)
    waited, waiting_project, _, waiting_cpu = _median_run(waits, lambda run: sum(r.seconds for r in run[0]))
    result.patchctl_cpu, result.waiting_cpu, result.recipe_cpu = cpu, waiting_cpu, recipe_cpu
    result.cpu_ratio, result.waiting_cpu_ratio = cpu / recipe_cpu, waiting_cpu / recipe_cpu
    result.waiting_rounds = waited
    result.waiting_seconds = sum(r.seconds for r in waited)
    result.waiting_ratio = result.waiting_seconds / result.recipe_seconds
    result.waiting_same_series = all(written_series(run[1]) == written_series(project) for run in waits)
    return result


def _median_run(runs: list, seconds: Callable) -> tuple:
    """The run of RUNS whose SECONDS is the median (the lower middle one of an even count)."""
    return sorted(runs, key=seconds)[(len(runs) - 1) // 2]


def written_series(project: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted((project / PATCHES).glob("*.patch"))}


def summary(result: BumpResult) -> str:
    stops = [r for r in result.patchctl_rounds if r.stopped_at]
    fails = [r for r in result.recipe_rounds if r.stopped_at]
    kinds: dict[str, int] = {}
    for r in stops:
        kinds[r.kind] = kinds.get(r.kind, 0) + 1
    lines = [
        f"bump {result.bump[:9]} (llama.cpp {result.fetch_old[:9]} -> {result.fetch_new[:9]}): "
        f"{result.patches} patches ({result.patches_after} after)",
        f"  patchctl: {len(stops)} stops {kinds}; {len(result.patchctl_rounds)} commands, "
        f"{result.patchctl_seconds:.2f} s; final classes {result.patchctl_classes}",
        f"  recipe:   {len(fails)} git am -3 failures {[r.stopped_at for r in fails]}; {result.recipe_seconds:.2f} s",
        f"  ratio {result.ratio:.2f}x; rewritten {result.rewritten}, style kept {result.style_kept}",
        f"  pin-sync --wait: {len(result.waiting_rounds)} rounds, {result.waiting_seconds:.2f} s, ratio "
        f"{result.waiting_ratio:.2f}x; the same series as a run per stop: {result.waiting_same_series}",
        f"  CPU seconds: a run per stop {result.patchctl_cpu:.2f} ({result.cpu_ratio:.2f}x), --wait "
        f"{result.waiting_cpu:.2f} ({result.waiting_cpu_ratio:.2f}x), recipe {result.recipe_cpu:.2f}",
    ]
    for r in stops:
        lines.append(
            f"    stop {r.stopped_at}: {r.kind}: {r.detail[:160]} [{r.resolution}] ({r.seconds:.2f} s to here)"
        )
    if result.missing_blob_patches:
        lines.append(f"  missing-blob patches: {result.missing_blob_patches}")
    if result.clip_unicode:
        lines.append(f"  clip-unicode: {result.clip_unicode}")
    if result.unpad:
        lines.append(f"  unpad: {result.unpad}")
    lines.append(f"  differs from the maintainers: patchctl {result.patchctl_vs_maintainers}, "
                 f"recipe {result.recipe_vs_maintainers}")  # fmt: skip
    if result.style_lost:
        lines.append(f"  style lost: {result.style_lost}")
    return "\n".join(lines)


def per_bump_table(results: list[BumpResult]) -> str:
    """Every bump's seconds and ratio to the recipe, a run per stop and `--wait`, wall time and
    CPU (`ChildCPU`), as a Markdown table."""
    rows = [
        "| bump | patches | stops | a run per stop | ratio | CPU ratio | `pin-sync --wait` | ratio | CPU ratio "
        "| `git am -3` recipe | its CPU |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in [*results, None]:
        group = results if r is None else [r]
        ours, waited, theirs, ours_cpu, waited_cpu, theirs_cpu = (
            sum(getattr(g, f) for g in group)
            for f in ("patchctl_seconds", "waiting_seconds", "recipe_seconds", "patchctl_cpu", "waiting_cpu",
                      "recipe_cpu")
        )  # fmt: skip
        stops = sum(1 for g in group for x in g.patchctl_rounds if x.stopped_at)
        name = f"all {len(results)}" if r is None else r.bump[:9]
        rows.append(
            f"| {name} | {sum(g.patches for g in group)} | {stops} | {ours:.2f} s | {ours / theirs:.2f}x | "
            f"{ours_cpu / theirs_cpu:.2f}x | {waited:.2f} s | {waited / theirs:.2f}x | "
            f"{waited_cpu / theirs_cpu:.2f}x | {theirs:.2f} s | {theirs_cpu:.2f} s |"
        )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mirror", type=Path, help="a bare clone (git dir) of github:ollama/ollama")
    parser.add_argument("--bump", action="append", help="an Ollama bump commit (repeatable; default: the issue's)")
    parser.add_argument("--work", type=Path, help="scratch directory (default: a temporary one)")
    parser.add_argument("--json", type=Path, help="write every result as JSON here")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directories")
    parser.add_argument("--profile", type=Path, help="run each patchctl command under cProfile, stats into DIR")
    parser.add_argument(
        "--repeat", type=int, default=1, help="run `--wait` and the recipe N times each per bump; medians count"
    )
    args = parser.parse_args(argv)
    if args.profile:
        global PROFILE
        PROFILE = args.profile.resolve()
        PROFILE.mkdir(parents=True, exist_ok=True)
    mirror = args.mirror.resolve()
    work = Path(tempfile.mkdtemp(prefix="ollama-replay-", dir=args.work))
    results = []
    try:
        for commit in args.bump or DEFAULT_BUMPS:
            full = out(mirror, "rev-parse", f"{commit}^{{commit}}")
            print(f"bump {commit}:", flush=True)
            try:
                results.append(replay(mirror, full, work / full[:9], args.repeat))
            except RuntimeError as error:
                print(f"  failed: {error}", flush=True)
                continue
            print(summary(results[-1]), flush=True)
            if not args.keep:
                shutil.rmtree(work / full[:9])
            if args.json:
                args.json.write_text(json.dumps([asdict(r) for r in results], indent=1, ensure_ascii=False))
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    if results:
        print(per_bump_table(results))
    start = startup()
    commands = sum(len(r.patchctl_rounds) for r in results)
    print(f"starting patchctl (pin-sync's imports): {start:.2f} s; {commands} commands: {commands * start:.1f} s")
    ours = sum(r.patchctl_seconds for r in results)
    theirs = sum(r.recipe_seconds for r in results)
    waited = sum(r.waiting_seconds for r in results)
    if results:
        print(f"all {len(results)} bumps: patchctl {ours:.1f} s, recipe {theirs:.1f} s, ratio {ours / theirs:.2f}x")
        print(f"all {len(results)} bumps with pin-sync --wait: {waited:.1f} s, ratio {waited / theirs:.2f}x; "
              f"the same series: {sum(r.waiting_same_series for r in results)} of {len(results)}")  # fmt: skip
        cpu = {f: sum(getattr(r, f) for r in results) for f in ("patchctl_cpu", "waiting_cpu", "recipe_cpu")}
        print(f"CPU seconds, all {len(results)} bumps: a run per stop {cpu['patchctl_cpu']:.1f} "
              f"({cpu['patchctl_cpu'] / cpu['recipe_cpu']:.2f}x), --wait {cpu['waiting_cpu']:.1f} "
              f"({cpu['waiting_cpu'] / cpu['recipe_cpu']:.2f}x), recipe {cpu['recipe_cpu']:.1f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
