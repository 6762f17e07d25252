"""What the engine's command-line entry points share: argument types, the Triton switch,
warning output and a progress display for long runs (on stderr, so stdout stays clean)."""

from __future__ import annotations

import argparse
import logging
import math
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import NoReturn

EXIT_OK = 0
EXIT_FAILED = 1  # a check or a benchmark found a mismatch
EXIT_BAD_INPUT = 2  # bad arguments, an unusable model file or an impossible configuration
EXIT_NO_DEVICE = 3  # the requested device (CUDA) is not available
LONG_RUN_TOKENS = 256  # runs that generate at least this many tokens show progress


def int_in(minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    """An argparse type: an integer >= MINIMUM (and <= MAXIMUM when given)."""
    wanted = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum or (maximum is not None and value > maximum):
            raise argparse.ArgumentTypeError(f"must be {wanted}, got {value}")
        return value

    return parse


positive_int = int_in(1)
non_negative_int = int_in(0)


def finite_float(minimum: float, maximum: float | None = None, above_minimum: bool = False) -> Callable[[str], float]:
    """An argparse type: a finite number >= MINIMUM (> with ABOVE_MINIMUM) and <= MAXIMUM when given.
    float() takes "nan" and "inf", and NaN passes every comparison with a bound, so finiteness comes first."""
    low = f"({minimum}" if above_minimum else f"[{minimum}"
    wanted = f"in {low}, {maximum}]" if maximum is not None else f"{'>' if above_minimum else '>='} {minimum}"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        too_low = value <= minimum if above_minimum else value < minimum
        if not math.isfinite(value) or too_low or (maximum is not None and value > maximum):
            raise argparse.ArgumentTypeError(f"must be a finite number {wanted}, got {text}")
        return value

    return parse


def torch_device(text: str) -> str:
    """A device string torch understands ("cpu", "cuda", "cuda:1"); whether it is present is checked later."""
    import torch

    try:
        torch.device(text)
    except (RuntimeError, ValueError):
        raise argparse.ArgumentTypeError(f"not a torch device: {text!r} (for example cpu, cuda, cuda:0)") from None
    return text


class ArgumentParser(argparse.ArgumentParser):
    """argparse with a usage error in one line (`engine CMD: error: ...`), exit 2, as every other engine error."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"{self.prog.removeprefix('python -m ')}: error: {message}\n")


def parse_args(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace | int:
    """Parsed arguments, or the exit code argparse chose (help: 0, usage error: 2)."""
    try:
        return parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


def prepare_triton(backend: str, device: str) -> None:
    """Triton without CUDA runs interpreted, and that must be chosen before triton is imported."""
    if backend == "triton" and not device.startswith("cuda") and "triton" not in sys.modules:
        os.environ.setdefault("TRITON_INTERPRET", "1")


def show_warnings_on_stderr(prog: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(f"{prog}: warning: %(message)s"))
    log = logging.getLogger("engine")
    log.handlers[:] = [handler]
    log.setLevel(logging.WARNING)
    log.propagate = False


@contextmanager
def progress_display(description: str, total: int) -> Iterator[Callable[[int, int], None] | None]:
    """A rich progress bar on stderr for long runs; None (no display) for short ones."""
    if total < LONG_RUN_TOKENS:
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as bar:
        task = bar.add_task(description, total=total)

        def update(done: int, wanted: int) -> None:
            bar.update(task, completed=done, total=wanted)

        yield update
