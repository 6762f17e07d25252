"""`python -m engine preflight`: the main job says which torch it got, and warns in one line when
a GPU build sits on a machine without a GPU (issue 45, item 2: no silent CUDA)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

import torch

from engine.tools.preflight import CPU_INDEX, TorchBuild, describe

NO_GPU = "no GPU: the Triton kernels run in Triton's interpreter"


def test_the_cpu_build_is_named_and_not_warned_about() -> None:
    line, warning = describe(TorchBuild("2.13.0+cpu", None, None, None, "3.9.0"))
    assert line == f"engine: torch 2.13.0+cpu (the CPU build), triton 3.9.0, {NO_GPU}"
    assert warning is None


def test_the_cuda_build_without_a_gpu_is_one_warning_line_with_the_way_to_the_cpu_build() -> None:
    line, warning = describe(TorchBuild("2.13.0", "13.0", None, None, "3.7.1"))
    assert line == f"engine: torch 2.13.0 (the CUDA 13.0 build), triton 3.7.1, {NO_GPU}"
    assert warning is not None and "\n" not in warning
    assert warning.startswith("engine: warning: torch 2.13.0 is the CUDA 13.0 build (gigabytes of GPU libraries)")
    command = warning.split("the CPU build does the same here: ", 1)[1].split(" (or ", 1)[0]
    assert shlex.split(command) == [
        "python", "-m", "pip", "install", "--force-reinstall", "--no-deps", "torch==2.13.0", "--index-url", CPU_INDEX,
    ]  # fmt: skip
    assert f"PIP_EXTRA_INDEX_URL={CPU_INDEX}" in warning


def test_a_gpu_build_with_its_gpu_and_a_rocm_build_without_one() -> None:
    line, warning = describe(TorchBuild("2.13.0+cu130", "13.0", None, "NVIDIA H100 80GB HBM3", "3.7.1"))
    assert line.endswith("GPU: NVIDIA H100 80GB HBM3") and warning is None
    _, warning = describe(TorchBuild("2.13.0+rocm7.0", None, "7.0", None, None))
    assert warning is not None and "the ROCm 7.0 build" in warning and "'torch==2.13.0'" in warning


def test_the_command_says_what_this_interpreter_has() -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    run = subprocess.run([sys.executable, "-m", "engine", "preflight"], capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr
    kind = f"the CUDA {torch.version.cuda} build" if torch.version.cuda else "the CPU build"
    assert run.stdout.startswith(f"engine: torch {torch.__version__} ({kind}), ")
    gpu = torch.cuda.is_available()
    assert run.stdout.count("\n") == 1 and (run.stderr == "") == (gpu or not torch.version.cuda), run.stderr
