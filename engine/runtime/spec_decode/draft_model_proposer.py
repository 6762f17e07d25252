"""DraftModelProposer: a smaller llama drafts k tokens, on its own KV store and block pool.

Per request the proposer keeps a mirror `Request` in its own `KVCacheManager` (so the draft
gets prefix caching too). Each step:

1. sync: the mirror takes the target's newly verified tokens. The draft KV of the tokens it
   drafted last step stays valid exactly as far as the target accepted them; the mirror's
   `num_computed_tokens` rolls back to there and blocks beyond it are given back.
2. allocate: slots for the verified tokens the draft has not computed, plus k - 1 lookahead
   slots for the draft tokens it will feed back (`allocate_slots(num_lookahead_tokens=k - 1)`);
   lookahead tokens are not in the mirror's token list, so they are never hashed.
3. draft: one pass over the uncomputed verified tokens (a prefill chunk: usually the last
   token and the accepted drafts) gives draft token 1; then k - 1 one-token passes, batched
   across requests, each feeding the previous draft token.

If the draft's pool is full, the request's draft state is dropped (recomputed later) and it
gets no draft this step: speculation degrades to plain decoding, never to a failure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from engine.attention.paged_attention import PagedAttention
from engine.core.kv_cache_manager import KVCacheManager
from engine.core.request import Request
from engine.kv.formats import KVCacheFormat
from engine.kv.storage import KVCacheStorage
from engine.model.llama import LlamaModel
from engine.runtime.model_runner import ModelRunner, TokenRun
from engine.runtime.sampling import sampling_probs
from engine.runtime.spec_decode.proposer import DraftProposal, ProposalRequest


@dataclass
class _DraftSequence:
    request: Request  # the mirror, in the draft's block pool
    fed_start: int = 0  # position of fed[0]
    fed: list[int] = field(default_factory=list)  # draft tokens whose KV the draft wrote past the verified ones


@dataclass
class _Drafting:
    index: int  # into the proposer's inputs
    item: ProposalRequest
    run: TokenRun
    token_ids: list[int] = field(default_factory=list)
    probs: list[torch.Tensor] = field(default_factory=list)


@dataclass(frozen=True)
class DraftKVConfig:
    num_blocks: int
    block_size: int
    k_format: KVCacheFormat
    v_format: KVCacheFormat
    flash_attn: bool
    backend: str
    enable_caching: bool = True


class DraftModelProposer:
    def __init__(self, model: LlamaModel, kv: DraftKVConfig) -> None:
        c = model.config
        self.model = model
        self.storage = KVCacheStorage(
            c.num_layers,
            kv.num_blocks,
            kv.block_size,
            c.num_kv_heads,
            c.head_dim,
            kv.k_format,
            kv.v_format,
            model.device,
        )
        self.kv_manager = KVCacheManager(
            kv.num_blocks, kv.block_size, enable_caching=kv.enable_caching, max_model_len=c.max_position
        )
        attention = PagedAttention(self.storage, c.head_dim**-0.5, kv.flash_attn, kv.backend)
        self.runner = ModelRunner(model, attention, self.kv_manager)
        self._sequences: dict[str, _DraftSequence] = {}

    def propose(self, inputs: Sequence[ProposalRequest]) -> list[DraftProposal]:
        proposals = [DraftProposal([]) for _ in inputs]
        drafting: list[_Drafting] = []
        for index, item in enumerate(inputs):
            if item.num_draft_tokens < 1:
                continue
            seq = self._sync(item.request)
            if not self._allocate(seq, item.num_draft_tokens):
                continue
            mirror = seq.request
            run = TokenRun(
                self.kv_manager.get_block_ids(mirror.request_id)[0],
                mirror.num_computed_tokens,
                mirror.all_token_ids[mirror.num_computed_tokens :],
                1,
            )
            drafting.append(_Drafting(index, item, run))
        active = drafting
        while active:
            active.sort(key=lambda d: len(d.run.token_ids) > 1)  # one-token runs first, stable
            logits = self.runner.run([d.run for d in active])
            still = []
            for d, rows in zip(active, logits):
                assert rows is not None
                token = self._draw(d, rows[0])
                if len(d.token_ids) < d.item.num_draft_tokens:
                    d.run = TokenRun(d.run.block_ids, d.run.start + len(d.run.token_ids), [token], 1)
                    still.append(d)
            active = still
        for d in drafting:
            seq = self._sequences[d.item.request.request_id]
            seq.request.num_computed_tokens = seq.request.num_tokens
            seq.fed_start, seq.fed = seq.request.num_tokens, d.token_ids[:-1]
            probs = torch.stack(d.probs) if d.probs else None
            proposals[d.index] = DraftProposal(d.token_ids, probs)
        return proposals

    def remove(self, request_id: str) -> None:
        seq = self._sequences.pop(request_id, None)
        if seq is not None:
            self.kv_manager.free(seq.request)

    @staticmethod
    def _draw(d: _Drafting, row: torch.Tensor) -> int:
        params = d.item.params
        if params.greedy:
            token = int(torch.argmax(row))
        else:
            probs = sampling_probs(row, params)
            token = int(torch.multinomial(probs, 1, generator=d.item.generator))
            d.probs.append(probs)
        d.token_ids.append(token)
        return token

    def _sync(self, request: Request) -> _DraftSequence:
        seq = self._sequences.get(request.request_id)
        if seq is None:
            mirror = self.kv_manager.make_request(
                request.request_id, request.all_token_ids, request.cache_salt, request.adapter_name
            )
            seq = self._sequences[request.request_id] = _DraftSequence(mirror)
            return seq
        mirror = seq.request
        if request.num_tokens > mirror.num_tokens:
            mirror.append_output_token_ids(request.all_token_ids[mirror.num_tokens :])
        valid = seq.fed_start
        for position, token in enumerate(seq.fed, start=seq.fed_start):
            if position >= mirror.num_tokens or mirror.all_token_ids[position] != token:
                break
            valid += 1
        # the last token is always recomputed: its logits give the first draft token
        mirror.num_computed_tokens = min(valid, mirror.num_tokens - 1)
        seq.fed = []
        self.kv_manager.free_lookahead_slots(mirror, mirror.num_computed_tokens)
        return seq

    def _allocate(self, seq: _DraftSequence, num_draft_tokens: int) -> bool:
        mirror = seq.request
        hits, num_hit = None, 0
        if not self.kv_manager.get_block_ids(mirror.request_id)[0]:
            hits, num_hit = self.kv_manager.get_computed_blocks(mirror)
        num_new = mirror.num_tokens - mirror.num_computed_tokens - num_hit
        allocated = self.kv_manager.allocate_slots(
            mirror, num_new, num_hit, hits, num_lookahead_tokens=num_draft_tokens - 1
        )
        if allocated is None:
            self.remove(mirror.request_id)
            return False
        mirror.num_computed_tokens += num_hit
        return True
