"""Gate 0: attention must not care where the KV lives.

`python -m engine gate0 [--max-batch N] [--max-tokens N] [--block-size N] [--backend torch|triton] [--device D]`

Checks, each on the embedded tiny model, greedy, f32 KV unless stated:

1. For batch sizes 1 .. max-batch: the engine with blocks handed out in a random
   permutation generates exactly the tokens of the contiguous-KV reference, and its
   logits are bit-identical to the same engine with blocks handed out in order (the
   same kernels on the same schedule: only the block placement differs).
2. Prefix hits: requests sharing a prompt prefix reuse cached blocks (hits > 0) and still
   generate the reference's tokens.
3. Chunked prefill and preemption: a small token budget and a small cache force chunked
   prefills, mixed steps and preemption by recompute; tokens still match the reference.
4. q8_0 KV: logits stay within Q8_0_LOGIT_TOLERANCE of the f32-KV engine's, compared
   step by step while both have generated the same tokens.

Exit codes: 0 all checks pass, 1 a check failed (a mismatch), 2 bad arguments or an
impossible configuration (one error line on stderr).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.tools.common import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, parse_args, positive_int, prepare_triton

if TYPE_CHECKING:
    from engine.runtime.llm_engine import RequestOutput

# The absolute logit error a q8_0 KV cache may add on the tiny model (logits of magnitude
# up to ~4; measured worst case ~0.025 on the default run).
Q8_0_LOGIT_TOLERANCE = 0.1

PROMPTS = (
    "Paged attention",
    "The quick brown fox",
    "a",
    "KV blocks live anywhere, attention does not care.",
    "0123456789",
    "Hello, world!",
    "Gate zero",
    "Continuous batching mixes prefill and decode",
)
SHARED_PREFIX = "System: you are a tiny random model. Answer briefly. "
PREFIX_SUFFIXES = ("Q1", "Question two?", "3", "And four")


@dataclass(frozen=True)
class Gate0Config:
    max_batch: int = 8
    max_tokens: int = 16
    block_size: int = 4
    backend: str = "torch"
    seed: int = 0
    device: str = "cpu"


@dataclass(frozen=True)
class CheckResult:
    name: str
    passed: bool
    detail: str


def run_gate0(config: Gate0Config, on_check: Callable[[CheckResult], None] | None = None) -> list[CheckResult]:
    """All Gate 0 checks; never raises on a mismatch, reports it."""
    import torch

    from engine.model.llama import LlamaModel
    from engine.model.reference import contiguous_greedy
    from engine.runtime.llm_engine import EngineConfig, LLMEngine
    from engine.runtime.sampling import SamplingParams

    if config.device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device {config.device!r} was requested but CUDA is not available")
    model = LlamaModel.tiny().to(config.device)
    params = SamplingParams(max_tokens=config.max_tokens, ignore_eos=True)
    results: list[CheckResult] = []
    reference_cache: dict[tuple[int, ...], list[int]] = {}

    def report(result: CheckResult) -> None:
        results.append(result)
        if on_check is not None:
            on_check(result)

    def reference(token_ids: Sequence[int]) -> list[int]:
        key = tuple(token_ids)
        if key not in reference_cache:
            reference_cache[key] = contiguous_greedy(model, [list(key)], config.max_tokens).token_ids[0]
        return reference_cache[key]

    def engine(**overrides: object) -> LLMEngine:
        base = dict(
            block_size=config.block_size,
            num_blocks=256,
            cache_type_k="f32",
            cache_type_v="f32",
            attention_backend=config.backend,
            record_logits=True,
            flash_attn="enabled",
            device=config.device,
        )
        base.update(overrides)
        return LLMEngine(model, EngineConfig(**base))  # type: ignore[arg-type]

    def token_mismatches(outputs: Sequence[RequestOutput]) -> list[str]:
        return [
            f"{o.request_id} prompt {o.prompt_token_ids[:6]}..."
            for o in outputs
            if o.token_ids != reference(o.prompt_token_ids)
        ]

    for batch in range(1, config.max_batch + 1):
        prompts = (
            list(PROMPTS[:batch])
            if batch <= len(PROMPTS)
            else [PROMPTS[i % len(PROMPTS)] + str(i) for i in range(batch)]
        )
        permuted_engine = engine(block_shuffle_seed=config.seed + batch)
        in_order = engine()
        permuted = permuted_engine.generate(prompts, params)
        ordered = in_order.generate(prompts, params)
        bad_tokens = token_mismatches(permuted)
        report(
            CheckResult(
                f"batch {batch}: permuted blocks == contiguous reference tokens",
                not bad_tokens,
                "all tokens equal" if not bad_tokens else "differ: " + "; ".join(bad_tokens),
            )
        )
        differing = [
            p.request_id
            for p, o in zip(permuted, ordered)
            if len(p.logits) != len(o.logits) or not all(torch.equal(a, b) for a, b in zip(p.logits, o.logits))
        ]
        report(
            CheckResult(
                f"batch {batch}: permuted vs in-order blocks, logits bit-identical",
                not differing,
                f"{sum(len(p.logits) for p in permuted)} logit rows equal" if not differing else f"differ: {differing}",
            )
        )

    prefix_engine = engine()
    first = prefix_engine.generate([SHARED_PREFIX + "Q0"], params)
    rest = prefix_engine.generate([SHARED_PREFIX + s for s in PREFIX_SUFFIXES], params)
    hits = [o.num_cached_tokens for o in rest]
    bad_tokens = token_mismatches(first + rest)
    report(
        CheckResult(
            "prefix hits reuse cached blocks and match the reference",
            all(h > 0 for h in hits) and not bad_tokens,
            f"cached tokens per request {hits}"
            + ("" if not bad_tokens else "; tokens differ: " + "; ".join(bad_tokens)),
        )
    )

    stress_prompts = list(PROMPTS[:6])
    need = max(-(-(len(p) + 1 + config.max_tokens) // config.block_size) for p in stress_prompts)
    stressed = engine(
        num_blocks=need + 3, max_num_batched_tokens=2 * config.block_size + 1, block_shuffle_seed=config.seed
    )
    outputs = stressed.generate(stress_prompts, params)
    bad_tokens = token_mismatches(outputs)
    s = stressed.stats
    exercised = s.preemptions > 0 and s.chunked_prefills > 0 and s.mixed_steps > 0
    report(
        CheckResult(
            "chunked prefill, mixed steps and preemption match the reference",
            exercised and not bad_tokens,
            f"{s.chunked_prefills} partial chunks, {s.mixed_steps} mixed steps, {s.preemptions} preemptions"
            + ("" if not bad_tokens else "; tokens differ: " + "; ".join(bad_tokens)),
        )
    )

    prompts = list(PROMPTS[: min(config.max_batch, len(PROMPTS))])
    exact = engine().generate(prompts, params)
    quantized = engine(cache_type_k="q8_0", cache_type_v="q8_0").generate(prompts, params)
    worst, compared = 0.0, 0
    for e, q in zip(exact, quantized):
        for step, (a, b) in enumerate(zip(e.logits, q.logits)):
            worst = max(worst, float((a - b).abs().max()))
            compared += 1
            if e.token_ids[step] != q.token_ids[step]:
                break
    agree = sum(a == b for e, q in zip(exact, quantized) for a, b in zip(e.token_ids, q.token_ids))
    total = sum(len(e.token_ids) for e in exact)
    report(
        CheckResult(
            f"q8_0 KV logits within {Q8_0_LOGIT_TOLERANCE} of f32 KV",
            worst <= Q8_0_LOGIT_TOLERANCE,
            f"max |dlogit| {worst:.4f} over {compared} steps; {agree}/{total} tokens agree",
        )
    )
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m engine gate0", description="Gate 0: paged KV must match the contiguous reference."
    )
    parser.add_argument("--max-batch", type=positive_int, default=8, help="largest batch size checked (default 8)")
    parser.add_argument("--max-tokens", type=positive_int, default=16, help="tokens generated per request (default 16)")
    parser.add_argument("--block-size", type=positive_int, default=4, help="KV block size in tokens (default 4)")
    parser.add_argument(
        "--backend",
        choices=("torch", "triton"),
        default="torch",
        help="kernels: the plain-torch references or Triton (interpreted on CPU; slow)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the block permutations")
    parser.add_argument("--device", default="cpu", help="torch device (cuda runs the Triton kernels compiled)")
    args = parse_args(parser, argv)
    if isinstance(args, int):
        return args
    prepare_triton(args.backend, args.device)
    config = Gate0Config(args.max_batch, args.max_tokens, args.block_size, args.backend, args.seed, args.device)

    def show(result: CheckResult) -> None:
        print(f"{'PASS' if result.passed else 'FAIL'}  {result.name}: {result.detail}", flush=True)

    try:
        results = run_gate0(config, show)
    except ValueError as exc:  # an impossible configuration, e.g. a device that is not there
        print(f"engine gate0: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    failed = [r for r in results if not r.passed]
    print(f"gate0: {len(results) - len(failed)}/{len(results)} checks passed")
    return EXIT_FAILED if failed else EXIT_OK
