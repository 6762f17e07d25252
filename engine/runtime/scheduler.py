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

    @property
    def completes_sequence(self) -> bool:
        """True when the chunk reaches the request's last token, so its logits are sampled."""
        return self.start + self.num_tokens == self.request.num_tokens


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
            num_new = min(request.num_tokens - request.num_computed_tokens, budget)
            if not self._allocate_or_preempt(request, num_new, out):
                break  # the request itself was preempted
            out.chunks.append(ScheduledChunk(request, request.num_computed_tokens, num_new))
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

    def _allocate_or_preempt(self, request: Request, num_new: int, out: SchedulerOutput) -> bool:
        """Make room for the request's new tokens, preempting from the back; False if it was preempted."""
        while self.kv_manager.allocate_slots(request, num_new) is None:
            victim = self.running.pop()
            self.kv_manager.free(victim)
            victim.num_computed_tokens = 0
            victim.num_preemptions += 1
            self.waiting.appendleft(victim)
            out.preempted.append(victim)
            if victim is request:
                return False
        return True
