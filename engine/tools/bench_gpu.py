"""`python -m engine bench gpu`: the Triton kernels on a CUDA GPU against torch SDPA, one run, as tables.

- Decode: batch x context x KV format. The paged split-KV kernel over KV scattered in shuffled
  blocks of the format, against SDPA over the same shapes in f16 on contiguous KV (the usual
  serving baseline), both in one run. GB/s is the KV bytes each one reads (the paged kernel
  reads the format's bytes, so q8_0 moves about half of f16) over its time, against the card's
  peak from `PEAK_BANDWIDTH_GBPS` by device name.
- Prefill: causal attention of one sequence of L new tokens, TFLOP/s (2 matmuls x 2 flops x the
  L(L+1)/2 causal pairs x head_dim x heads) of the paged kernel ("ieee" and "tf32x3" dots)
  against SDPA (f16, causal) on contiguous KV.

Nothing here asserts a speed; the runners return numbers and print nothing.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

# Peak DRAM bandwidth (GB/s) of common cards, by a substring of torch's device name (first match wins).
PEAK_BANDWIDTH_GBPS: dict[str, float] = {
    "H200": 4800.0,
    "H100 NVL": 3900.0,
    "H100 PCIe": 2000.0,
    "H100": 3350.0,
    "A100-SXM4-80GB": 2039.0,
    "A100": 1555.0,
    "L40S": 864.0,
    "A10G": 600.0,
    "RTX 4090": 1008.0,
}
DECODE_BATCHES = (1, 8, 32, 64)
DECODE_CONTEXTS = (2048, 4096, 32768)
DECODE_KV_TYPES = ("f16", "q8_0", "q4_0")
MAX_DECODE_TOKENS = 8 * 32768  # batch x context above this is skipped (KV memory, and the contiguous copy)
PREFILL_LENGTHS = (1024, 4096)


class CudaUnavailable(RuntimeError):
    """The benchmark needs a CUDA device and this machine has none."""


@dataclass(frozen=True)
class AttentionShape:
    n_heads: int = 32
    n_kv_heads: int = 8
    head_dim: int = 128
    block_size: int = 16


@dataclass(frozen=True)
class DecodePoint:
    batch: int
    context: int
    kv_type: str
    paged_ms: float
    sdpa_ms: float
    paged_bytes: int  # K and V bytes the paged kernel reads, in its format
    sdpa_bytes: int  # K and V bytes SDPA reads, f16

    @property
    def paged_gbps(self) -> float:
        return self.paged_bytes / self.paged_ms / 1e6

    @property
    def sdpa_gbps(self) -> float:
        return self.sdpa_bytes / self.sdpa_ms / 1e6

    @property
    def speedup(self) -> float:
        """SDPA's time over the paged kernel's: above 1 the paged kernel is faster."""
        return self.sdpa_ms / self.paged_ms


@dataclass(frozen=True)
class PrefillPoint:
    tokens: int
    kv_type: str
    precision: str
    paged_ms: float
    sdpa_ms: float
    flops: float

    @property
    def paged_tflops(self) -> float:
        return self.flops / self.paged_ms / 1e9

    @property
    def sdpa_tflops(self) -> float:
        return self.flops / self.sdpa_ms / 1e9


@dataclass(frozen=True)
class GpuBench:
    device: str
    peak_gbps: float  # nan when the card is not in the table
    decode: list[DecodePoint]
    prefill: list[PrefillPoint]


def peak_bandwidth(device_name: str) -> float:
    return next((gbps for key, gbps in PEAK_BANDWIDTH_GBPS.items() if key in device_name), float("nan"))


def decode_plan(
    batches: Sequence[int], contexts: Sequence[int], kv_types: Sequence[str], max_tokens: int = MAX_DECODE_TOKENS
) -> list[tuple[int, int, str]]:
    """The (batch, context, kv_type) points of the sweep, skipping those over `max_tokens` KV tokens."""
    from engine.kv.formats import get_format

    for kv_type in kv_types:
        get_format(kv_type)  # an unknown type is a ValueError listing the valid ones
    return [
        (batch, context, kv_type)
        for batch in batches
        for context in contexts
        if batch * context <= max_tokens
        for kv_type in kv_types
    ]


def _timed_ms(fn: Callable[[], object], iters: int, device: str) -> float:
    """Median of `iters` timings of `fn` (CUDA events on a GPU), after two warm-up calls (compilation)."""
    import torch

    fn()
    fn()
    times = []
    if device == "cpu":  # the interpreter: only the tests' smoke runs time on the CPU
        for _ in range(iters):
            start = time.perf_counter()
            fn()
            times.append((time.perf_counter() - start) * 1e3)
        return statistics.median(times)
    torch.cuda.synchronize()
    for _ in range(iters):
        start_event, end_event = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start_event.record()
        fn()
        end_event.record()
        end_event.synchronize()
        times.append(start_event.elapsed_time(end_event))
    return statistics.median(times)


def _paged_cache(
    kv_type: str, batch: int, context: int, shape: AttentionShape, seed: int, device: str
) -> tuple[list[torch.Tensor], torch.Tensor, list[torch.Tensor]]:
    """K and V caches of `kv_type` holding random rows (stored by `store_kv`) in shuffled blocks, the
    block tables, and the same K/V in f16 as contiguous [batch, kv_heads, context, head_dim] tensors."""
    import torch

    from engine.kernels.kv_codec import row_width
    from engine.kernels.store_kv import store_kv
    from engine.kv.formats import get_format

    gen = torch.Generator(device=device).manual_seed(seed)
    blocks_per_seq = -(-context // shape.block_size)
    num_blocks = batch * blocks_per_seq + 1
    tables = (torch.randperm(num_blocks - 1, device=device, generator=gen) + 1).view(batch, blocks_per_seq)
    fmt = get_format(kv_type)
    width = row_width(kv_type, shape.head_dim)
    caches = [
        torch.zeros(num_blocks, shape.block_size, shape.n_kv_heads, width, dtype=fmt.storage_dtype, device=device)
        for _ in range(2)
    ]
    rows = [
        torch.randn(batch, context, shape.n_kv_heads, shape.head_dim, device=device, generator=gen, dtype=torch.float16)
        for _ in range(2)
    ]
    pos = torch.arange(context, device=device)
    slots = (tables[:, pos // shape.block_size] * shape.block_size + pos % shape.block_size).reshape(-1)
    store_kv(
        rows[0].reshape(-1, shape.n_kv_heads, shape.head_dim),
        rows[1].reshape(-1, shape.n_kv_heads, shape.head_dim),
        *caches,
        slots,
        kv_type,
        kv_type,
    )
    contiguous = [r.transpose(1, 2).contiguous() for r in rows]
    return caches, tables.to(torch.int32), contiguous


def run_decode_point(
    batch: int, context: int, kv_type: str, shape: AttentionShape, iters: int, device: str = "cuda"
) -> DecodePoint:
    import torch

    from engine.kernels.paged_decode import paged_decode_attention
    from engine.kv.formats import get_format

    (k_cache, v_cache), tables, (k_contig, v_contig) = _paged_cache(kv_type, batch, context, shape, batch, device)
    seq_lens = torch.full((batch,), context, dtype=torch.int32, device=device)
    q = torch.randn(batch, shape.n_heads, shape.head_dim, device=device, dtype=torch.float16)
    scale = shape.head_dim**-0.5
    q_sdpa = q.view(batch, shape.n_heads, 1, shape.head_dim)
    paged_ms = _timed_ms(
        lambda: paged_decode_attention(
            q, k_cache, v_cache, tables, seq_lens, scale, kv_type, kv_type, max_seq_len=context
        ),
        iters,
        device,
    )
    sdpa_ms = _timed_ms(
        lambda: torch.nn.functional.scaled_dot_product_attention(
            q_sdpa, k_contig, v_contig, scale=scale, enable_gqa=True
        ),
        iters,
        device,
    )
    row_bytes = get_format(kv_type).row_bytes(shape.head_dim)
    paged_bytes = 2 * batch * context * shape.n_kv_heads * row_bytes
    sdpa_bytes = 2 * batch * context * shape.n_kv_heads * shape.head_dim * 2
    return DecodePoint(batch, context, kv_type, paged_ms, sdpa_ms, paged_bytes, sdpa_bytes)


def run_prefill_point(
    tokens: int, kv_type: str, precision: str, shape: AttentionShape, iters: int, device: str = "cuda"
) -> PrefillPoint:
    import torch

    from engine.kernels.paged_prefill import paged_prefill_attention

    (k_cache, v_cache), tables, (k_contig, v_contig) = _paged_cache(kv_type, 1, tokens, shape, tokens, device)
    q = torch.randn(tokens, shape.n_heads, shape.head_dim, device=device, dtype=torch.float16)
    query_start = torch.tensor([0, tokens], dtype=torch.int32, device=device)
    seq_lens = torch.tensor([tokens], dtype=torch.int32, device=device)
    scale = shape.head_dim**-0.5
    q_sdpa = q.transpose(0, 1).unsqueeze(0)
    paged_ms = _timed_ms(
        lambda: paged_prefill_attention(
            q, k_cache, v_cache, tables, query_start, seq_lens, scale, kv_type, kv_type, tokens, precision=precision
        ),
        iters,
        device,
    )
    sdpa_ms = _timed_ms(
        lambda: torch.nn.functional.scaled_dot_product_attention(
            q_sdpa, k_contig, v_contig, scale=scale, is_causal=True, enable_gqa=True
        ),
        iters,
        device,
    )
    flops = 4.0 * shape.n_heads * shape.head_dim * tokens * (tokens + 1) / 2
    return PrefillPoint(tokens, kv_type, precision, paged_ms, sdpa_ms, flops)


def run_gpu_bench(
    batches: Sequence[int] = DECODE_BATCHES,
    contexts: Sequence[int] = DECODE_CONTEXTS,
    kv_types: Sequence[str] = DECODE_KV_TYPES,
    prefill_lengths: Sequence[int] = PREFILL_LENGTHS,
    iters: int = 20,
    shape: AttentionShape | None = None,
) -> GpuBench:
    """One run of the whole sweep. Raises CudaUnavailable without a CUDA device."""
    import torch

    if not torch.cuda.is_available():
        raise CudaUnavailable("CUDA is not available: the GPU benchmark needs an NVIDIA GPU")
    shape = shape or AttentionShape()
    decode = []
    for batch, context, kv_type in decode_plan(batches, contexts, kv_types):
        decode.append(run_decode_point(batch, context, kv_type, shape, iters))
        torch.cuda.empty_cache()
    prefill = []
    for tokens in prefill_lengths:
        for kv_type in ("f16", "q8_0"):
            for precision in ("ieee", "tf32x3"):
                prefill.append(run_prefill_point(tokens, kv_type, precision, shape, iters))
    name = torch.cuda.get_device_name()
    return GpuBench(name, peak_bandwidth(name), decode, prefill)


def format_gpu_bench(result: GpuBench, shape: AttentionShape | None = None) -> list[str]:
    shape = shape or AttentionShape()
    peak = "unknown" if result.peak_gbps != result.peak_gbps else f"{result.peak_gbps:.0f} GB/s"
    lines = [
        f"GPU kernels on {result.device} (peak {peak}), {shape.n_heads} query / {shape.n_kv_heads} KV heads,"
        f" head_dim {shape.head_dim}, block {shape.block_size}; baseline: torch SDPA, f16, contiguous KV",
        "",
        "decode  batch  context  KV      paged ms   SDPA ms  paged GB/s  % peak  SDPA GB/s  SDPA/paged time",
    ]
    for p in result.decode:
        share = p.paged_gbps / result.peak_gbps * 100
        lines.append(
            f"        {p.batch:5d}  {p.context:7d}  {p.kv_type:<6}  {p.paged_ms:8.3f}  {p.sdpa_ms:8.3f}"
            f"  {p.paged_gbps:10.1f}  {share:6.1f}  {p.sdpa_gbps:9.1f}  {p.speedup:15.3f}x"
        )
    lines += ["", "prefill  tokens  KV      dots     paged ms   SDPA ms  paged TFLOP/s  SDPA TFLOP/s  paged/SDPA"]
    for p in result.prefill:
        lines.append(
            f"         {p.tokens:6d}  {p.kv_type:<6}  {p.precision:<7}  {p.paged_ms:8.3f}  {p.sdpa_ms:8.3f}"
            f"  {p.paged_tflops:13.2f}  {p.sdpa_tflops:12.2f}  {p.paged_tflops / p.sdpa_tflops:9.3f}x"
        )
    return lines
