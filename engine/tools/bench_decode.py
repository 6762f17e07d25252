"""Decode throughput of the paged engine against baselines measured in the same run.

- CPU: decode tokens/s of the paged engine (the torch twins of the kernels) against the
  contiguous-KV reference (`engine.model.reference`), same model, batch and context, as a ratio.

The GPU benchmark (the Triton kernels against SDPA, GB/s against the card's peak) lives in
`engine.tools.bench_gpu`.

Nothing here asserts a speed; the runners return numbers and print nothing.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass


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


def format_cpu_decode(result: CpuDecodeResult, runs: int) -> list[str]:
    return [
        f"CPU decode, tiny model, batch {result.batch}, context {result.context}, {result.steps} steps, "
        f"KV {result.kv_type}, median of {runs}:",
        f"  paged engine (torch kernels)  {result.paged_tok_s:10.1f} tok/s",
        f"  contiguous reference          {result.contiguous_tok_s:10.1f} tok/s",
        f"  ratio paged / contiguous      {result.ratio:10.3f}",
    ]
