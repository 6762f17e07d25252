"""`python -m engine generate [PROMPT ...]`: generate text, by default with the embedded tiny model.

`--speculative ngram|draft|self --num-speculative-tokens K` decodes speculatively: prompt
lookup, a draft model (`--draft-model GGUF`; without one, a separate 1-layer cut of the
target) or the target's first `--draft-layers` layers propose K tokens per step and the
target verifies them in one pass. Greedy output is the same as without speculation; the
acceptance is reported on stderr.

Sizes and sampling parameters are checked before anything is allocated: block size and block
count within the engine's bounds (`engine.core.limits`), the KV cache they imply against the
device's free memory, temperature and top-p finite.

Exit codes: 0 generated; 2 bad arguments, an unusable GGUF file (target or draft), a draft
whose vocabulary differs from the target's, or an impossible attention/KV configuration, a KV
cache past the device's free memory included (one `engine generate: error: ...` line on stderr).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from engine.core.limits import MAX_BLOCK_SIZE, MAX_CONTEXT, MAX_NUM_BLOCKS
from engine.runtime.sampling import MAX_SEED
from engine.tools.common import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    ArgumentParser,
    finite_float,
    int_in,
    non_negative_int,
    parse_args,
    prepare_triton,
    progress_display,
    show_warnings_on_stderr,
    torch_device,
)

if TYPE_CHECKING:
    from engine.model.gguf_tokenizer import GGUFTokenizer
    from engine.runtime.spec_decode.config import SpeculativeConfig

DEFAULT_PROMPT = "Once upon a time"
PROG = "engine generate"


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(prog="python -m engine generate", description="Generate text with the paged engine.")
    p.add_argument("prompts", nargs="*", metavar="PROMPT", help=f"prompts (default: {DEFAULT_PROMPT!r})")
    p.add_argument("--model", metavar="GGUF", help="a llama GGUF file (default: the embedded tiny model)")
    p.add_argument("--max-tokens", type=int_in(1, MAX_CONTEXT), default=48)
    p.add_argument("--temperature", type=finite_float(0.0), default=0.0, help="0 for greedy (default)")
    p.add_argument("--top-k", type=non_negative_int, default=0, help="0: all tokens (default)")
    p.add_argument("--top-p", type=finite_float(0.0, 1.0, above_minimum=True), default=1.0, help="in (0, 1] (1)")
    p.add_argument(
        "--seed", type=int_in(0, MAX_SEED), default=None, help="sampling seed (sampling is reproducible with one)"
    )
    p.add_argument("--ignore-eos", action="store_true", help="always generate --max-tokens tokens")
    p.add_argument("--cache-type-k", default="f16", help="K cache type: f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1")
    p.add_argument("--cache-type-v", default="f16", help="V cache type (quantized V needs flash attention)")
    p.add_argument("--flash-attn", default=None, help="auto|enabled|disabled (default: $FLASH_ATTN, else auto)")
    p.add_argument("--backend", default="auto", choices=("auto", "torch", "triton"), help="attention kernels")
    p.add_argument("--block-size", type=int_in(1, MAX_BLOCK_SIZE), default=16, help="tokens per KV block (16)")
    p.add_argument(
        "--num-blocks",
        type=int_in(1, MAX_NUM_BLOCKS),
        default=256,
        help="KV blocks (256); their bytes are checked against the device's free memory first",
    )
    p.add_argument("--device", default="cpu", type=torch_device)
    spec = p.add_argument_group("speculative decoding")
    spec.add_argument("--speculative", metavar="METHOD", help="ngram, draft or self (default: off)")
    spec.add_argument("--num-speculative-tokens", type=int, metavar="K", help="tokens drafted per step (default 4)")
    spec.add_argument("--draft-model", metavar="GGUF", help="draft: a llama GGUF with the target's vocabulary")
    spec.add_argument("--draft-layers", type=int, default=1, help="self: the target layers the draft runs (1)")
    spec.add_argument("--prompt-lookup-min", type=int, default=1, help="ngram: shortest suffix matched (1)")
    spec.add_argument("--prompt-lookup-max", type=int, default=4, help="ngram: longest suffix matched (4)")
    return p


def speculative_config(args: argparse.Namespace) -> SpeculativeConfig | None:
    """The speculative settings, or None; ValueError (one line) for a bad combination."""
    from engine.runtime.spec_decode.config import SpeculativeConfig

    if args.speculative is None:
        if args.num_speculative_tokens is not None or args.draft_model is not None:
            raise ValueError("--num-speculative-tokens and --draft-model need --speculative")
        return None
    if args.draft_model is not None and args.speculative != "draft":
        raise ValueError(f"--draft-model is used only with --speculative draft, not {args.speculative!r}")
    k = 4 if args.num_speculative_tokens is None else args.num_speculative_tokens
    return SpeculativeConfig(
        args.speculative,
        k,
        prompt_lookup_min=args.prompt_lookup_min,
        prompt_lookup_max=args.prompt_lookup_max,
        draft_num_layers=args.draft_layers,
    )


def file_tokenizer(path: str) -> GGUFTokenizer | None:
    """The GGUF file's own tokenizer; None for the embedded model's character vocabulary."""
    from engine.model.gguf_tokenizer import load_tokenizer, read_metadata

    if read_metadata(path).get("tokenizer.ggml.model") in (None, "engine-chars"):
        return None
    return load_tokenizer(path)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(build_parser(), argv)
    if isinstance(args, int):
        return args
    prepare_triton(args.backend, args.device)
    show_warnings_on_stderr(PROG)

    from engine.attention.policy import AttentionConfigError
    from engine.model.gguf import GGUFError, load_gguf
    from engine.runtime.llm_engine import EngineConfig, LLMEngine
    from engine.runtime.sampling import SamplingParams

    prompts = args.prompts or [DEFAULT_PROMPT]
    try:
        params = SamplingParams(
            max_tokens=args.max_tokens,
            temperature=args.temperature,
            top_k=args.top_k,
            top_p=args.top_p,
            seed=args.seed,
            ignore_eos=args.ignore_eos,
        )
        spec = speculative_config(args)
        model = load_gguf(args.model) if args.model else None
        tokenizer = file_tokenizer(args.model) if args.model else None
        draft_model = load_gguf(args.draft_model) if args.draft_model else None
        config = EngineConfig(
            block_size=args.block_size,
            num_blocks=args.num_blocks,
            cache_type_k=args.cache_type_k,
            cache_type_v=args.cache_type_v,
            flash_attn=args.flash_attn,
            attention_backend=args.backend,
            device=args.device,
            speculative=spec,
        )
        engine = LLMEngine(model, config, draft_model, tokenizer)
        with progress_display("generating", len(prompts) * args.max_tokens) as progress:
            outputs = engine.generate(prompts, params, progress)
    except (GGUFError, AttentionConfigError, ValueError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    for prompt, output in zip(prompts, outputs):
        print(f"{prompt}{output.text}")
    if spec is not None:
        stats = engine.spec_stats
        print(
            f"{PROG}: speculative {spec.method}, k={spec.num_speculative_tokens}: {stats.num_accepted_tokens}"
            f"/{stats.num_draft_tokens} draft tokens accepted ({stats.acceptance_rate:.1%}), mean accepted length"
            f" {stats.mean_accepted_length:.2f}, {engine.stats.steps} target forward passes",
            file=sys.stderr,
        )
    return EXIT_OK
