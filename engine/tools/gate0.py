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
5. Speculative decoding (greedy, at least SPEC_MIN_TOKENS tokens): for each proposer
   (ngram, draft, self) and k in SPEC_KS, on permuted blocks, the tokens equal the
   reference's, and drafts were accepted (so the verification path really ran). Also: a
   draft that is a copy of the target (own weights, own KV) has its drafts accepted;
   speculation under chunked prefill and preemption still matches; prefix hits on blocks
   that once held rejected drafts match, and the prefix cache indexes only verified tokens.

`--checks paged|speculative` runs one group (default: all).

Exit codes: 0 all checks pass, 1 a check failed (a mismatch), 2 bad arguments or an
impossible configuration (one error line on stderr).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.core.limits import MAX_BLOCK_SIZE, MAX_CONTEXT
from engine.tools.common import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_OK,
    ArgumentParser,
    int_in,
    parse_args,
    positive_int,
    prepare_triton,
    torch_device,
)

if TYPE_CHECKING:
    from engine.model.llama import LlamaModel
    from engine.runtime.llm_engine import LLMEngine, RequestOutput

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
SPEC_METHODS = ("ngram", "draft", "self")
SPEC_KS = (1, 4)
REPETITIVE_PROMPT = "the cat sat on the mat. the cat sat on the mat. the cat sat"
# a copy of the target drafts what the target picks, up to argmax near-ties between the
# draft's decode kernel and the target's prefill kernel (different summation orders)
COPY_DRAFT_MIN_ACCEPTANCE = 0.95
CHECK_GROUPS = ("all", "paged", "speculative")
# the speculative checks generate at least this many tokens: the tiny model needs a couple
# of dozen before it repeats itself, and only then does prompt lookup get a draft accepted
SPEC_MIN_TOKENS = 24


@dataclass(frozen=True)
class Gate0Config:
    max_batch: int = 8
    max_tokens: int = 16
    block_size: int = 4
    backend: str = "torch"
    seed: int = 0
    device: str = "cpu"
    checks: str = "all"  # all, paged or speculative


@dataclass(frozen=True)
class CheckResult:
    name: str
    passed: bool
    detail: str


class _Harness:
    """The model, the contiguous reference (memoized) and an engine factory shared by the checks."""

    def __init__(self, config: Gate0Config) -> None:
        import torch

        from engine.model.llama import LlamaModel

        if config.device.startswith("cuda") and not torch.cuda.is_available():
            raise ValueError(f"device {config.device!r} was requested but CUDA is not available")
        self.config = config
        self.model = LlamaModel.tiny().to(config.device)
        self._references: dict[tuple[int, ...], list[int]] = {}

    def reference(self, token_ids: Sequence[int], max_tokens: int) -> list[int]:
        from engine.model.reference import contiguous_greedy

        key = (max_tokens, *token_ids)
        if key not in self._references:
            self._references[key] = contiguous_greedy(self.model, [list(token_ids)], max_tokens).token_ids[0]
        return self._references[key]

    def engine(self, draft_model: LlamaModel | None = None, **overrides: object) -> LLMEngine:
        from engine.runtime.llm_engine import EngineConfig, LLMEngine

        base = dict(
            block_size=self.config.block_size,
            num_blocks=256,
            cache_type_k="f32",
            cache_type_v="f32",
            attention_backend=self.config.backend,
            record_logits=True,
            flash_attn="enabled",
            device=self.config.device,
        )
        base.update(overrides)
        return LLMEngine(self.model, EngineConfig(**base), draft_model)  # type: ignore[arg-type]

    def token_mismatches(self, outputs: Sequence[RequestOutput], max_tokens: int | None = None) -> list[str]:
        """The outputs whose tokens are not the reference's `max_tokens` (default: the config's) tokens."""
        wanted = self.config.max_tokens if max_tokens is None else max_tokens
        return [
            f"{o.request_id} prompt {o.prompt_token_ids[:6]}..."
            for o in outputs
            if o.token_ids != self.reference(o.prompt_token_ids, wanted)
        ]


def run_gate0(config: Gate0Config, on_check: Callable[[CheckResult], None] | None = None) -> list[CheckResult]:
    """All Gate 0 checks (or the group `config.checks` names); never raises on a mismatch, reports it."""
    if config.checks not in CHECK_GROUPS:
        raise ValueError(f"unknown check group {config.checks!r}; valid groups: {', '.join(CHECK_GROUPS)}")
    harness = _Harness(config)
    results: list[CheckResult] = []

    def report(result: CheckResult) -> None:
        results.append(result)
        if on_check is not None:
            on_check(result)

    if config.checks in ("all", "paged"):
        _paged_checks(harness, report)
    if config.checks in ("all", "speculative"):
        _speculative_checks(harness, report)
    return results


def _paged_checks(harness: _Harness, report: Callable[[CheckResult], None]) -> None:
    import torch

    from engine.runtime.sampling import SamplingParams

    config, engine, token_mismatches = harness.config, harness.engine, harness.token_mismatches
    params = SamplingParams(max_tokens=config.max_tokens, ignore_eos=True)
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


