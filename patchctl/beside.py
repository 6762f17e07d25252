"""Work run on a thread beside the main one: git processes that may run on the other core while
patchctl does something else (a seed beside a checkout, a stop's cause beside the report).

`concurrent.futures` would do, but importing it imports `logging` (and with it `string`,
`textwrap` and `traceback`): about 5 ms of every `pin-sync --continue`, paid again at every stop.
Only what patchctl asks of it is here: a call started now (`Beside`), one started when another
ends (`after=`), and a list of calls run a few at a time (`each_beside`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class Beside(Generic[T]):
    """WORK(*ARGS) on a thread of its own, started at once, or when AFTER has ended (whatever it
    ended with). `result()` waits for it and returns what it returned or raises what it raised.
    The thread is not a daemon: Python waits for it before it exits, as for any work begun."""

    def __init__(self, work: Callable[..., T], *args: object, after: Beside | None = None):
        self._work, self._args, self._after = work, args, after
        self._value: T | None = None
        self._error: BaseException | None = None
        self._state = "waiting"  # then "running", or "cancelled" (it never starts)
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=f"patchctl-beside-{getattr(work, '__name__', 'work')}")
        self._thread.start()

    def _run(self) -> None:
        if self._after is not None:
            self._after._thread.join()
        with self._lock:
            if self._state == "cancelled":
                return
            self._state = "running"
        try:
            self._value = self._work(*self._args)
        except BaseException as error:  # raised again where the result is asked for
            self._error = error

    def cancel(self) -> bool:
        """Keep the work from starting, if it has not: whether it will not run."""
        with self._lock:
            if self._state == "running":
                return False
            self._state = "cancelled"
            return True

    def exception(self) -> BaseException | None:
        """Wait for the work to end (or to be cancelled); what it raised, or None."""
        self._thread.join()
        return self._error

    def result(self) -> T:
        """Wait for the work to end; what it returned, or raise what it raised. A cancelled call
        has no result: asking for one is a bug (RuntimeError)."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        if self._state == "cancelled":
            raise RuntimeError("the work was cancelled before it started")
        return self._value  # type: ignore[return-value]


def each_beside(work: Callable[[R], T], items: Sequence[R], *, at_once: int) -> list[T]:
    """WORK(item) for each of ITEMS, AT_ONCE of them running at a time, their results in ITEMS'
    order; the first error (in that order) is raised once all have ended."""
    results: list[tuple[bool, object]] = [(False, None)] * len(items)
    upcoming = iter(range(len(items)))
    taking = threading.Lock()

    def run() -> None:
        while True:
            with taking:
                index = next(upcoming, None)
            if index is None:
                return
            try:
                results[index] = (True, work(items[index]))
            except BaseException as error:
                results[index] = (False, error)

    threads = [Beside(run) for _ in range(max(1, min(at_once, len(items))))]
    for thread in threads:
        thread.result()
    for ok, value in results:
        if not ok:
            raise value  # type: ignore[misc]
    return [value for _, value in results]  # type: ignore[misc]
