"""Compile the engine's Triton kernels for an NVIDIA target on a machine without a GPU.

The interpreter (TRITON_INTERPRET=1) runs a kernel's Python body and never type-checks the
branches a constexpr rules out; the compiler does, so a kernel can pass every interpreter test
and still fail to compile (issue 14: `load_rows` fell through into the quantized branches for
an f16 cache). Triton's CPU wheel holds the whole NVIDIA pipeline (ttir, ttgir, llir, ptx and,
where ptxas is bundled, cubin), so CI compiles each kernel for sm_80 and sm_90 here.

`kernel_specs` lists every kernel with the argument types and constexprs a launch would give
it; `compile_kernel` runs the pipeline up to a chosen stage. The early stages take a fraction
of a second and catch type errors (ttir) and layout errors (ttgir); llir, ptx and cubin add
LLVM and ptxas (seconds each).

This uses Triton's compiler internals (`make_backend`, `ASTSource.make_ir`, the backend's
stages), which move between Triton versions; it is written against Triton 3.9.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import triton

from engine.kernels.kv_codec import format_code, row_width
from engine.kv.formats import get_format

STAGES = ("ttir", "ttgir", "llir", "ptx", "cubin")
_POINTER_TYPES = {"f32": "*fp32", "f16": "*fp16", "bf16": "*bf16"}


@dataclass(frozen=True)
class KernelSpec:
    """One kernel with the types of its runtime arguments and the values of its constexprs."""

    name: str
    fn: Any  # a triton.JITFunction
    pointer_types: dict[str, str]  # argument name -> Triton pointer type, e.g. "*fp16"
    constexprs: dict[str, int | float]
    float_args: tuple[str, ...] = ("scale",)
    label: str = field(default="")

    def signature(self) -> dict[str, str]:
        """Every argument's Triton type: pointers as given, floats fp32, other runtime values i32."""
        signature = {}
        for param in self.fn.params:
            name = param.name
            if param.is_constexpr:
                signature[name] = "constexpr"
            elif name in self.pointer_types:
                signature[name] = self.pointer_types[name]
            elif name in self.float_args:
                signature[name] = "fp32"
            else:
                signature[name] = "i32"
        return signature


def cache_pointer(qtype: str) -> str:
    """The pointer type of a cache tensor in format `qtype`: its float dtype, or bytes."""
    return "*u8" if get_format(qtype).quantized else _POINTER_TYPES[qtype]


def kernel_specs(
    k_type: str,
    v_type: str,
    group: int,
    head_dim: int,
    block_size: int,
    n_kv_heads: int = 8,
    activation: str = "f32",
    precision: str = "ieee",
) -> Iterator[KernelSpec]:
    """Every kernel of `engine.kernels` as `PagedAttention` would launch it for these shapes."""
    from engine.kernels import paged_decode, paged_prefill, store_kv

    act = _POINTER_TYPES[activation]
    k_cache, v_cache = cache_pointer(k_type), cache_pointer(v_type)
    formats = {
        "N_KV_HEADS": n_kv_heads,
        "HEAD_DIM": head_dim,
        "K_ROW": row_width(k_type, head_dim),
        "V_ROW": row_width(v_type, head_dim),
        "K_FORMAT": format_code(k_type),
        "V_FORMAT": format_code(v_type),
    }
    label = f"k={k_type} v={v_type} group={group} head_dim={head_dim} block={block_size}"
    caches = {"k_cache_ptr": k_cache, "v_cache_ptr": v_cache}
    yield KernelSpec(
        "store_kv",
        store_kv._store_kv_kernel,
        {"key_ptr": act, "value_ptr": act, **caches, "slot_mapping_ptr": "*i64"},
        formats,
        label=label,
    )
    yield KernelSpec(
        "paged_decode_segment",
        paged_decode._paged_decode_segment_kernel,
        {
            "q_ptr": act,
            **caches,
            "block_tables_ptr": "*i32",
            "seq_lens_ptr": "*i32",
            "part_acc_ptr": "*fp32",
            "part_m_ptr": "*fp32",
            "part_sum_ptr": "*fp32",
        },
        {
            **formats,
            "GROUP": group,
            "GROUP_PAD": triton.next_power_of_2(group),
            "BLOCK_SIZE": block_size,
            "TILE": paged_decode.DECODE_TILE,
            "SEGMENT": paged_decode.DECODE_SEGMENT,
        },
        label=label,
    )
    yield KernelSpec(
        "paged_decode_merge",
        paged_decode._paged_decode_merge_kernel,
        {
            "part_acc_ptr": "*fp32",
            "part_m_ptr": "*fp32",
            "part_sum_ptr": "*fp32",
            "seq_lens_ptr": "*i32",
            "out_ptr": act,
        },
        {"N_HEADS": n_kv_heads * group, "HEAD_DIM": head_dim, "SEGMENT": paged_decode.DECODE_SEGMENT},
        label=label,
    )
    yield KernelSpec(
        "paged_prefill",
        paged_prefill._paged_prefill_kernel,
        {
            "q_ptr": act,
            **caches,
            "block_tables_ptr": "*i32",
            "query_start_ptr": "*i32",
            "seq_lens_ptr": "*i32",
            "out_ptr": act,
        },
        {
            **formats,
            "GROUP": group,
            "BLOCK_SIZE": block_size,
            "BLOCK_M": paged_prefill.PREFILL_BLOCK_M,
            "TILE": paged_prefill.PREFILL_TILE,
            "PRECISION": precision,
        },
        label=label,
    )