def _speculative_checks(harness: _Harness, report: Callable[[CheckResult], None]) -> None:
    from engine.core.hashing import hash_request_tokens
    from engine.core.request import Request
    from engine.model.llama import LlamaModel
    from engine.runtime.sampling import SamplingParams
    from engine.runtime.spec_decode.config import SpeculativeConfig

    config, engine, token_mismatches = harness.config, harness.engine, harness.token_mismatches
    max_tokens = max(config.max_tokens, SPEC_MIN_TOKENS)
    params = SamplingParams(max_tokens=max_tokens, ignore_eos=True)
    prompts = [REPETITIVE_PROMPT, *PROMPTS[: max(1, min(config.max_batch, len(PROMPTS)) - 1)]]

    for method in SPEC_METHODS:
        for k in SPEC_KS:
            spec = engine(speculative=SpeculativeConfig(method, k), block_shuffle_seed=config.seed + k)
            outputs = spec.generate(prompts, params)
            bad_tokens = token_mismatches(outputs, max_tokens)
            stats = spec.spec_stats
            report(
                CheckResult(
                    f"speculative {method} k={k}: greedy tokens == contiguous reference",
                    not bad_tokens and stats.num_accepted_tokens > 0,
                    f"{stats.num_accepted_tokens}/{stats.num_draft_tokens} drafts accepted in {spec.stats.steps} steps"
                    + ("" if not bad_tokens else "; tokens differ: " + "; ".join(bad_tokens)),
                )
            )

    model = harness.model
    copy = LlamaModel(model.config, {name: w.clone() for name, w in model.weights.items()}, model.tokens)
    spec = engine(draft_model=copy, speculative=SpeculativeConfig("draft", 4), block_shuffle_seed=config.seed)
    outputs = spec.generate(prompts, params)
    bad_tokens = token_mismatches(outputs, max_tokens)
    rate = spec.spec_stats.acceptance_rate
    report(
        CheckResult(
            "speculative draft = copy of the target (own weights, own KV): drafts accepted, tokens match",
            not bad_tokens and rate >= COPY_DRAFT_MIN_ACCEPTANCE,
            f"acceptance {rate:.1%} (needs {COPY_DRAFT_MIN_ACCEPTANCE:.0%})"
            + ("" if not bad_tokens else "; tokens differ: " + "; ".join(bad_tokens)),
        )
    )

    stress_prompts = [REPETITIVE_PROMPT, *PROMPTS[:5]]
    need = max(-(-(len(p) + 1 + max_tokens) // config.block_size) for p in stress_prompts)
    stressed = engine(
        speculative=SpeculativeConfig("ngram", 4),
        num_blocks=need + 3,
        max_num_batched_tokens=2 * config.block_size + 1,
        block_shuffle_seed=config.seed,
    )
    outputs = stressed.generate(stress_prompts, params)
    bad_tokens = token_mismatches(outputs, max_tokens)
    s = stressed.stats
    report(
        CheckResult(
            "speculative decoding under chunked prefill and preemption matches the reference",
            s.preemptions > 0 and s.chunked_prefills > 0 and stressed.spec_stats.num_drafts > 0 and not bad_tokens,
            f"{s.chunked_prefills} partial chunks, {s.preemptions} preemptions,"
            f" {stressed.spec_stats.num_drafts} verifications"
            + ("" if not bad_tokens else "; tokens differ: " + "; ".join(bad_tokens)),
        )
    )

    # generated text becomes the next prompts: their prefix hits cover blocks that held
    # rejected drafts during the first round
    cached = engine(speculative=SpeculativeConfig("self", 4))
    first = cached.generate(prompts, params)
    second = cached.generate([o.prompt_token_ids + o.token_ids for o in first], params)
    bad_tokens = token_mismatches(first + second, max_tokens)
    hits = [o.num_cached_tokens for o in second]
    verified: set[bytes] = set()
    for o in first + second:
        request = Request("check", o.prompt_token_ids + o.token_ids)
        verified.update(hash_request_tokens(config.block_size, request))
    indexed = set(cached.kv_manager.block_pool.cached_block_hash_to_block)
    unverified = len(indexed - verified)
    report(
        CheckResult(
            "speculative decoding keeps prefix caching: hits match, only verified tokens are indexed",
            all(h > 0 for h in hits) and not bad_tokens and unverified == 0,
            f"cached tokens per request {hits}; {len(indexed)} indexed blocks, {unverified} with unverified tokens"
            + ("" if not bad_tokens else "; tokens differ: " + "; ".join(bad_tokens)),
        )
    )


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(
        prog="python -m engine gate0", description="Gate 0: paged KV must match the contiguous reference."
    )
    parser.add_argument("--max-batch", type=positive_int, default=8, help="largest batch size checked (default 8)")
    parser.add_argument(
        "--max-tokens", type=int_in(1, MAX_CONTEXT), default=16, help="tokens generated per request (default 16)"
    )
    parser.add_argument(
        "--block-size", type=int_in(1, MAX_BLOCK_SIZE), default=4, help="KV block size in tokens (default 4)"
    )
    parser.add_argument(
        "--backend",
        choices=("torch", "triton"),
        default="torch",
        help="kernels: the plain-torch references or Triton (interpreted on CPU; slow)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the block permutations")
    parser.add_argument(
        "--device", default="cpu", type=torch_device, help="torch device (cuda runs the Triton kernels compiled)"
    )
    parser.add_argument("--checks", choices=CHECK_GROUPS, default="all", help="which checks run (default all)")
    args = parse_args(parser, argv)
    if isinstance(args, int):
        return args
    prepare_triton(args.backend, args.device)
    config = Gate0Config(
        args.max_batch, args.max_tokens, args.block_size, args.backend, args.seed, args.device, args.checks
    )

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
