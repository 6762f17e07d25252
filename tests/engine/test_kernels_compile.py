"""Every Triton kernel compiles for NVIDIA sm_80 and sm_90, on a machine without a GPU.

The interpreter never type-checks the branches a constexpr rules out, so these tests are the
only guard in CI against a kernel that passes every interpreter test and fails to compile on
a GPU (issue 14). Every kernel x every cache format x the shapes below goes through the
frontend and the TritonGPU passes (ttir, ttgir: a fraction of a second each); mixed-format
launches go on through LLVM and the bundled ptxas to a cubin.

The compiler runs in a subprocess: these tests' process runs the kernels in the interpreter
(TRITON_INTERPRET=1, set before triton loads), where kernels cannot be compiled.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from engine.kv.formats import QTYPES

pytest.importorskip("triton.backends.nvidia.compiler", reason="this Triton has no NVIDIA backend")

pytestmark = pytest.mark.gpu_compile

KERNELS = {"store_kv", "paged_decode_segment", "paged_decode_merge", "paged_prefill"}
# GROUP,HEAD_DIM,BLOCK_SIZE: every value of GQA group (1, 4), head_dim (64, 128) and block size (16, 32)
SHAPES = ["1,64,16", "4,128,32"]


def compile_kernels(*args: str) -> tuple[int, list[str], str]:
    env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")  # Triton's default today, stated to silence its warning
    run = subprocess.run(
        [sys.executable, "-m", "engine.kernels.compile_targets", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    return run.returncode, run.stdout.splitlines(), run.stderr


def assert_all_compiled(returncode: int, lines: list[str], stderr: str, expected: int) -> None:
    failed = [line for line in lines if not line.startswith("ok ")]
    assert returncode == 0 and not failed, "\n".join(failed) or stderr[-2000:]
    assert len(lines) == expected, lines
    assert KERNELS <= {line.split()[2] for line in lines}


@pytest.mark.parametrize("capability,shapes", [("90", SHAPES), ("80", SHAPES[1:])])
def test_every_kernel_compiles_to_ttgir_for_every_format(capability: str, shapes: list[str]) -> None:
    """sm_90 over every shape; sm_80 (its own layouts and MMA version) over one, to keep CI fast."""
    shape_args = [arg for shape in shapes for arg in ("--shape", shape)]
    mixed = ["--types", "f16,q8_0", "--types", "q4_1,bf16"]
    types = [arg for qtype in QTYPES for arg in ("--types", qtype)] + mixed
    returncode, lines, stderr = compile_kernels("--capability", capability, *types, *shape_args)
    assert_all_compiled(returncode, lines, stderr, expected=(len(QTYPES) + 2) * len(shapes) * len(KERNELS))
    assert all(f"sm_{capability} " in line for line in lines)
    assert {line.split()[3] for line in lines} == {f"k={qtype}" for qtype in QTYPES}


def test_mixed_formats_compile_to_a_cubin_for_sm90() -> None:
    returncode, lines, stderr = compile_kernels(
        "--capability", "90", "--types", "f16,q8_0", "--activation", "f16", "--stage", "cubin"
    )
    assert_all_compiled(returncode, lines, stderr, expected=len(KERNELS))
    assert all(": cubin " in line for line in lines)


def test_a_kernel_that_does_not_compile_is_reported() -> None:
    returncode, lines, stderr = compile_kernels("--capability", "90", "--shape", "4,48,16", "--types", "f16")
    assert returncode == 1
    assert any(line.startswith("FAIL sm_90 paged_decode_segment") and "power of 2" in line for line in lines), lines


def test_f32_prefill_keeps_ieee_precision_and_tf32x3_uses_tensor_cores() -> None:
    """Issue 14: float32 dots default to tf32 on NVIDIA (1e-3 errors); "ieee" must stay off it."""
    facts = {}
    for precision in ("ieee", "tf32x3"):
        run = compile_kernels(
            "--capability",
            "90",
            "--types",
            "f32",
            "--precision",
            precision,
            "--stage",
            "ptx",
            "--kernel",
            "paged_prefill",
        )
        assert run[0] == 0 and len(run[1]) == 1 and run[1][0].startswith("ok "), run
        facts[precision] = run[1][0].rsplit(": ptx ", 1)[1]
    assert facts["ieee"].endswith(", mma 0, tf32 0"), facts
    mma, tf32 = (int(part.split()[1]) for part in facts["tf32x3"].split(", ")[1:])
    assert mma > 0 and tf32 > 0, facts
