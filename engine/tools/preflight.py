"""`python -m engine preflight`: which torch the engine got, said in one line before the main job.

    python -m engine preflight        e.g. "engine: torch 2.13.0+cpu (the CPU build), triton 3.9.0, no GPU: ..."

PyPI's Linux wheel of torch is the CUDA build, which pulls in about 3 GB of NVIDIA wheels; the
README installs from PyTorch's CPU index beside PyPI so that `torch==X` resolves to `X+cpu`.
Where that index cannot be reached, pip takes PyPI's wheel without a word. On a machine with no
GPU the CUDA build runs everything the CPU build does (the kernels in Triton's interpreter), so
nothing fails: this preflight is what says so, with a warning line and how to get the CPU build.

Exit codes: 0 (a warning too: the engine works), 1 when torch cannot be imported at all.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from dataclasses import dataclass

from engine.tools.common import ArgumentParser, parse_args

CPU_INDEX = "https://download.pytorch.org/whl/cpu"


@dataclass(frozen=True)
class TorchBuild:
    version: str  # torch.__version__, its local label included ("2.13.0+cpu")
    cuda: str | None  # torch.version.cuda: the CUDA the build targets, None for the CPU build
    hip: str | None  # torch.version.hip: a ROCm build
    gpu: str | None  # the first GPU torch can use, None when it finds none
    triton: str | None  # triton.__version__, None when triton is not installed


def describe(build: TorchBuild) -> tuple[str, str | None]:
    """The line saying which torch the engine has, and a warning line when it is a GPU build on
    a machine without a GPU (its gigabytes of GPU libraries buy nothing there)."""
    if build.cuda:
        kind = f"the CUDA {build.cuda} build"
    elif build.hip:
        kind = f"the ROCm {build.hip} build"
    else:
        kind = "the CPU build"
    triton = f"triton {build.triton}" if build.triton else "no triton"
    where = f"GPU: {build.gpu}" if build.gpu else "no GPU: the Triton kernels run in Triton's interpreter"
    line = f"engine: torch {build.version} ({kind}), {triton}, {where}"
    if build.gpu or not (build.cuda or build.hip):
        return line, None
    release = build.version.split("+", 1)[0]
    warning = (
        f"engine: warning: torch {build.version} is {kind} (gigabytes of GPU libraries) on a machine with no GPU; "
        f"the CPU build does the same here: python -m pip install --force-reinstall --no-deps "
        f"'torch=={release}' --index-url {CPU_INDEX} (or a new virtual environment with "
        f"PIP_EXTRA_INDEX_URL={CPU_INDEX}, as the README installs it)"
    )
    return line, warning


def installed() -> TorchBuild | None:
    """What this interpreter has (None: torch cannot be imported)."""
    try:
        import torch
    except ImportError:
        return None
    gpu = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a CUDA build without a driver warns as it looks
        if torch.cuda.is_available() and torch.cuda.device_count() > 0:
            gpu = torch.cuda.get_device_name(0)
    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    return TorchBuild(torch.__version__, torch.version.cuda, getattr(torch.version, "hip", None), gpu, triton_version)


def _parser() -> argparse.ArgumentParser:
    return ArgumentParser(
        prog="python -m engine preflight",
        description="Say which torch the engine has (CPU, CUDA or ROCm build, and the GPU it sees); warn in one "
        "line when a GPU build sits on a machine without a GPU, with how to get the CPU build.",
        epilog="Exit codes: 0 ok (a warning too), 1 torch cannot be imported.",
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(_parser(), argv)
    if isinstance(args, int):
        return args
    build = installed()
    if build is None:
        print(
            "engine: torch cannot be imported: install the engine extra (python -m pip install -e '.[engine]')",
            file=sys.stderr,
        )
        return 1
    line, warning = describe(build)
    print(line)
    if warning:
        print(warning, file=sys.stderr)
    return 0
