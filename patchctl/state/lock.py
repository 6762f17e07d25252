"""The per-project lock: one writing patchctl run at a time in a repository.

`lock` in the repository's state directory (`.git/patchctl/lock`, see `patchctl.state.statehome`)
is held with flock(2) for the whole of a writing command, so the kernel
releases it when the process ends however it ends: a killed run never leaves a stale
lock. The holder writes its pid and command into the file so that a refused run can say
who holds it. A second run waits a bounded time ($PATCHCTL_LOCK_TIMEOUT seconds, default
10), then refuses with exit 3.
"""

from __future__ import annotations

import fcntl
import os
import time
from dataclasses import field
from pathlib import Path

from ..confined import Refused
from ..errors import EnvironmentFailure, UsageError
from ..records import dataclass
from . import statehome, worktree

LOCK_NAME = "lock"
TIMEOUT_ENV = "PATCHCTL_LOCK_TIMEOUT"
DEFAULT_TIMEOUT_S = 10.0
_POLL_S = 0.05


def lock_timeout(env: dict[str, str] | None = None) -> float:
    """How long a run waits for the lock: $PATCHCTL_LOCK_TIMEOUT seconds, else the default."""
    value = (os.environ if env is None else env).get(TIMEOUT_ENV, "").strip()
    if not value:
        return DEFAULT_TIMEOUT_S
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not seconds >= 0:  # also refuses nan
        raise UsageError(f"${TIMEOUT_ENV}: expected a number of seconds, got {value!r}")
    return seconds


@dataclass
class ProjectLock:
    root: Path
    command: str
    timeout_s: float = DEFAULT_TIMEOUT_S
    _fd: int | None = field(default=None, repr=False)

    @property
    def path(self) -> Path:
        return statehome.home(self.root) / LOCK_NAME

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        """Take the lock, waiting up to timeout_s; raises EnvironmentFailure naming the holder."""
        if self._fd is not None:
            return
        statehome.ensure(self.root)  # a file or a symlink where the state directory belongs: one line
        # A directory, a FIFO, a device or a symlink where the lock belongs: one line, never opened.
        worktree.check_state_path(self.root, self.path, "lock")
        try:
            fd = statehome.state_root(self.root).open_shared(LOCK_NAME)
        except Refused:  # swapped for something else since the check
            raise EnvironmentFailure(worktree.unexpected_state(self.root, self.path, "lock", "special file")) from None
        except OSError as exc:
            raise EnvironmentFailure(f"cannot open the lock {self.path}: {exc.strerror}") from None
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    raise EnvironmentFailure(self._refusal()) from None
                time.sleep(_POLL_S)
            except OSError as exc:
                os.close(fd)
                raise EnvironmentFailure(f"cannot lock {self.path}: {exc.strerror}") from None
        import json  # (here: a read-only command takes no lock and reads no JSON; start-up)

        holder = json.dumps({"pid": os.getpid(), "command": self.command}) + "\n"
        os.ftruncate(fd, 0)
        os.pwrite(fd, holder.encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)  # closing the only descriptor drops the flock

    def __enter__(self) -> ProjectLock:
        self.acquire()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.release()

    def _refusal(self) -> str:
        import json

        try:
            holder = json.loads(worktree.read_state(self.root, self.path, "lock") or "{}")
            pid, command = holder.get("pid", "?"), holder.get("command", "?")
        except (OSError, ValueError, AttributeError, EnvironmentFailure):
            pid, command = "?", "?"
        where = statehome.display(self.root, self.path)
        return (
            f"another patchctl run holds {where} (pid {pid}, command {command}); "
            f"waited {self.timeout_s:g} s (${TIMEOUT_ENV}); try again when it has finished"
        )
