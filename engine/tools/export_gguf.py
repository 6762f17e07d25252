"""`python -m engine export-gguf OUT.gguf`: write a model as a llama GGUF file.

By default the embedded tiny model with its `engine-chars` vocabulary (the engine loads it;
llama.cpp refuses that vocabulary). `--vocab llama-spm` writes the tiny architecture with a
SentencePiece `llama` vocabulary (engine/model/gguf_vocab.py) and its embedding and output rows
sized to it: a file llama.cpp loads and runs. `--model IN.gguf` re-exports a model the engine
loads, with IN's own tokenizer. `--type f16` stores the matrices as float16. Weights are seeded
(`--seed`), so the same arguments give the same file on every machine.

Exit codes: 0 written; 2 bad arguments or an unusable input GGUF file
(one `engine export-gguf: error: ...` line on stderr).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from engine.tools.common import EXIT_BAD_INPUT, EXIT_OK, ArgumentParser, parse_args

PROG = "engine export-gguf"


def build_parser() -> argparse.ArgumentParser:
    from engine.model.gguf import WEIGHT_TYPES
    from engine.model.gguf_vocab import VOCABS

    p = ArgumentParser(prog="python -m engine export-gguf", description="Write a model as a GGUF file.")
    p.add_argument("out", metavar="OUT.gguf", help="where to write the file (written atomically)")
    p.add_argument("--vocab", choices=VOCABS, default=None, help="the tiny model's vocabulary (default engine-chars)")
    p.add_argument("--model", metavar="GGUF", help="re-export this llama GGUF file (its tokenizer included)")
    p.add_argument("--type", dest="weight_type", choices=WEIGHT_TYPES, default="f32", help="weight type (f32)")
    p.add_argument("--seed", type=int, default=None, help="the tiny model's weight seed (default: the embedded one)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parse_args(build_parser(), argv)
    if isinstance(args, int):
        return args
    from engine.model.gguf import GGUFError, load_gguf, write_gguf
    from engine.model.gguf_tokenizer import TokenizerError, read_vocabulary
    from engine.model.gguf_vocab import llama_spm_vocabulary, tiny_model_for
    from engine.model.llama import TINY_SEED, LlamaModel

    seed = TINY_SEED if args.seed is None else args.seed
    if not Path(args.out).parent.is_dir():
        print(f"{PROG}: error: no such directory: {Path(args.out).parent}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        if args.model is not None:
            if args.vocab is not None or args.seed is not None:
                raise ValueError("--model keeps the file's own vocabulary and weights: drop --vocab and --seed")
            model = load_gguf(args.model)
            vocabulary = read_vocabulary(args.model) if model.tokens is not None and not _engine_chars(args) else None
        elif args.vocab == "llama-spm":
            vocabulary = llama_spm_vocabulary()
            model = tiny_model_for(vocabulary, seed)
        else:
            model, vocabulary = LlamaModel.tiny(seed), None
        write_gguf(args.out, model, vocabulary, args.weight_type)
    except (GGUFError, TokenizerError, ValueError, OSError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    c = model.config
    print(
        f"wrote {args.out}: llama, {c.num_layers} layers, hidden {c.hidden_size}, vocab {c.vocab_size}"
        f" ({vocabulary.model if vocabulary else 'engine-chars'}), {args.weight_type}"
    )
    return EXIT_OK


def _engine_chars(args: argparse.Namespace) -> bool:
    from engine.model.gguf_tokenizer import read_metadata

    return read_metadata(args.model).get("tokenizer.ggml.model") == "engine-chars"
