"""What speculative decoding to run: the proposer and how many tokens it drafts per step."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

SpeculativeMethod = Literal["ngram", "draft", "self"]
SPECULATIVE_METHODS: tuple[str, ...] = ("ngram", "draft", "self")
MAX_SPECULATIVE_TOKENS = 32  # beyond this a verification pass is a prefill, not a decode step


@dataclass(frozen=True)
class SpeculativeConfig:
    method: str
    num_speculative_tokens: int
    prompt_lookup_min: int = 1  # ngram: shortest suffix matched
    prompt_lookup_max: int = 4  # ngram: longest suffix matched (tried first)
    draft_num_layers: int = 1  # self: the target's first layers the draft runs

    def __post_init__(self) -> None:
        if self.method not in SPECULATIVE_METHODS:
            raise ValueError(
                f"unknown speculative method {self.method!r}; valid methods: {', '.join(SPECULATIVE_METHODS)}"
            )
        if not 1 <= self.num_speculative_tokens <= MAX_SPECULATIVE_TOKENS:
            raise ValueError(
                f"num_speculative_tokens must be in [1, {MAX_SPECULATIVE_TOKENS}], got {self.num_speculative_tokens}"
            )
        if not 1 <= self.prompt_lookup_min <= self.prompt_lookup_max:
            raise ValueError(
                "prompt lookup needs 1 <= prompt_lookup_min <= prompt_lookup_max,"
                f" got {self.prompt_lookup_min} and {self.prompt_lookup_max}"
            )
        if self.draft_num_layers < 1:
            raise ValueError(f"draft_num_layers must be >= 1, got {self.draft_num_layers}")
