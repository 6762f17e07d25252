"""Engine tests run Triton kernels on the CPU: the interpreter must be chosen before triton
loads. Tiny tensors run fastest on one thread, and pytest-xdist already runs one worker per core."""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
