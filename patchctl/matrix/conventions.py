"""What a build row's toolchain is, and the names that follow from it.

A row's toolchain (CPU, CUDA N, L4T CUDA N, ROCm, Intel, SYCL f16/f32, Vulkan, Metal) is
derived from its build type, CUDA major and platform. Tag suffixes, index capabilities
and variant names all have to agree with it.
"""

from __future__ import annotations

import re

from ..records import dataclass
from .model import DARWIN, Row

ARM_RUNNER = re.compile(r"(^|[-_.])(arm|arm64|aarch64)($|[-_.])", re.IGNORECASE)

# LocalAI's capability names: pkg/system/capabilities.go and the keys of backend/index.yaml
# (LocalAI 82c191afadf5, 2026-08-22). matrix.yaml's `index: capabilities:` replaces them.
KNOWN_CAPABILITIES = (
    "default",
    "nvidia",
    "amd",
    "intel",
    "metal",
    "darwin-x86",
    "vulkan",
    "nvidia-l4t",
    "nvidia-cuda-12",
    "nvidia-cuda-13",
    "nvidia-l4t-cuda-12",
    "nvidia-l4t-cuda-13",
    "cpu",
    "metal-darwin-arm64",
)


@dataclass(frozen=True)
class Toolchain:
    kind: str  # cpu, cuda, l4t, rocm, intel, sycl-f16, sycl-f32, vulkan, metal
    cuda_major: str = ""

    def describe(self) -> str:
        if self.kind == "cuda":
            return f"CUDA {self.cuda_major or '?'}"
        if self.kind == "l4t":
            return f"L4T CUDA {self.cuda_major or '12'} arm64"
        return {
            "cpu": "CPU",
            "rocm": "ROCm",
            "intel": "Intel",
            "sycl-f16": "SYCL f16",
            "sycl-f32": "SYCL f32",
            "vulkan": "Vulkan",
            "metal": "Metal (darwin arm64)",
        }[self.kind]


_SIMPLE_BUILD_TYPES = {
    "": "cpu",
    "hipblas": "rocm",
    "intel": "intel",
    "sycl_f16": "sycl-f16",
    "sycl_f32": "sycl-f32",
    "vulkan": "vulkan",
}


def row_toolchain(row: Row) -> Toolchain | None:
    """None when the build type is one no convention covers."""
    if row.section == DARWIN:
        return Toolchain("metal")
    build_type = row.build_type
    if build_type == "cublas":
        kind = "l4t" if row.platform == "linux/arm64" else "cuda"
        return Toolchain(kind, row.cuda_major)
    if build_type == "l4t":
        return Toolchain("l4t", row.cuda_major or "12")
    if build_type in _SIMPLE_BUILD_TYPES:
        return Toolchain(_SIMPLE_BUILD_TYPES[build_type])
    return None


def expected_tag_suffix(toolchain: Toolchain, backend: str) -> str:
    kind, major = toolchain.kind, toolchain.cuda_major
    prefix = {
        "cpu": "-cpu-",
        "cuda": f"-gpu-nvidia-cuda-{major}-",
        "l4t": "-nvidia-l4t-arm64-" if major in ("", "12") else f"-nvidia-l4t-cuda-{major}-arm64-",
        "rocm": "-gpu-rocm-hipblas-",
        "intel": "-gpu-intel-",
        "sycl-f16": "-gpu-intel-sycl-f16-",
        "sycl-f32": "-gpu-intel-sycl-f32-",
        "vulkan": "-gpu-vulkan-",
        "metal": "-metal-darwin-arm64-",
    }[kind]
    return prefix + backend


def is_arm_runner(runs_on: str) -> bool:
    return bool(ARM_RUNNER.search(runs_on))


def capability_accepts(capability: str, toolchain: Toolchain) -> bool:
    """Whether a variant built with TOOLCHAIN may serve hardware with CAPABILITY.

    Vulkan runs on every GPU vendor's driver, so any GPU capability may fall back to a
    Vulkan image; a CUDA image for the wrong CUDA major is exactly what must not pass.
    """
    kind, major = toolchain.kind, toolchain.cuda_major
    if kind == "vulkan" and capability in _GPU_CAPABILITIES:
        return True
    rules = {
        "default": True,
        "cpu": kind == "cpu",
        "darwin-x86": kind == "cpu",
        "nvidia": kind == "cuda",
        "nvidia-cuda-12": kind == "cuda" and major == "12",
        "nvidia-cuda-13": kind == "cuda" and major == "13",
        "nvidia-l4t": kind == "l4t",
        "nvidia-l4t-cuda-12": kind == "l4t" and major in ("", "12"),
        "nvidia-l4t-cuda-13": kind == "l4t" and major == "13",
        "amd": kind == "rocm",
        "intel": kind in ("intel", "sycl-f16", "sycl-f32"),
        "vulkan": kind == "vulkan",
        "metal": kind == "metal",
        "metal-darwin-arm64": kind == "metal",
    }
    return rules.get(capability, True)


_GPU_CAPABILITIES = frozenset(
    {
        "nvidia",
        "nvidia-cuda-12",
        "nvidia-cuda-13",
        "nvidia-l4t",
        "nvidia-l4t-cuda-12",
        "nvidia-l4t-cuda-13",
        "amd",
        "intel",
        "vulkan",
    }
)
_CUDA_TOKEN = re.compile(r"(?:^|-)cuda-?(\d+)(?=-|$)")


def name_promise_broken(variant_name: str, backend: str, toolchain: Toolchain) -> str | None:
    """What the variant's name promises that its image does not deliver, or None.

    Only the part of the name before the backend is read, so a backend called
    `vulkan-tools` does not promise Vulkan.
    """
    head = variant_name.removesuffix("-development")
    head = head[: -len(backend)].rstrip("-") if head.endswith(backend) else head
    tokens = set(head.split("-"))
    cuda = _CUDA_TOKEN.search(head)
    if cuda and (toolchain.kind not in ("cuda", "l4t") or (toolchain.cuda_major or "12") != cuda.group(1)):
        return f"CUDA {cuda.group(1)}"
    promises = [
        ("l4t" in tokens, "l4t", "L4T"),
        (bool(tokens & {"rocm", "hipblas"}), "rocm", "ROCm"),
        ("sycl-f16" in head or "f16" in tokens and "sycl" in tokens, "sycl-f16", "SYCL f16"),
        ("sycl-f32" in head or "f32" in tokens and "sycl" in tokens, "sycl-f32", "SYCL f32"),
        ("vulkan" in tokens, "vulkan", "Vulkan"),
        ("metal" in tokens, "metal", "Metal"),
        ("cpu" in tokens, "cpu", "CPU"),
    ]
    for promised, kind, label in promises:
        if promised and toolchain.kind != kind:
            return label
    if "intel" in tokens and toolchain.kind not in ("intel", "sycl-f16", "sycl-f32"):
        return "Intel"
    return None
