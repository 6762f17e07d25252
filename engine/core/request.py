"""A sequence as the block manager sees it: its tokens, its progress and its block hashes."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from engine.core.hashing import BlockHash


@dataclass(eq=False)
class Request:
    """One generation request (vLLM's `vllm.v1.request.Request`, reduced to what the KV
    cache needs).

    `num_computed_tokens` is advanced by the scheduler after each step, not by the block
    manager. With a `block_hasher` (see `engine.core.hashing.get_request_block_hasher`) the
    request keeps `block_hashes` current for every full block, as vLLM does since it moved
    hashing out of the manager. An empty cache salt counts as no salt, as in vLLM.
    """

    request_id: str
    prompt_token_ids: list[int]
    cache_salt: str | None = None
    adapter_name: str | None = None
    block_hasher: Callable[[Request], list[BlockHash]] | None = field(default=None, repr=False)
    skip_reading_prefix_cache: bool = False
    output_token_ids: list[int] = field(default_factory=list, init=False)
    all_token_ids: list[int] = field(init=False)
    num_computed_tokens: int = field(default=0, init=False)
    num_preemptions: int = field(default=0, init=False)
    # draft tokens proposed for the next step (speculative decoding): not part of the
    # sequence until verified, so never hashed and never counted in num_tokens
    spec_token_ids: list[int] = field(default_factory=list, init=False)
    block_hashes: list[BlockHash] = field(default_factory=list, init=False, repr=False)

    def __post_init__(self) -> None:
        self.prompt_token_ids = list(self.prompt_token_ids)
        if not self.prompt_token_ids:
            raise ValueError(f"request {self.request_id!r} has an empty prompt")
        if self.cache_salt == "":
            self.cache_salt = None
        self.all_token_ids = list(self.prompt_token_ids)
        self._extend_block_hashes()

    @property
    def num_tokens(self) -> int:
        return len(self.all_token_ids)

    @property
    def num_tokens_with_spec(self) -> int:
        return len(self.all_token_ids) + len(self.spec_token_ids)

    @property
    def num_prompt_tokens(self) -> int:
        return len(self.prompt_token_ids)

    def append_output_token_ids(self, token_ids: int | Iterable[int]) -> None:
        new = [token_ids] if isinstance(token_ids, int) else list(token_ids)
        self.output_token_ids.extend(new)
        self.all_token_ids.extend(new)
        self._extend_block_hashes()

    def _extend_block_hashes(self) -> None:
        if self.block_hasher is not None:
            self.block_hashes.extend(self.block_hasher(self))
