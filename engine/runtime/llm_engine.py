"""LLMEngine: continuous-batching generation over a paged (optionally quantized) KV cache.

    engine = LLMEngine()                                   # the embedded tiny model
    outputs = engine.generate(["Hello", "The sky"], SamplingParams(max_tokens=16))

Each step the scheduler picks chunks (prefills and decodes mixed, chunked prefill under
the token budget, preemption by recompute when blocks run out), the model runner runs
them, and every request whose chunk reached its last token gets one sampled token.
The attention path and the KV formats come from `engine.attention.policy`; a fallback
warning is logged once, on the "engine" logger.

With `EngineConfig(speculative=SpeculativeConfig(...))` a proposer drafts up to k tokens for
every decoding request after each step; the next step verifies them in the same forward
pass as the request's last token, the rejection sampler keeps what the target accepts, and
the slots of rejected drafts are rolled back (`engine.runtime.spec_decode`).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from engine.attention.paged_attention import PagedAttention
from engine.attention.policy import (
    AttentionConfigError,
    AttentionPlan,
    flash_attention_support,
    requested_flash_attn_mode,
    resolve_attention,
)
from engine.core.free_block_queue import FreeKVCacheBlockQueue
from engine.core.kv_cache_manager import KVCacheManager
from engine.core.limits import MAX_BLOCK_SIZE, MAX_NUM_BLOCKS, check_range, require_memory
from engine.core.request import Request
from engine.kv.storage import KVCacheStorage
from engine.model.llama import LlamaModel
from engine.model.tokenizer import CharTokenizer, Tokenizer
from engine.runtime.model_runner import ModelRunner
from engine.runtime.sampling import SamplingParams, sample
from engine.runtime.scheduler import ScheduledChunk, Scheduler, SchedulerConfig, SchedulerOutput
from engine.runtime.spec_decode.config import SpeculativeConfig
from engine.runtime.spec_decode.draft_model_proposer import DraftKVConfig, DraftModelProposer
from engine.runtime.spec_decode.draft_models import check_draft_compatible, first_layers, standalone_draft
from engine.runtime.spec_decode.kv_isolation import ensure_separate_kv
from engine.runtime.spec_decode.metrics import SpecDecodingStats
from engine.runtime.spec_decode.ngram_proposer import NgramProposer
from engine.runtime.spec_decode.proposer import ProposalRequest, Proposer
from engine.runtime.spec_decode.rejection_sampler import RejectionSampler

logger = logging.getLogger("engine")

ProgressFn = Callable[[int, int], None]  # (tokens generated so far, tokens requested)


@dataclass(frozen=True)
class EngineConfig:
    block_size: int = 16
    num_blocks: int = 256
    max_num_seqs: int = 8
    max_num_batched_tokens: int = 128
    enable_prefix_caching: bool = True
    cache_type_k: str = "f16"
    cache_type_v: str = "f16"
    flash_attn: str | None = None  # auto|enabled|disabled; None: $FLASH_ATTN, else auto
    attention_backend: str = "auto"  # triton|torch; auto: triton on CUDA, torch elsewhere
    device: str = "cpu"
    block_shuffle_seed: int | None = None  # hand out blocks in a random order (Gate 0)
    record_logits: bool = False
    speculative: SpeculativeConfig | None = None

    def __post_init__(self) -> None:
        check_range("block_size", self.block_size, 1, MAX_BLOCK_SIZE)
        check_range("num_blocks", self.num_blocks, 1, MAX_NUM_BLOCKS)


@dataclass
class RequestOutput:
    request_id: str
    prompt_token_ids: list[int]
    token_ids: list[int]
    text: str
    finish_reason: str  # "length" or "stop"
    num_cached_tokens: int  # prefix-cache hit on first admission
    num_preemptions: int
    logits: list[torch.Tensor] | None = None  # one per generated token, with record_logits


@dataclass
class EngineStats:
    steps: int = 0
    mixed_steps: int = 0  # steps that ran prefill and decode chunks together
    chunked_prefills: int = 0  # prefill chunks that stopped short of the prompt's end
    preemptions: int = 0
    prefix_hit_tokens: int = 0
    max_step_tokens: int = 0


@dataclass
class _Sequence:
    request: Request
    params: SamplingParams
    generator: torch.Generator | None
    logits: list[torch.Tensor] = field(default_factory=list)
    draft_probs: torch.Tensor | None = None  # the distributions request.spec_token_ids were drawn from
    num_cached_tokens: int | None = None
    finish_reason: str | None = None


class LLMEngine:
    def __init__(
        self,
        model: LlamaModel | None = None,
        config: EngineConfig | None = None,
        draft_model: LlamaModel | None = None,
        tokenizer: Tokenizer | None = None,
    ) -> None:
        """`draft_model` is the draft of speculative method "draft" (default: a 1-layer cut of the target);
        `tokenizer` the model file's own (default: characters, from the model's token list if it has one)."""
        self.config = config or EngineConfig()
        c = self.config
        if c.device.startswith("cuda") and not torch.cuda.is_available():
            raise ValueError(f"device {c.device!r} was requested but CUDA is not available")
        model = model or LlamaModel.tiny()
        if model.device.type == "cpu" and torch.device(c.device).type != "cpu":
            weight_bytes = sum(w.numel() * w.element_size() for w in model.weights.values())
            require_memory(weight_bytes, c.device, "the model's weights")  # the KV cache checks its own
        self.model = model.to(c.device)
        mc = self.model.config
        backend = c.attention_backend
        if backend == "auto":
            backend = "triton" if c.device.startswith("cuda") else "torch"
        support = flash_attention_support(mc.head_dim, backend, c.device)
        self.plan: AttentionPlan = resolve_attention(
            requested_flash_attn_mode(c.flash_attn), c.cache_type_k, c.cache_type_v, support
        )
        if self.plan.warning:
            logger.warning(self.plan.warning)
        try:
            storage = KVCacheStorage(
                mc.num_layers,
                c.num_blocks,
                c.block_size,
                mc.num_kv_heads,
                mc.head_dim,
                self.plan.k_format,
                self.plan.v_format,
                c.device,
            )
        except ValueError as exc:
            raise AttentionConfigError(f"KV cache: {exc}") from None
        self.kv_manager = KVCacheManager(
            c.num_blocks, c.block_size, enable_caching=c.enable_prefix_caching, max_model_len=mc.max_position
        )
        if c.block_shuffle_seed is not None:
            self._shuffle_free_blocks(random.Random(c.block_shuffle_seed))
        self.scheduler = Scheduler(SchedulerConfig(c.max_num_seqs, c.max_num_batched_tokens), self.kv_manager)
        attention = PagedAttention(storage, mc.head_dim**-0.5, self.plan.flash_attn, backend)
        self.runner = ModelRunner(self.model, attention, self.kv_manager)
        self.proposer: Proposer | None = None
        if c.speculative is not None:
            self.proposer = self._build_proposer(c.speculative, draft_model, backend, storage)
        elif draft_model is not None:
            raise ValueError("a draft model is used only with speculative method 'draft'")
        self.rejection_sampler = RejectionSampler()
        self.spec_stats = SpecDecodingStats()
        self.tokenizer: Tokenizer = tokenizer or (
            CharTokenizer(self.model.tokens) if self.model.tokens else CharTokenizer()
        )
        self.stats = EngineStats()
        self._sequences: dict[str, _Sequence] = {}
        self._next_id = 0

    def _build_proposer(
        self, spec: SpeculativeConfig, draft_model: LlamaModel | None, backend: str, storage: KVCacheStorage
    ) -> Proposer:
        if draft_model is not None and spec.method != "draft":
            raise ValueError(f"a draft model is used only with speculative method 'draft', not {spec.method!r}")
        if spec.method == "ngram":
            return NgramProposer(spec.prompt_lookup_min, spec.prompt_lookup_max)
        c = self.config
        if spec.method == "self":
            draft = first_layers(self.model, spec.draft_num_layers)
        elif draft_model is not None:
            draft = draft_model.to(c.device)
        else:
            draft = standalone_draft(self.model, spec.draft_num_layers)
        check_draft_compatible(draft, self.model)
        support = flash_attention_support(draft.config.head_dim, backend, c.device)
        plan = resolve_attention(requested_flash_attn_mode(c.flash_attn), c.cache_type_k, c.cache_type_v, support)
        kv = DraftKVConfig(
            c.num_blocks, c.block_size, plan.k_format, plan.v_format, plan.flash_attn, backend, c.enable_prefix_caching
        )
        try:
            proposer = DraftModelProposer(draft, kv)
        except ValueError as exc:
            raise AttentionConfigError(f"draft KV cache: {exc}") from None
        ensure_separate_kv(storage, proposer.storage)
        return proposer

    def _shuffle_free_blocks(self, rng: random.Random) -> None:
        pool = self.kv_manager.block_pool
        blocks = [block for block in pool.blocks if not block.is_null]
        rng.shuffle(blocks)
        pool.free_block_queue = FreeKVCacheBlockQueue(blocks)

    # --- requests ------------------------------------------------------------------

    def add_request(self, prompt: str | Sequence[int], params: SamplingParams | None = None) -> str:
        params = params or SamplingParams()
        token_ids = self.tokenizer.encode(prompt) if isinstance(prompt, str) else [int(t) for t in prompt]
        vocab = self.model.config.vocab_size
        if not token_ids or any(not 0 <= t < vocab for t in token_ids):
            raise ValueError(f"prompt token ids must be non-empty and in [0, {vocab})")
        total = len(token_ids) + params.max_tokens
        if total > self.model.config.max_position:
            raise ValueError(
                f"prompt ({len(token_ids)}) + max_tokens ({params.max_tokens})"
                f" exceeds the model's {self.model.config.max_position} positions"
            )
        usable = self.config.num_blocks - 1  # block 0 is the null block
        if -(-total // self.config.block_size) > usable:
            raise ValueError(
                f"a request of {total} tokens needs more than the cache's {usable} blocks of {self.config.block_size}"
            )
        request_id = f"req-{self._next_id}"
        self._next_id += 1
        generator = None
        if not params.greedy:
            generator = torch.Generator().manual_seed(
                params.seed if params.seed is not None else random.getrandbits(63)
            )
        request = self.kv_manager.make_request(request_id, token_ids)
        self._sequences[request_id] = _Sequence(request, params, generator)
        self.scheduler.add_request(request)
        return request_id

    def has_unfinished(self) -> bool:
        return self.scheduler.has_unfinished()

    def num_output_tokens(self, request_id: str) -> int:
        """Tokens generated so far for REQUEST_ID (a serving loop's time to first token)."""
        return len(self._sequences[request_id].request.output_token_ids)

    # --- stepping ------------------------------------------------------------------

    def step(self) -> list[RequestOutput]:
        """Run one scheduled batch; the outputs of the requests it finished."""
        plan = self.scheduler.schedule()
        if not plan.chunks:
            raise RuntimeError("the scheduler found nothing to run although requests are pending")
        chunks = ModelRunner.order(plan.chunks)
        logits = self.runner.execute(chunks)
        self._record_stats(plan, chunks)
        finished: list[RequestOutput] = []
        for chunk in chunks:
            seq = self._sequences[chunk.request.request_id]
            if seq.num_cached_tokens is None:
                seq.num_cached_tokens = chunk.start
            rows = logits.get(chunk.request.request_id)
            if rows is None:
                chunk.request.num_computed_tokens = chunk.start + chunk.num_tokens
                continue
            if self._accept(chunk, seq, rows):
                self.scheduler.finish(chunk.request)
                if self.proposer is not None:
                    self.proposer.remove(chunk.request.request_id)
                finished.append(self._output(seq))
        if self.proposer is not None:
            self._propose()
        return finished

    def _accept(self, chunk: ScheduledChunk, seq: _Sequence, rows: torch.Tensor) -> bool:
        """Sample (or verify the drafts and sample), roll back rejected slots; True if the request finished."""
        request = chunk.request
        drafts = list(request.spec_token_ids)
        if drafts:
            probs = seq.draft_probs[: len(drafts)] if seq.draft_probs is not None else None
            tokens = self.rejection_sampler(rows, drafts, probs, seq.params, seq.generator)
            self.spec_stats.observe(len(drafts), len(tokens) - 1)
        else:
            tokens = [sample(rows[0], seq.params, seq.generator)]
        num_rejected = len(drafts) - (len(tokens) - 1)
        request.num_computed_tokens = chunk.start + chunk.num_tokens - num_rejected
        request.spec_token_ids.clear()
        seq.draft_probs = None
        if drafts:
            self.kv_manager.free_lookahead_slots(request, request.num_computed_tokens)
        for row, token in zip(rows, tokens):
            if self.config.record_logits:
                seq.logits.append(row.detach().cpu().clone())
            request.append_output_token_ids(token)
            if token == self.tokenizer.eos_id and not seq.params.ignore_eos:
                seq.finish_reason = "stop"
            elif len(request.output_token_ids) >= seq.params.max_tokens:
                seq.finish_reason = "length"
            if seq.finish_reason:
                return True
        return False

    def _propose(self) -> None:
        """Draft tokens for every running request that is decoding, for the next step to verify."""
        assert self.proposer is not None and self.config.speculative is not None
        k = self.config.speculative.num_speculative_tokens
        inputs = []
        for request in self.scheduler.running:
            if request.num_computed_tokens != request.num_tokens - 1:
                continue  # still in prefill
            seq = self._sequences[request.request_id]
            # never draft past max_tokens: the last token is the target's own
            num_draft = min(k, seq.params.max_tokens - len(request.output_token_ids) - 1)
            if num_draft > 0:
                inputs.append(ProposalRequest(request, num_draft, seq.params, seq.generator))
        for item, proposal in zip(inputs, self.proposer.propose(inputs)):
            item.request.spec_token_ids[:] = proposal.token_ids
            self._sequences[item.request.request_id].draft_probs = proposal.probs

    def _record_stats(self, plan: SchedulerOutput, chunks: list[ScheduledChunk]) -> None:
        s = self.stats
        s.steps += 1
        s.preemptions += len(plan.preempted)
        s.prefix_hit_tokens += plan.prefix_hit_tokens
        s.max_step_tokens = max(s.max_step_tokens, plan.num_tokens)
        has_decode = any(c.num_tokens - c.num_spec_tokens == 1 and c.start > 0 for c in chunks)
        has_prefill = any(c.num_tokens - c.num_spec_tokens > 1 for c in chunks)
        s.mixed_steps += has_decode and has_prefill
        s.chunked_prefills += sum(1 for c in chunks if c.num_tokens > 1 and not c.completes_sequence)

    def _output(self, seq: _Sequence) -> RequestOutput:
        r = seq.request
        return RequestOutput(
            request_id=r.request_id,
            prompt_token_ids=list(r.prompt_token_ids),
            token_ids=list(r.output_token_ids),
            text=self.tokenizer.decode(r.output_token_ids),
            finish_reason=seq.finish_reason or "length",
            num_cached_tokens=seq.num_cached_tokens or 0,
            num_preemptions=r.num_preemptions,
            logits=seq.logits if self.config.record_logits else None,
        )

    def generate(
        self,
        prompts: Sequence[str | Sequence[int]],
        sampling_params: SamplingParams | Sequence[SamplingParams] | None = None,
        progress: ProgressFn | None = None,
    ) -> list[RequestOutput]:
        """Run the prompts to completion; outputs in prompt order."""
        if isinstance(sampling_params, SamplingParams) or sampling_params is None:
            params = [sampling_params or SamplingParams()] * len(prompts)
        else:
            params = list(sampling_params)
            if len(params) != len(prompts):
                raise ValueError(f"{len(params)} sampling params for {len(prompts)} prompts")
        ids = [self.add_request(prompt, p) for prompt, p in zip(prompts, params)]
        wanted = sum(p.max_tokens for p in params)
        done: dict[str, RequestOutput] = {}
        while self.has_unfinished():
            for output in self.step():
                done[output.request_id] = output
            if progress is not None:
                produced = sum(len(self._sequences[i].request.output_token_ids) for i in ids)
                progress(produced, wanted)
        for request_id in ids:
            del self._sequences[request_id]
        return [done[i] for i in ids]
