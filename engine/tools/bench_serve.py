"""`python -m engine bench serve`: end-to-end serving, the paged engine under continuous
batching against the same model run with plain torch and SDPA on a contiguous cache under
static batching, one run each, same requests, as a table.

The workload: R requests submitted at once, all with a prompt of P tokens (so the baseline
batches them without padding: its best case) and output lengths drawn (seeded) between O/8
and O, greedy. Both sides hold at most B sequences at a time.

- Paged engine: `LLMEngine` with `max_num_seqs=B`: a finished sequence's slot and blocks
  go to the next request at once (continuous batching, chunked prefill mixed with decode).
- Baseline: requests in arrival order in batches of B; each batch is prefilled together,
  then decoded until its longest output is done (the slots of finished sequences idle).

Reported: generated tokens/s (only tokens a request asked for), time to first token (mean,
p50, p90, from the common start) and how many requests produced the same tokens on both
sides (f32 weights; paged and contiguous attention sum in different orders, so a near tie
in the logits may resolve differently). Shapes: `tiny` (the embedded model, for CPU) or
`1b` (a 1.1B-parameter llama shape: 22 layers, hidden 2048, 32/4 heads, vocab 32000,
random weights), for a GPU.

Nothing here asserts a speed; the runner returns numbers and prints nothing.
"""

from __future__ import annotations

import random
import statistics
import time
from dataclasses import dataclass

SHAPES = ("tiny", "1b")


