"""Vocabularies the engine writes into GGUF files, and the tiny model sized to one.

llama.cpp refuses the embedded model's `engine-chars` vocabulary, so `python -m engine
export-gguf --vocab llama-spm` writes a SentencePiece `llama` vocabulary instead: <unk>, <s>,
</s>, the 256 byte-fallback tokens <0xNN>, the visible space U+2581 and every printable ASCII
character, then a few merged pieces (with every intermediate piece, so SentencePiece's
bigram merging can reach them). The model's embedding and output rows are sized to it.
"""

from __future__ import annotations

from dataclasses import replace

from engine.model.gguf_tokenizer import SPACE_ESCAPE, Vocabulary
from engine.model.llama import TINY_CONFIG, TINY_SEED, LlamaModel, random_weights

# gguf.TokenType values
NORMAL, UNKNOWN, CONTROL, BYTE = 1, 2, 3, 6

VOCABS = ("engine-chars", "llama-spm")

# Merged pieces in merge priority order (the first scores highest). A piece is reachable only if
# it splits into two pieces that are tokens themselves, so every prefix comes first.
_MERGES = (
    "▁t ▁th ▁the he in er an ▁a ▁an ▁and on ▁o ▁on ▁of ▁c ▁ca ▁cat ▁s ▁sa ▁sat ▁m ▁ma ▁mat "
    "at en ed ▁w ▁wa ▁was ▁i ▁in ▁is ▁u ▁up ▁upon ▁ti ▁tim ▁time"
).split()


def llama_spm_vocabulary() -> Vocabulary:
    """The SentencePiece vocabulary described in the module docstring (deterministic)."""
    tokens = ["<unk>", "<s>", "</s>"]
    types = [UNKNOWN, CONTROL, CONTROL]
    tokens += [f"<0x{byte:02X}>" for byte in range(256)]
    types += [BYTE] * 256
    chars = [SPACE_ESCAPE] + [chr(code) for code in range(0x21, 0x7F)]
    tokens += chars
    types += [NORMAL] * len(chars)
    scores = [0.0] * len(tokens)
    for rank, piece in enumerate(_MERGES):
        piece = piece.replace("▁", SPACE_ESCAPE)
        if not any(piece[:cut] in tokens and piece[cut:] in tokens for cut in range(1, len(piece))):
            raise AssertionError(f"merged piece {piece!r} cannot be reached from shorter pieces")
        tokens.append(piece)
        types.append(NORMAL)
        scores.append(-float(rank + 1))
    return Vocabulary(
        model="llama",
        pre="",
        tokens=tokens,
        scores=scores,
        token_types=types,
        merges=[],
        bos_id=1,
        eos_id=2,
        add_bos=True,
        add_eos=False,
        add_space_prefix=True,
    )


def tiny_model_for(vocabulary: Vocabulary, seed: int = TINY_SEED) -> LlamaModel:
    """The tiny model's architecture with its embedding and output rows sized to `vocabulary`
    (seeded random weights: the same seed gives the same file on every machine)."""
    config = replace(TINY_CONFIG, vocab_size=len(vocabulary.tokens))
    return LlamaModel(config, random_weights(config, seed), tuple(vocabulary.tokens))
