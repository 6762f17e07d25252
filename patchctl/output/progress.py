"""Progress of long work, reported by the command line and nowhere else.

Domain modules never print. They wrap work that can take more than a couple of seconds in
`step("downloading llama-cpp-python 0.3.30")` and pass lines of output (a build's last line)
to `note(line)`. Both do nothing unless the CLI installed a reporter (`installed`):

* on a terminal, one live line on stderr: the step, its elapsed time and the last note,
  redrawn in place and cleared when the step ends;
* elsewhere (CI logs, pipes), a timestamped line when a step starts, a heartbeat line at
  least once a minute while it runs (the steps, the elapsed time and the last note) and one
  when it ends after a second or more (or fails), so a log never goes quiet for long.

A step that writes a log (`step(title, tail=log)`: a gate, a build) names it where it starts
and in every line that shows it running, and a build's progress lines, ninja's `[12/340] ...` or
the `[ 35%] ...` of CMake's Makefiles, whether noted or last in its log, show as how far it has
come: `compiling 12/340 (3%): Building CXX object ...`.

`-q/--quiet` (or $PATCHCTL_QUIET=1) installs no reporter. $PATCHCTL_PROGRESS_INTERVAL sets
the heartbeat interval in seconds (default 60).
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from ..patterns import lazy
from ..records import dataclass
from .escape import log_line

QUIET_ENV = "PATCHCTL_QUIET"
INTERVAL_ENV = "PATCHCTL_PROGRESS_INTERVAL"
DEFAULT_INTERVAL_S = 60.0
_TERMINAL_REDRAW_S = 0.25
# Off a terminal, a step that ends sooner than this gets no "done" line (its start line stands).
QUIET_FINISH_S = 1.0


def elapsed_text(seconds: float) -> str:
    """12.3s under a minute, 2m05s above."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s"


_CONTROL = lazy(r"\x1b\[[0-9;?]*[A-Za-z]|[\x00-\x08\x0b-\x1f\x7f]")


def printable(line: str) -> str:
    """LINE without terminal escapes and control characters (a build's colours, its \\r)."""
    return _CONTROL.sub("", line).strip()


def tail_lines(path: Path) -> list[str]:
    """The non-empty lines of PATH's last 4 KiB, printable; [] when it cannot be read."""
    try:
        # Never blocking (a FIFO planted at a log path), never through a last link: the log a
        # gate or build writes was made so by `confined.Root.open_log` already.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return []
            handle.seek(max(0, handle.seek(0, os.SEEK_END) - 4096))
            tail = handle.read(4096).decode("utf-8", errors="replace")
    except OSError:
        return []
    return [printable(line) for line in tail.replace("\r", "\n").splitlines() if printable(line)]


def last_line(path: Path) -> str:
    """The last non-empty line of PATH (its last 4 KiB), "" when there is none."""
    lines = tail_lines(path)
    return lines[-1][:200] if lines else ""


# ninja's status line (`[12/340] Building CXX object ...`) and CMake's Makefiles' (`[ 35%] Building ...`).
_NINJA_STATUS_RE = lazy(r"^\[(\d+)/(\d+)\]\s*")
_MAKE_STATUS_RE = lazy(r"^\[\s*(\d{1,3})%\]\s*")


@dataclass(frozen=True)
class BuildProgress:
    """How far a build has come, read from one of its status lines."""

    done: int
    total: int | None  # None: the build says a percentage only (make)
    percent: int

    @property
    def finished(self) -> bool:
        return self.percent >= 100

    def describe(self) -> str:
        if self.total is not None:
            return f"compiling {self.done}/{self.total} ({self.percent}%)"
        return f"compiling ({self.percent}%)"


