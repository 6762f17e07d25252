"""Draft models: the target's first layers (self-speculation), a standalone cut of them, and
the checks any draft must pass before it is used.

A draft must speak the target's vocabulary (the same token ids mean the same tokens) and
reach at least the target's context, or its proposals would be about another text.
"""

from __future__ import annotations

from dataclasses import replace

from engine.model.llama import LlamaModel
from engine.model.tokenizer import CHAR_VOCAB


def _layer_of(name: str) -> int | None:
    return int(name.split(".")[1]) if name.startswith("blk.") else None


def first_layers(target: LlamaModel, num_layers: int) -> LlamaModel:
    """Self-speculation's draft: the target's first `num_layers` layers, final norm and output
    head, sharing the target's weight tensors (no copy; the draft's KV is its own)."""
    if not 1 <= num_layers < target.config.num_layers:
        raise ValueError(
            f"self-speculation runs fewer layers than the target's {target.config.num_layers}, asked for {num_layers}"
        )
    config = replace(target.config, num_layers=num_layers)
    weights = {
        name: w for name, w in target.weights.items() if (layer := _layer_of(name)) is None or layer < num_layers
    }
    return LlamaModel(config, weights, target.tokens)


def standalone_draft(target: LlamaModel, num_layers: int = 1) -> LlamaModel:
    """A separate draft model cut from the target's first layers, with weights of its own.

    The embedded tiny model ships no trained draft; this stands in for one (a GGUF draft
    replaces it) and exercises the draft path: separate weights, separate KV, separate pool.
    """
    shared = first_layers(target, num_layers)
    return LlamaModel(shared.config, {name: w.clone() for name, w in shared.weights.items()}, target.tokens)


def check_draft_compatible(draft: LlamaModel, target: LlamaModel) -> None:
    """Raise ValueError (one line) unless the draft can propose tokens for the target."""
    d, t = draft.config, target.config
    if d.vocab_size != t.vocab_size:
        raise ValueError(f"the draft model's vocabulary has {d.vocab_size} tokens, the target's {t.vocab_size}")
    draft_tokens = draft.tokens or (CHAR_VOCAB if d.vocab_size == len(CHAR_VOCAB) else None)
    target_tokens = target.tokens or (CHAR_VOCAB if t.vocab_size == len(CHAR_VOCAB) else None)
    if draft_tokens is not None and target_tokens is not None and draft_tokens != target_tokens:
        first = next(i for i, (a, b) in enumerate(zip(draft_tokens, target_tokens)) if a != b)
        raise ValueError(
            f"the draft model's vocabulary differs from the target's: token {first} is "
            f"{draft_tokens[first]!r} in the draft, {target_tokens[first]!r} in the target"
        )
    if d.max_position < t.max_position:
        raise ValueError(
            f"the draft model's context ({d.max_position}) is shorter than the target's ({t.max_position})"
        )