def compile_kernel(spec: KernelSpec, capability: int, last_stage: str = "ttgir") -> dict[str, Any]:
    """Compile `spec` for CUDA compute capability `capability` (80, 90) through `last_stage`.

    Returns each stage's module by stage name; a kernel that does not compile raises
    triton's CompilationError (or the backend's error) as a launch on a GPU would."""
    from triton._C.libtriton import ir
    from triton.backends.compiler import GPUTarget
    from triton.compiler.compiler import ASTSource, make_backend

    if last_stage not in STAGES:
        raise ValueError(f"unknown stage {last_stage!r}; choose from {', '.join(STAGES)}")
    target = GPUTarget("cuda", capability, 32)
    source = ASTSource(fn=spec.fn, signature=spec.signature(), constexprs=dict(spec.constexprs))
    backend = make_backend(target)
    options = backend.parse_options({})
    context = ir.context()
    ir.load_dialects(context)
    backend.load_dialects(context)
    module = source.make_ir(
        target, options, backend.get_codegen_implementation(options), backend.get_module_map(), context
    )
    stages: dict[str, Any] = {}
    backend.add_stages(stages, options, source.language)
    metadata: dict[str, Any] = {"hash": source.hash(), "target": target, **options.__dict__}
    modules = {}
    for name in STAGES[: STAGES.index(last_stage) + 1]:
        module = stages[name](module, metadata)
        modules[name] = module
    return modules


def _ptx_facts(modules: dict[str, Any]) -> str:
    """Tensor-core instructions and tf32 roundings in the PTX, when it was produced."""
    ptx = modules.get("ptx")
    if not isinstance(ptx, str):
        return ""
    mma = len(re.findall(r"\b(?:w?mma)\.", ptx))
    tf32 = len(re.findall(r"cvt\.\w+\.tf32", ptx))
    return f", mma {mma}, tf32 {tf32}"


def _root_cause(error: BaseException) -> str:
    """The innermost error of a chain, on one line: CompilationError wraps the real one."""
    while error.__cause__ is not None:
        error = error.__cause__
    message = " ".join(str(error).split())
    return f"{type(error).__name__}: {message[-300:]}"


def main(argv: list[str] | None = None) -> int:
    """`python -m engine.kernels.compile_targets`: compile the kernels, one line per kernel.

    Run without TRITON_INTERPRET: in interpreter mode `triton.jit` returns functions that the
    compiler cannot read. Exit 0 when every kernel compiled, 1 when one did not, 2 on bad usage."""
    import argparse
    import os
    import sys

    from engine.kv.formats import QTYPES

    parser = argparse.ArgumentParser(prog="python -m engine.kernels.compile_targets")
    parser.add_argument("--capability", type=int, action="append", help="CUDA capability, repeatable (80, 90)")
    parser.add_argument(
        "--types", action="append", help="K cache format, or K,V formats; repeatable (default: every format for both)"
    )
    parser.add_argument("--shape", action="append", help="GROUP,HEAD_DIM,BLOCK_SIZE, repeatable (default: 4,128,16)")
    parser.add_argument("--activation", choices=sorted(_POINTER_TYPES), default="f32", help="q/k/v dtype")
    parser.add_argument("--kernel", action="append", help="only these kernels, repeatable (default: all)")
    parser.add_argument("--precision", choices=("ieee", "tf32x3", "tf32"), default="ieee", help="prefill dots")
    parser.add_argument("--stage", choices=STAGES, default="ttgir", help="last stage (default: %(default)s)")
    args = parser.parse_args(argv)
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        print("compile_targets: unset TRITON_INTERPRET: interpreted kernels cannot be compiled", file=sys.stderr)
        return 2
    pairs = [tuple(text.split(",")) * (2 if "," not in text else 1) for text in args.types or QTYPES]
    unknown = sorted({name for pair in pairs for name in pair} - set(QTYPES))
    if unknown or any(len(pair) != 2 for pair in pairs):
        print(f"compile_targets: --types takes K or K,V from {', '.join(QTYPES)}", file=sys.stderr)
        return 2
    try:
        shapes = [tuple(int(part) for part in text.split(",")) for text in args.shape or ["4,128,16"]]
        if any(len(shape) != 3 for shape in shapes):
            raise ValueError
    except ValueError:
        print("compile_targets: --shape takes GROUP,HEAD_DIM,BLOCK_SIZE", file=sys.stderr)
        return 2
    failures = 0
    for capability in args.capability or [80, 90]:
        for k_type, v_type in pairs:
            for group, head_dim, block_size in shapes:
                specs = kernel_specs(k_type, v_type, group, head_dim, block_size, 8, args.activation, args.precision)
                for spec in specs:
                    if args.kernel and spec.name not in args.kernel:
                        continue
                    try:
                        modules = compile_kernel(spec, capability, args.stage)
                    except Exception as error:  # the compiler's errors share no base class
                        failures += 1
                        print(f"FAIL sm_{capability} {spec.name} {spec.label}: {_root_cause(error)}")
                        continue
                    output = modules[args.stage]
                    size = len(output if isinstance(output, (bytes, str)) else str(output))
                    print(
                        f"ok   sm_{capability} {spec.name} {spec.label}: {args.stage} {size} bytes{_ptx_facts(modules)}"
                    )
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
