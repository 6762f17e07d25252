"""patchctl.beside: work on threads beside the main one, as patchctl asks it of them (a seed
beside a checkout, a stop's cause beside the report, hunks merged two at a time)."""

from __future__ import annotations

import threading
import time

import pytest

from patchctl.beside import Beside, each_beside


def test_a_result_is_what_the_work_returned_or_raised() -> None:
    assert Beside(lambda a, b: a + b, 2, 3).result() == 5
    failing = Beside(int, "not a number")
    with pytest.raises(ValueError, match="not a number"):
        failing.result()
    assert isinstance(failing.exception(), ValueError)
    assert Beside(str, 1).exception() is None


def test_work_after_another_starts_when_it_ends_whatever_it_ended_with() -> None:
    order: list[str] = []
    release = threading.Event()

    def first() -> None:
        release.wait(5)
        order.append("first")
        raise RuntimeError("the first failed")

    earlier = Beside(first)
    later = Beside(order.append, "second", after=earlier)
    time.sleep(0.05)
    assert order == []  # the second waits for the first
    release.set()
    assert later.result() is None
    assert order == ["first", "second"]
    with pytest.raises(RuntimeError, match="the first failed"):
        earlier.result()


def test_work_cancelled_before_it_starts_never_runs() -> None:
    ran: list[str] = []
    release = threading.Event()
    earlier = Beside(release.wait, 5)
    later = Beside(ran.append, "later", after=earlier)
    assert earlier.cancel() is False  # running: it cannot be
    assert later.cancel() is True
    release.set()
    assert later.exception() is None and earlier.result() is True
    assert ran == []
    with pytest.raises(RuntimeError, match="cancelled"):
        later.result()


def test_each_beside_keeps_the_order_and_runs_at_most_so_many_at_once() -> None:
    running, most = [0], [0]
    lock = threading.Lock()

    def square(n: int) -> int:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.01 * (n % 3))
        with lock:
            running[0] -= 1
        return n * n

    assert each_beside(square, range(12), at_once=2) == [n * n for n in range(12)]
    assert most[0] == 2
    assert each_beside(square, [], at_once=2) == []


def test_each_beside_raises_the_first_error_in_order_once_all_have_run() -> None:
    done: list[int] = []

    def check(n: int) -> int:
        time.sleep(0.02 if n == 1 else 0)
        done.append(n)
        if n in (1, 3):
            raise ValueError(f"item {n}")
        return n

    with pytest.raises(ValueError, match="item 1"):
        each_beside(check, range(6), at_once=2)
    assert sorted(done) == list(range(6))
