"""Continuous batching: which requests run in the next step, and how many tokens each.

Every step has a token budget (`max_num_batched_tokens`). Running requests are served
first, in arrival order: a decoding request takes one token, a request still in prefill
takes the rest of its prompt, cut to what the budget leaves (chunked prefill). Then
waiting requests are admitted while budget and sequence slots remain, each starting after
its longest cached prefix (prefix-cache reuse through the block manager). So one step
mixes prefills and decodes.

When the block manager cannot hold a running request's new tokens, the most recently
admitted running request is preempted: its blocks are freed, its progress reset, and it
goes back to the front of the waiting queue, to be recomputed from its tokens (prompt and
everything generated so far) when it is readmitted. No new request is admitted in a step
that preempted.

Speculative decoding: a decoding request may carry draft tokens (`request.spec_token_ids`,
proposed after its last step). They are scheduled with its last token, so one forward pass
verifies them all; the budget may cut them (the cut ones are dropped, as in vLLM). Their
slots come from the same `allocate_slots` call; the manager caches blocks only up to
`request.num_tokens`, so unverified tokens are never hashed. A preempted request loses
its drafts.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from engine.core.kv_cache_manager import KVCacheManager
from engine.core.request import Request


@dataclass(frozen=True)
class SchedulerConfig:
    max_num_seqs: int = 8
    max_num_batched_tokens: int = 128

    def __post_init__(self) -> None:
        if self.max_num_seqs < 1 or self.max_num_batched_tokens < 1:
            raise ValueError("max_num_seqs and max_num_batched_tokens must be positive")


@dataclass(frozen=True)
class ScheduledChunk:
    request: Request
    start: int  # first position computed in this step
    num_tokens: int

    num_spec_tokens: int = 0  # draft tokens at the chunk's end, to verify

    @property
    def completes_sequence(self) -> bool:
        """True when the chunk reaches the request's last token (and its drafts), so its logits are sampled."""
        return self.start + self.num_tokens == self.request.num_tokens + self.num_spec_tokens


@dataclass
class SchedulerOutput:
    chunks: list[ScheduledChunk] = field(default_factory=list)
    preempted: list[Request] = field(default_factory=list)
    prefix_hit_tokens: int = 0

    @property
    def num_tokens(self) -> int:
        return sum(chunk.num_tokens for chunk in self.chunks)


class Scheduler:
    def __init__(self, config: SchedulerConfig, kv_manager: KVCacheManager) -> None:
        self.config = config
        self.kv_manager = kv_manager
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []

    def add_request(self, request: Request) -> None:
        self.waiting.append(request)

    def has_unfinished(self) -> bool:
        return bool(self.waiting or self.running)

    def finish(self, request: Request) -> None:
        self.running.remove(request)
        self.kv_manager.free(request)

    def schedule(self) -> SchedulerOutput:
        out = SchedulerOutput()
        budget = self.config.max_num_batched_tokens
        index = 0
        while index < len(self.running) and budget > 0:
            request = self.running[index]
            num_new = min(request.num_tokens_with_spec - request.num_computed_tokens, budget)
            num_spec = max(0, request.num_computed_tokens + num_new - request.num_tokens)
            del request.spec_token_ids[num_spec:]  # drafts the budget cut
            allocated = self._allocate_or_preempt(request, num_new, out)
            if allocated is None:
                break  # the request itself was preempted
            num_spec -= num_new - allocated
            num_new = allocated
            out.chunks.append(ScheduledChunk(request, request.num_computed_tokens, num_new, num_spec))
            budget -= num_new
            index += 1
        while self.waiting and budget > 0 and len(self.running) < self.config.max_num_seqs and not out.preempted:
            request = self.waiting[0]
            hit_blocks, num_hit = self.kv_manager.get_computed_blocks(request)
            num_new = min(request.num_tokens - num_hit, budget)
            if self.kv_manager.allocate_slots(request, num_new, num_hit, hit_blocks) is None:
                break
            self.waiting.popleft()
            self.running.append(request)
            request.num_computed_tokens = num_hit
            out.prefix_hit_tokens += num_hit
            out.chunks.append(ScheduledChunk(request, num_hit, num_new))
            budget -= num_new
        return out

    def _allocate_or_preempt(self, request: Request, num_new: int, out: SchedulerOutput) -> int | None:
        """Make room for the request's new tokens, preempting from the back; the tokens given
        room (fewer when the request dropped its drafts), or None if it was preempted."""
        while self.kv_manager.allocate_slots(request, num_new) is None:
            if request.spec_token_ids and self.running[-1] is request:
                # rather than preempt itself, a request gives up its drafts and retries with its last token
                num_new -= len(request.spec_token_ids)
                request.spec_token_ids.clear()
                continue
            victim = self.running.pop()
            self.kv_manager.free(victim)
            victim.num_computed_tokens = 0
            victim.num_preemptions += 1
            victim.spec_token_ids.clear()
            self.waiting.appendleft(victim)
            out.preempted.append(victim)
            if victim is request:
                return None
        return num_new
