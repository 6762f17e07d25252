"""A persistent, incremental CMake build of the targets the model gate needs.

A full llama.cpp build takes many minutes on two cores, so the build outlives the run: it
lives under the cache (`$PATCHCTL_CACHE` or `~/.cache/patchctl`, then `llama-build/KEY`), KEY
being the upstream revision plus a digest of the compiler, ccache and the CMake options.
CMake binds a build directory to one source directory, so the tree being built (the applied
tree, a pin-sync tree, a tampered copy in a test) is first mirrored into `KEY/src`: only files
whose bytes differ are rewritten, so their timestamps tell ninja exactly what changed. A run
with nothing changed only checks timestamps; a changed file (an edited patch, a tampered port)
recompiles that file and relinks. ccache is used when it is installed. A lock file serialises
runs that share a directory.

The build's output goes to its log (by default `KEY/build.log`, beside the build, so that it
outlives the run) and a cold build takes minutes: an optional PROGRESS callback hears that it
is configuring or compiling, how far it has come (from ninja's `[12/340]` or make's `[ 35%]`
status lines, at every 5% and at least every 30 s) and where the log is.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

Progress = Callable[[str], None]

CMAKE_OPTIONS: tuple[str, ...] = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DGGML_NATIVE=OFF",
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_BUILD_TESTS=ON",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_TOOLS=OFF",
    "-DLLAMA_BUILD_SERVER=OFF",
    "-DLLAMA_BUILD_APP=OFF",
)


class BuildError(RuntimeError):
    """The build could not run or failed; the message names the step and the log."""


@dataclass(frozen=True)
class BuildResult:
    build_dir: Path
    seconds: float
    configured: bool  # False when an existing build directory was reused


def cache_root() -> Path:
    return Path(os.environ.get("PATCHCTL_CACHE") or Path.home() / ".cache" / "patchctl")


def compiler_identity(compiler: str) -> str:
    """The first line of `COMPILER --version` (a different compiler needs a different build)."""
    try:
        done = subprocess.run([compiler, "--version"], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        raise BuildError(f"no usable C++ compiler {compiler!r}: {exc}") from None
    return done.stdout.splitlines()[0].strip() if done.stdout else compiler


def build_key(upstream_rev: str, compiler: str, ccache: str | None, generator: str = "Ninja") -> str:
    material = "\n".join([compiler, ccache or "", generator, *CMAKE_OPTIONS])
    return f"{upstream_rev[:12] or 'unknown'}-{hashlib.sha256(material.encode()).hexdigest()[:16]}"


def build_targets(
    tree: Path,
    targets: list[str],
    upstream_rev: str,
    log_path: Path | None = None,
    jobs: int = 2,
    progress: Progress | None = None,
) -> BuildResult:
    """Configure (once) and build `targets` of the llama.cpp tree; raises BuildError. The output
    goes to LOG_PATH (appended; default: `build.log` beside the build, rewritten each run)."""
    if not (tree / ".git").exists():
        raise BuildError(f"{tree} is not a git work tree (run `patchctl apply` to make one)")
    cmake = shutil.which("cmake")
    if cmake is None:
        raise BuildError("cmake is not installed")
    compiler = os.environ.get("CXX") or "c++"
    ccache = shutil.which("ccache")
    generator = "Ninja" if shutil.which("ninja") else "Unix Makefiles"
    root = cache_root() / "llama-build" / build_key(upstream_rev, compiler_identity(compiler), ccache, generator)
    source_dir, build_dir = root / "src", root / "build"
    configure = [cmake, "-S", str(source_dir), "-B", str(build_dir), "-G", generator, *CMAKE_OPTIONS]
    if ccache:
        configure += [f"-DCMAKE_C_COMPILER_LAUNCHER={ccache}", f"-DCMAKE_CXX_COMPILER_LAUNCHER={ccache}"]
    start = time.monotonic()
    root.mkdir(parents=True, exist_ok=True)
    say = progress or (lambda _line: None)
    what = ", ".join(targets)
    with open(root / "lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if log_path is None:
            log_path = root / "build.log"
            log_path.unlink(missing_ok=True)  # this run's output only
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "ab") as log:
            mirror_tree(tree, source_dir)
            # a configure cut short leaves a cache without build files: configure again
            generated = (build_dir / "CMakeCache.txt").is_file() and any(
                (build_dir / name).is_file() for name in ("build.ninja", "Makefile")
            )
            configured = not generated
            if configured:
                say(f"configuring the build of {what} (cmake; log: {log_path})")
                _run(configure, log, log_path, "cmake configure")
            say(f"compiling {what} (log: {log_path})")
            build = [cmake, "--build", str(build_dir), "-j", str(jobs), "--target", *targets]
            _run(build, log, log_path, "cmake build", _Reporter(f"compiling {what}", log_path, say))
    return BuildResult(build_dir, time.monotonic() - start, configured)


# ninja's status line (`[12/340] Building CXX object ...`) and CMake's Makefiles' (`[ 35%] Building ...`).
_NINJA_STATUS_RE = re.compile(rb"^\[(\d+)/(\d+)\]")
_MAKE_STATUS_RE = re.compile(rb"^\[\s*(\d{1,3})%\]")
REPORT_EVERY_PERCENT = 5
REPORT_EVERY_S = 30.0


ESTIMATE_AFTER_S = 20.0  # an estimate from less than this (or less than 5% done) says nothing


class _Reporter:
    """Turns a build's status lines into a line now and then: at every REPORT_EVERY_PERCENT and
    at least every REPORT_EVERY_S seconds while the build moves; once the build has run a while,
    with an estimate of what is left at the pace so far (a cold libllama build takes minutes on
    an idle machine and far more under load: the estimate follows the machine it runs on)."""

    def __init__(self, what: str, log_path: Path, say: Progress, clock: Callable[[], float] = time.monotonic):
        self.what, self.log_path, self.say, self.clock = what, log_path, say, clock
        self.reported_percent = -REPORT_EVERY_PERCENT
        self.started_at = self.reported_at = clock()

    def line(self, line: bytes) -> None:
        if m := _NINJA_STATUS_RE.match(line):
            done, total = int(m[1]), int(m[2])
            if total <= 0 or done > total:
                return
            fraction, count = done / total, f"[{done}/{total}] "
        elif m := _MAKE_STATUS_RE.match(line):
            fraction, count = min(int(m[1]), 100) / 100, ""
        else:
            return
        percent = int(fraction * 100)
        now = self.clock()
        if percent >= self.reported_percent + REPORT_EVERY_PERCENT or now - self.reported_at >= REPORT_EVERY_S:
            self.reported_percent, self.reported_at = percent - percent % REPORT_EVERY_PERCENT, now
            self.say(f"{self.what}: {count}{percent}%{self._estimate(fraction, now)} (log: {self.log_path})")

    def _estimate(self, fraction: float, now: float) -> str:
        elapsed = now - self.started_at
        if elapsed < ESTIMATE_AFTER_S or fraction < 0.05 or fraction >= 1:
            return ""
        minutes = max(1, round(elapsed * (1 - fraction) / fraction / 60))
        return f", about {minutes} min left at this pace"


def _run(command: list[str], log: BinaryIO, log_path: Path, step: str, reporter: _Reporter | None = None) -> None:
    log.write(("$ " + " ".join(command) + "\n").encode())
    log.flush()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert process.stdout is not None
    for line in process.stdout:  # to the log as it comes; the status lines to the reporter
        log.write(line)
        log.flush()
        if reporter is not None:
            reporter.line(line)
    returncode = process.wait()
    if returncode != 0:
        raise BuildError(f"{step} failed (exit {returncode}); see {log_path}")


# The tree may come from anywhere: git reads no config of the machine (a global excludes file
# would change what is built) and runs nothing of the repository's config. patchctl's git.py
# does the same for every call of its own; the engine imports nothing of patchctl's.
_GIT_HARDENED = (
    "--no-pager",
    *("-c", "core.hooksPath=/dev/null"),
    *("-c", "core.fsmonitor=false"),
    *("-c", "safe.bareRepository=explicit"),
)
_GIT_ENV = {
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_NO_LAZY_FETCH": "1",
    "GIT_ALLOW_PROTOCOL": "",  # ls-files fetches nothing
}


def tree_files(tree: Path) -> list[str]:
    """The tree's files as git sees them: tracked and untracked, minus what .gitignore ignores."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")} | _GIT_ENV
    try:
        done = subprocess.run(
            ["git", *_GIT_HARDENED, "-C", str(tree), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            capture_output=True,
            check=True,
            env=env,
        )
    except (OSError, subprocess.CalledProcessError) as exc:
        raise BuildError(f"cannot list the files of {tree} (not a git work tree?): {exc}") from None
    return sorted({name for name in done.stdout.decode().split("\0") if name})


def mirror_tree(tree: Path, mirror: Path) -> int:
    """Make `mirror` hold exactly the tree's files; returns how many files were (re)written.

    A file whose bytes are unchanged keeps its timestamp, so ninja rebuilds only what differs.
    """
    wanted = tree_files(tree)
    written = 0
    for name in wanted:
        source, target = tree / name, mirror / name
        if not source.is_file() or source.is_symlink():
            continue  # deleted in the work tree but still in the index, or a link (none are sources)
        data = source.read_bytes()
        if target.is_file() and not target.is_symlink() and target.read_bytes() == data:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = target.with_name(f".{target.name}.mirror-tmp")
        staging.write_bytes(data)
        staging.chmod(source.stat().st_mode & 0o777)
        os.replace(staging, target)
        written += 1
    keep = set(wanted)
    for path in sorted(mirror.rglob("*"), reverse=True):
        relative = path.relative_to(mirror).as_posix()
        if path.is_dir() and not path.is_symlink():
            if not any(path.iterdir()):
                path.rmdir()
        elif relative not in keep:
            path.unlink()
    return written
