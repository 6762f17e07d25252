"""What the engine's command-line entry points share: argument types, the Triton switch,
warning output and a progress display for long runs (on stderr, so stdout stays clean)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

EXIT_OK = 0
EXIT_FAILED = 1  # a check or a benchmark found a mismatch
EXIT_BAD_INPUT = 2  # bad arguments, an unusable model file or an impossible configuration
EXIT_NO_DEVICE = 3  # the requested device (CUDA) is not available
LONG_RUN_TOKENS = 256  # runs that generate at least this many tokens show progress


def _int_at_least(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        return value

    return parse


positive_int = _int_at_least(1)
non_negative_int = _int_at_least(0)


def torch_device(text: str) -> str:
    """A device string torch understands ("cpu", "cuda", "cuda:1"); whether it is present is checked later."""
    import torch

    try:
        torch.device(text)
    except (RuntimeError, ValueError):
        raise argparse.ArgumentTypeError(f"not a torch device: {text!r} (for example cpu, cuda, cuda:0)") from None
    return text


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
