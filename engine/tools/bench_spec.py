"""`python -m engine bench spec`: speculative decoding's acceptance and speed-up, per proposer and k.

Every configuration decodes the same prompts greedily, one request at a time (batch 1, where
decoding is latency-bound and speculation pays), on a fresh engine, and is timed against
non-speculative decoding measured in the same run, configurations interleaved round by
round: the speed-up column is a ratio of medians, never an absolute target. Columns:

- accept: accepted draft tokens / proposed draft tokens;
- mean acc: accepted draft tokens per verification (bonus token not counted);
- tok/fwd: generated tokens per target forward pass (non-speculative: 1.00);
- same: whether the tokens equal the non-speculative run's (they must: greedy is lossless).

The draft of "draft" is the default standalone 1-layer cut of the tiny target and "self" runs
the target's first layer: on this random-weight model both accept the same drafts, and they
differ only in memory (own weights vs shared).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

BENCH_PROMPTS = (
    "the cat sat on the mat. the cat sat on the mat. the cat sat on the mat. the cat",  # repetitive
    "Speculative decoding drafts tokens cheaply and verifies them in one pass",
)
# The tiny model has random weights: it does not continue a text, but greedy decoding falls
# into loops after a few dozen tokens, which is where prompt lookup earns its keep.
SPEC_METHODS = ("ngram", "draft", "self")


@dataclass(frozen=True)
class SpecBenchRow:
    method: str  # "none" for the baseline
    k: int
    seconds: float  # median wall-clock of one run over all prompts
    tokens: int  # generated per run
    forward_passes: int  # target forward passes per run
    acceptance_rate: float
    mean_accepted_length: float
    same_tokens: bool


@dataclass(frozen=True)
class SpecBenchResult:
    rows: list[SpecBenchRow]
    runs: int
    max_tokens: int
    device: str
    backend: str


def run_spec_bench(
    ks: Sequence[int],
    max_tokens: int = 96,
    runs: int = 3,
    device: str = "cpu",
    methods: Sequence[str] = SPEC_METHODS,
    on_measurement: Callable[[int, int], None] | None = None,
) -> SpecBenchResult:
    """Every configuration once per round, rounds repeated `runs` times, so that load changes
    on a shared machine fall on the baseline and the speculative runs alike."""
    from engine.model.llama import LlamaModel
    from engine.runtime.llm_engine import EngineConfig, LLMEngine
    from engine.runtime.sampling import SamplingParams
    from engine.runtime.spec_decode.config import SpeculativeConfig

    if runs < 1 or max_tokens < 1 or not ks:
        raise ValueError("spec: runs and max tokens must be >= 1, and at least one k given")
    backend = "triton" if device.startswith("cuda") else "torch"
    model = LlamaModel.tiny().to(device)
    params = SamplingParams(max_tokens=max_tokens, ignore_eos=True)
    configs: list[SpeculativeConfig | None] = [None] + [SpeculativeConfig(m, k) for m in methods for k in ks]
    times: list[list[float]] = [[] for _ in configs]
    tokens: list[list[list[int]]] = [[] for _ in configs]
    engines: list[LLMEngine | None] = [None for _ in configs]
    done = 0
    for _ in range(runs):
        for index, spec in enumerate(configs):
            engine = LLMEngine(model, EngineConfig(device=device, attention_backend=backend, speculative=spec))
            start = time.perf_counter()
            # one request at a time: batch 1
            tokens[index] = [engine.generate([prompt], params)[0].token_ids for prompt in BENCH_PROMPTS]
            if device.startswith("cuda"):
                import torch

                torch.cuda.synchronize()
            times[index].append(time.perf_counter() - start)
            engines[index] = engine
            done += 1
            if on_measurement is not None:
                on_measurement(done, runs * len(configs))
    rows = []
    for index, spec in enumerate(configs):
        engine = engines[index]
        assert engine is not None
        stats = engine.spec_stats
        rows.append(
            SpecBenchRow(
                spec.method if spec else "none",
                spec.num_speculative_tokens if spec else 0,
                statistics.median(times[index]),
                sum(len(t) for t in tokens[index]),
                engine.stats.steps,
                stats.acceptance_rate,
                stats.mean_accepted_length,
                tokens[index] == tokens[0],
            )
        )
    return SpecBenchResult(rows, runs, max_tokens, device, backend)


def format_spec_header(runs: int, max_tokens: int, device: str, backend: str) -> list[str]:
    return [
        f"speculative decoding on {device} ({backend} kernels), tiny model, greedy, batch 1:"
        f" {len(BENCH_PROMPTS)} prompts x {max_tokens} tokens, median of {runs} run(s), prefill included",
        f"{'proposer':<9}{'k':>3}{'accept':>9}{'mean acc':>10}{'tok/fwd':>9}{'tok/s':>9}{'speed-up':>10}{'same':>6}",
    ]


def format_spec_row(row: SpecBenchRow, base_seconds: float) -> str:
    """One table row; the speed-up is the baseline's median time over this row's."""
    if row.method == "none":
        k, accept, mean = "-", "-", "-"
    else:
        k, accept, mean = str(row.k), f"{row.acceptance_rate:.1%}", f"{row.mean_accepted_length:.2f}"
    return (
        f"{row.method:<9}{k:>3}{accept:>9}{mean:>10}{row.tokens / row.forward_passes:>9.2f}"
        f"{row.tokens / row.seconds:>9.1f}{base_seconds / row.seconds:>9.2f}x{'yes' if row.same_tokens else 'NO':>6}"
    )


def format_spec_bench(result: SpecBenchResult) -> list[str]:
    lines = format_spec_header(result.runs, result.max_tokens, result.device, result.backend)
    return lines + [format_spec_row(row, result.rows[0].seconds) for row in result.rows]