def build_progress(line: str) -> tuple[BuildProgress, str] | None:
    """LINE read as a build's status line: how far it has come and what it is doing (the rest
    of the line); None for any other line."""
    if m := _NINJA_STATUS_RE.match(line):
        done, total = int(m[1]), int(m[2])
        if total == 0 or done > total:
            return None
        return BuildProgress(done, total, done * 100 // total), line[m.end() :]
    if m := _MAKE_STATUS_RE.match(line):
        percent = int(m[1])
        return (BuildProgress(percent, None, percent), line[m.end() :]) if percent <= 100 else None
    return None


def shown_path(path: Path) -> str:
    """PATH as a user can open it from here: relative to the working directory when under it."""
    try:
        return Path(path).resolve().relative_to(Path.cwd().resolve()).as_posix()
    except (OSError, ValueError):
        return str(path)


class Reporter:
    """Shows the stack of running steps. Thread-safe: builds note from reader threads."""

    def __init__(self, stream: TextIO, *, live: bool, interval_s: float = DEFAULT_INTERVAL_S):
        self.stream = stream
        self.live = live
        self.interval_s = interval_s if not live else _TERMINAL_REDRAW_S
        self._lock = threading.Lock()
        self._steps: list[tuple[str, float, Path | None]] = []  # title, start, a log it writes
        self._last_note = ""
        self._progress: BuildProgress | None = None  # the last status line a build noted
        self._shown = False  # a live line is on screen
        self._drawn_at = 0.0
        self._wake = threading.Event()
        self._stop = False
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ the API of steps

    def start(self, title: str, tail: Path | None = None) -> None:
        with self._lock:
            self._steps.append((title, time.monotonic(), tail))
            self._last_note, self._progress = "", None
            if self.live:
                self._draw_locked()
            else:
                self._log_locked(title + (f" (log: {shown_path(tail)})" if tail is not None else ""))
        self._ensure_thread()

    def finish(self, title: str, ok: bool) -> None:
        with self._lock:
            index = max((i for i, (t, _, _) in enumerate(self._steps) if t == title), default=None)
            if index is None:
                return
            started = self._steps[index][1]
            del self._steps[index:]
            self._last_note, self._progress = "", None
            if self.live:
                if self._steps:
                    self._draw_locked()
                else:
                    self._clear_locked()
            elif not ok or time.monotonic() - started >= QUIET_FINISH_S:
                word = "done" if ok else "failed"
                self._log_locked(f"{title}: {word} in {elapsed_text(time.monotonic() - started)}")

    def note(self, line: str) -> None:
        line = printable(line)
        if not line:
            return
        with self._lock:
            if (status := build_progress(line)) is not None:
                self._progress, line = status
            self._last_note = line
            # A build can print thousands of lines a second: redraw at most every 0.1 s (the
            # heartbeat thread draws the latest soon after anyway).
            if self.live and self._steps and time.monotonic() - self._drawn_at >= 0.1:
                self._draw_locked()

    def announce(self, line: str) -> None:
        """A milestone: logged off a terminal; on one, the running step's note, or the line itself."""
        with self._lock:
            if not self.live:
                self._log_locked(line)
            elif self._steps:
                self._last_note = line
                self._draw_locked()
            else:
                self._write_locked("\r\x1b[K" + line[:150])
                self._shown = True

    def clear(self) -> None:
        """Take the live line off the screen (before other output) and stop the heartbeat."""
        with self._lock:
            self._stop = True
            self._clear_locked()
        self._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=2)

    # ------------------------------------------------------------------ drawing

    def _path_locked(self) -> str:
        return " > ".join(title for title, _, _ in self._steps)

    def _status_locked(self) -> str:
        started = self._steps[0][1]
        tail = self._steps[-1][2]
        log = f"; log: {shown_path(tail)}" if tail is not None else ""
        text = f"{self._path_locked()} ({elapsed_text(time.monotonic() - started)}{log})"
        note, status = self._last_note, self._progress
        if not note and tail is not None:
            lines = tail_lines(tail)
            note = lines[-1][:200] if lines else ""
            # the log's last status line: how far a build that writes its log rather than noting it has come
            status = next((found[0] for line in reversed(lines) if (found := build_progress(line))), None)
            if (last := build_progress(note)) is not None:
                note = last[1]
        parts = ([status.describe()] if status is not None and not status.finished else []) + ([note] if note else [])
        return text + (": " + ": ".join(parts) if parts else "")

    def _draw_locked(self) -> None:
        if not self._steps:
            return
        width = 150
        with contextlib.suppress(OSError, ValueError):
            columns = os.get_terminal_size(self.stream.fileno()).columns
            width = max(40, columns - 1) if columns > 0 else width  # a fresh pty says 0
        self._write_locked("\r\x1b[K" + self._status_locked()[:width])
        self._shown = True
        self._drawn_at = time.monotonic()

    def _clear_locked(self) -> None:
        if self._shown:
            self._write_locked("\r\x1b[K")
            self._shown = False

    def _log_locked(self, text: str) -> None:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self._write_locked(log_line(f"[{stamp}] patchctl: {text}") + "\n")  # a name in TEXT stays on its line

    def _write_locked(self, text: str) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.stream.write(text)
            self.stream.flush()

    # ------------------------------------------------------------------ the heartbeat

    def _ensure_thread(self) -> None:
        with self._lock:
            if self._thread is not None or self._stop:
                return
            self._thread = threading.Thread(target=self._beat, name="patchctl-progress", daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        while not self._wake.wait(self.interval_s):
            with self._lock:
                if self._stop:
                    return
                if not self._steps:
                    continue
                if self.live:
                    self._draw_locked()
                else:
                    self._log_locked(f"still {self._status_locked()}")


_reporter: Reporter | None = None


@contextlib.contextmanager
def step(title: str, tail: Path | None = None) -> Iterator[None]:
    """Report TITLE as running for the duration of the block (nothing without a reporter).
    TAIL: a log the step writes; its last line shows when nothing was noted."""
    reporter = _reporter
    if reporter is None:
        yield
        return
    reporter.start(title, tail)
    ok = False
    try:
        yield
        ok = True
    finally:
        reporter.finish(title, ok)


def say(line: str) -> None:
    """LINE as a milestone of the running work: a timestamped log line off a terminal, the
    live line's tail on one (the `progress` callback pin-sync and canary take)."""
    reporter = _reporter
    if reporter is not None and printable(line):
        reporter.announce(printable(line))


def note(line: str) -> None:
    """LINE as the latest output of the running step (a build's last line)."""
    if _reporter is not None:
        _reporter.note(line)


def quiet_from_env() -> bool:
    return os.environ.get(QUIET_ENV, "").strip().lower() not in ("", "0", "false", "no")


def _interval() -> float:
    raw = os.environ.get(INTERVAL_ENV, "").strip()
    try:
        return max(0.05, float(raw)) if raw else DEFAULT_INTERVAL_S
    except ValueError:
        return DEFAULT_INTERVAL_S


def install(stream: TextIO) -> Reporter:
    """Report progress on STREAM from now on: live on a terminal, timestamped lines elsewhere."""
    global _reporter
    isatty = getattr(stream, "isatty", None)
    live = bool(isatty and isatty()) and os.environ.get("TERM") != "dumb"
    _reporter = Reporter(stream, live=live, interval_s=_interval())
    return _reporter


def uninstall() -> None:
    global _reporter
    reporter, _reporter = _reporter, None
    if reporter is not None:
        reporter.clear()


def clear_line() -> None:
    """Take a live progress line off the terminal before printing something else."""
    if _reporter is not None and _reporter.live:
        with _reporter._lock:
            _reporter._clear_locked()
