"""Engine tests run Triton kernels on the CPU: the interpreter must be chosen before triton
loads. Tiny tensors run fastest on one thread, and pytest-xdist already runs one worker per core.

ENGINE_TEST_DEVICE=cuda (the GPU tier, tests marked `gpu`) leaves TRITON_INTERPRET alone so
that the kernels are compiled for the GPU."""

from __future__ import annotations

import os

if os.environ.get("ENGINE_TEST_DEVICE") != "cuda":
    os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