@dataclass(frozen=True)
class ServeWorkload:
    requests: int = 32
    prompt_tokens: int = 64
    max_output_tokens: int = 64
    max_num_seqs: int = 8
    seed: int = 0

    def output_lengths(self) -> list[int]:
        rng = random.Random(self.seed)
        low = max(1, self.max_output_tokens // 8)
        return [rng.randint(low, self.max_output_tokens) for _ in range(self.requests)]


@dataclass(frozen=True)
class ServeSide:
    seconds: float
    tokens: int
    ttft: list[float]  # seconds from the common start, per request

    @property
    def tok_s(self) -> float:
        return self.tokens / self.seconds

    def ttft_quantile(self, q: float) -> float:
        ordered = sorted(self.ttft)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass(frozen=True)
class ServeResult:
    shape: str
    device: str
    kv_type: str
    workload: ServeWorkload
    paged: ServeSide
    baseline: ServeSide
    same_tokens: int

    @property
    def throughput_ratio(self) -> float:
        return self.paged.tok_s / self.baseline.tok_s


def _model(shape: str, device: str):  # type: ignore[no-untyped-def]
    from engine.model.llama import LlamaConfig, LlamaModel, random_weights

    if shape == "tiny":
        return LlamaModel.tiny().to(device)
    if shape != "1b":
        raise ValueError(f"unknown shape {shape!r}; choose from {', '.join(SHAPES)}")
    config = LlamaConfig(
        vocab_size=32000,
        hidden_size=2048,
        intermediate_size=5632,
        num_layers=22,
        num_heads=32,
        num_kv_heads=4,
        head_dim=64,
        max_position=4096,
    )
    return LlamaModel(config, random_weights(config, seed=0)).to(device)


def run_serve_bench(
    workload: ServeWorkload, shape: str = "tiny", device: str = "cpu", kv_type: str = "f32"
) -> ServeResult:
    import torch

    from engine.model.reference import ContiguousKV, forward_contiguous
    from engine.runtime.llm_engine import EngineConfig, LLMEngine
    from engine.runtime.sampling import SamplingParams

    w = workload
    if min(w.requests, w.prompt_tokens, w.max_output_tokens, w.max_num_seqs) < 1:
        raise ValueError("requests, prompt tokens, output tokens and sequences must be >= 1")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} was requested but CUDA is not available")
    model = _model(shape, device)
    generator = torch.Generator().manual_seed(w.seed)
    prompts = torch.randint(2, model.config.vocab_size, (w.requests, w.prompt_tokens), generator=generator).tolist()
    lengths = w.output_lengths()

    def sync() -> None:
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    block_size = 16
    per_seq_blocks = -(-(w.prompt_tokens + w.max_output_tokens) // block_size)
    config = EngineConfig(
        block_size=block_size,
        num_blocks=w.max_num_seqs * per_seq_blocks + 1,
        max_num_seqs=w.max_num_seqs,
        max_num_batched_tokens=w.max_num_seqs * w.prompt_tokens,
        enable_prefix_caching=False,  # random prompts share nothing; keep the comparison about batching
        cache_type_k=kv_type,
        cache_type_v=kv_type,
        device=device,
    )

    def paged() -> tuple[ServeSide, list[list[int]]]:
        engine = LLMEngine(model, config)
        ids = [engine.add_request(p, SamplingParams(max_tokens=n, ignore_eos=True)) for p, n in zip(prompts, lengths)]
        first: dict[str, float] = {}
        outputs: dict[str, list[int]] = {}
        sync()
        start = time.perf_counter()
        while engine.has_unfinished():
            for output in engine.step():
                outputs[output.request_id] = output.token_ids
            now = time.perf_counter() - start
            for request_id in ids:
                if request_id not in first and engine.num_output_tokens(request_id) > 0:
                    first[request_id] = now
        sync()
        seconds = time.perf_counter() - start
        return ServeSide(seconds, sum(lengths), [first[i] for i in ids]), [outputs[i] for i in ids]

    @torch.inference_mode()
    def baseline() -> tuple[ServeSide, list[list[int]]]:
        tokens_out: list[list[int]] = []
        ttft: list[float] = []
        sync()
        start = time.perf_counter()
        for at in range(0, w.requests, w.max_num_seqs):
            batch_prompts = prompts[at : at + w.max_num_seqs]
            batch_lengths = lengths[at : at + w.max_num_seqs]
            longest = max(batch_lengths)
            cache = ContiguousKV.empty(model, len(batch_prompts), w.prompt_tokens + longest)
            tokens = forward_contiguous(model, cache, torch.tensor(batch_prompts, device=model.device))
            tokens = tokens.argmax(-1, keepdim=True)
            steps = [tokens]
            sync()
            ttft += [time.perf_counter() - start] * len(batch_prompts)
            for _ in range(longest - 1):
                tokens = forward_contiguous(model, cache, tokens).argmax(-1, keepdim=True)
                steps.append(tokens)
            generated = torch.cat(steps, dim=1).tolist()
            tokens_out += [row[:n] for row, n in zip(generated, batch_lengths)]
        sync()
        return ServeSide(time.perf_counter() - start, sum(lengths), ttft), tokens_out

    paged_side, paged_tokens = paged()
    baseline_side, baseline_tokens = baseline()
    same = sum(a == b for a, b in zip(paged_tokens, baseline_tokens))
    return ServeResult(shape, device, kv_type, w, paged_side, baseline_side, same)


def format_serve_bench(result: ServeResult) -> list[str]:
    w = result.workload
    lines = [
        f"Serving, {result.shape} model on {result.device}, KV {result.kv_type}: {w.requests} requests at once, "
        f"prompt {w.prompt_tokens} tokens, output {max(1, w.max_output_tokens // 8)}..{w.max_output_tokens} tokens "
        f"(seed {w.seed}), at most {w.max_num_seqs} sequences, greedy",
        f"  {'':<34} {'tok/s':>9} {'TTFT mean':>10} {'p50':>8} {'p90':>8}   (TTFT in ms)",
    ]
    for name, side in (
        ("paged engine, continuous batching", result.paged),
        ("plain torch + SDPA, static batches", result.baseline),
    ):
        lines.append(
            f"  {name:<34} {side.tok_s:9.1f} {statistics.mean(side.ttft) * 1e3:10.1f} "
            f"{side.ttft_quantile(0.5) * 1e3:8.1f} {side.ttft_quantile(0.9) * 1e3:8.1f}"
        )
    lines.append(f"  throughput ratio paged / baseline: {result.throughput_ratio:.3f}")
    lines.append(f"  requests with identical tokens on both sides: {result.same_tokens}/{w.requests}")
    return lines
