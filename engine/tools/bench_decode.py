"""Decode throughput of the paged engine against baselines measured in the same run.

- CPU: decode tokens/s of the paged engine (the torch twins of the kernels) against the
  contiguous-KV reference (`engine.model.reference`), same model, batch and context, as a ratio.
- GPU, only when CUDA is available: the Triton paged decode kernel's achieved memory
  bandwidth against the card's peak, and against torch SDPA on contiguous KV.

Nothing here asserts a speed; the runners return numbers and print nothing.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

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


@dataclass(frozen=True)
class CpuDecodeResult:
    batch: int
    context: int
    steps: int
    kv_type: str
    paged_tok_s: float
    contiguous_tok_s: float

    @property
    def ratio(self) -> float:
        return self.paged_tok_s / self.contiguous_tok_s


@dataclass(frozen=True)
class GpuDecodeResult:
    device: str
    batch: int
    context: int
    paged_ms: float
    sdpa_ms: float
    kv_bytes: int
    peak_gbps: float

    @property
    def paged_gbps(self) -> float:
        return self.kv_bytes / (self.paged_ms / 1e3) / 1e9

    @property
    def sdpa_gbps(self) -> float:
        return self.kv_bytes / (self.sdpa_ms / 1e3) / 1e9


def run_cpu_decode(
    batch: int, context: int, steps: int, runs: int, kv_type: str = "f32", on_run: Callable[[], None] | None = None
) -> CpuDecodeResult:
    """Median over `runs` of the decode-only time of both, after one prefill step each."""
    import torch

    from engine.model.llama import LlamaModel
    from engine.model.reference import ContiguousKV, forward_contiguous
    from engine.runtime.llm_engine import EngineConfig, LLMEngine
    from engine.runtime.sampling import SamplingParams

    if min(batch, context, steps, runs) < 1:
        raise ValueError("batch, context, steps and runs must be >= 1")
    model = LlamaModel.tiny()
    prompts = torch.randint(
        2, model.config.vocab_size, (batch, context), generator=torch.Generator().manual_seed(0)
    ).tolist()
    block_size = 16
    config = EngineConfig(
        block_size=block_size,
        num_blocks=batch * -(-(context + steps + 1) // block_size) + 8,
        max_num_batched_tokens=batch * context,
        max_num_seqs=batch,
        cache_type_k=kv_type,
        cache_type_v=kv_type,
        attention_backend="torch",
    )

    def paged() -> float:
        engine = LLMEngine(model, config)
        for prompt in prompts:
            engine.add_request(prompt, SamplingParams(max_tokens=steps + 1, ignore_eos=True))
        engine.step()  # all prompts prefilled in one step: what follows is decode only
        start = time.perf_counter()
        while engine.has_unfinished():
            engine.step()
        return time.perf_counter() - start

    @torch.inference_mode()
    def contiguous() -> float:
        cache = ContiguousKV.empty(model, batch, context + steps + 1)
        tokens = forward_contiguous(model, cache, torch.tensor(prompts)).argmax(-1, keepdim=True)
        start = time.perf_counter()
        for _ in range(steps):
            tokens = forward_contiguous(model, cache, tokens).argmax(-1, keepdim=True)
        return time.perf_counter() - start

    paged_times, contiguous_times = [], []
    for _ in range(runs):
        paged_times.append(paged())
        contiguous_times.append(contiguous())
        if on_run is not None:
            on_run()
    tokens = batch * steps
    return CpuDecodeResult(
        batch,
        context,
        steps,
        kv_type,
        tokens / statistics.median(paged_times),
        tokens / statistics.median(contiguous_times),
    )


def run_gpu_decode(
    batch: int,
    context: int,
    n_heads: int = 32,
    n_kv_heads: int = 8,
    head_dim: int = 128,
    block_size: int = 16,
    iters: int = 50,
) -> GpuDecodeResult:
    """The Triton decode kernel over f16 KV in shuffled blocks vs SDPA over the same KV made contiguous."""
    import torch

    from engine.kernels.paged_decode import paged_decode_attention

    device = "cuda"
    blocks_per_seq = -(-context // block_size)
    num_blocks = batch * blocks_per_seq + 1
    k_cache = torch.randn(num_blocks, block_size, n_kv_heads, head_dim, device=device, dtype=torch.float16)
    v_cache = torch.randn_like(k_cache)
    tables = (torch.randperm(num_blocks - 1, device=device) + 1).view(batch, blocks_per_seq).to(torch.int32)
    seq_lens = torch.full((batch,), context, dtype=torch.int32, device=device)
    q = torch.randn(batch, n_heads, head_dim, device=device, dtype=torch.float16)
    scale = head_dim**-0.5

    def contiguous(cache: torch.Tensor) -> torch.Tensor:
        return cache[tables.long()].reshape(batch, -1, n_kv_heads, head_dim)[:, :context].transpose(1, 2).contiguous()

    k_contig, v_contig = contiguous(k_cache), contiguous(v_cache)
    q_sdpa = q.view(batch, n_heads, 1, head_dim)

    def timed_ms(fn: Callable[[], object]) -> float:
        fn()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) / iters

    paged_ms = timed_ms(lambda: paged_decode_attention(q, k_cache, v_cache, tables, seq_lens, scale, "f16", "f16"))
    sdpa_ms = timed_ms(
        lambda: torch.nn.functional.scaled_dot_product_attention(
            q_sdpa, k_contig, v_contig, scale=scale, enable_gqa=True
        )
    )
    name = torch.cuda.get_device_name()
    peak = next((bw for key, bw in PEAK_BANDWIDTH_GBPS.items() if key in name), float("nan"))
    kv_bytes = 2 * batch * context * n_kv_heads * head_dim * 2
    return GpuDecodeResult(name, batch, context, paged_ms, sdpa_ms, kv_bytes, peak)


def format_cpu_decode(result: CpuDecodeResult, runs: int) -> list[str]:
    return [
        f"CPU decode, tiny model, batch {result.batch}, context {result.context}, {result.steps} steps, "
        f"KV {result.kv_type}, median of {runs}:",
        f"  paged engine (torch kernels)  {result.paged_tok_s:10.1f} tok/s",
        f"  contiguous reference          {result.contiguous_tok_s:10.1f} tok/s",
        f"  ratio paged / contiguous      {result.ratio:10.3f}",
    ]


def format_gpu_decode(result: GpuDecodeResult) -> list[str]:
    return [
        f"GPU decode kernel on {result.device}, batch {result.batch}, context {result.context}, f16 KV:",
        f"  paged Triton kernel   {result.paged_gbps:9.1f} GB/s ({result.paged_ms:.3f} ms)",
        f"  SDPA, contiguous KV   {result.sdpa_gbps:9.1f} GB/s ({result.sdpa_ms:.3f} ms)",
        f"  card peak             {result.peak_gbps:9.1f} GB/s",
        f"  paged / peak {result.paged_gbps / result.peak_gbps:.3f},"
        f" paged / SDPA {result.paged_gbps / result.sdpa_gbps:.3f}",
    ]
