"""Speculative decoding in the engine: lossless greedy output for every proposer, rollback of
rejected slots in both block pools, separate draft KV, sampling that keeps the target's
distribution end to end, and the draft checks."""

from __future__ import annotations

from dataclasses import replace
from functools import cache

import pytest
import torch

from engine.kv.formats import get_format as engine_format
from engine.kv.storage import KVCacheStorage
from engine.model.llama import LlamaConfig, LlamaModel, random_weights
from engine.model.reference import ContiguousKV, contiguous_greedy, forward_contiguous
from engine.model.tokenizer import CharTokenizer
from engine.runtime.llm_engine import EngineConfig, LLMEngine
from engine.runtime.sampling import SamplingParams
from engine.runtime.spec_decode.config import SpeculativeConfig
from engine.runtime.spec_decode.draft_model_proposer import DraftModelProposer
from engine.runtime.spec_decode.draft_models import first_layers, standalone_draft
from engine.runtime.spec_decode.kv_isolation import ensure_separate_kv
from engine.runtime.spec_decode.ngram_proposer import NgramProposer
from tests.engine.spec_stats import P_VALUE_THRESHOLD, chi_square_p_value

MODEL = LlamaModel.tiny()
MODEL_TOKENS = CharTokenizer().encode
PROMPTS = [
    "the cat sat on the mat. the cat sat on the mat. the cat",
    "Paged attention",
    "x",
    "0123456789abcdef!",
]
GREEDY = SamplingParams(max_tokens=24, ignore_eos=True)


def spec_engine(method: str | None, k: int = 3, model: LlamaModel = MODEL, **overrides: object) -> LLMEngine:
    config = dict(
        block_size=4,
        num_blocks=128,
        cache_type_k="f32",
        cache_type_v="f32",
        attention_backend="torch",
        flash_attn="enabled",
        speculative=SpeculativeConfig(method, k) if method else None,
    )
    draft_model = overrides.pop("draft_model", None)
    config.update(overrides)
    return LLMEngine(model, EngineConfig(**config), draft_model)  # type: ignore[arg-type]


@cache
def reference_tokens(prompt_token_ids: tuple[int, ...], max_tokens: int) -> list[int]:
    return contiguous_greedy(MODEL, [list(prompt_token_ids)], max_tokens).token_ids[0]


@pytest.mark.parametrize("method", ["ngram", "draft", "self"])
@pytest.mark.parametrize("k", [1, 3, 8])
def test_greedy_speculative_output_is_token_identical(method: str, k: int) -> None:
    engine = spec_engine(method, k, block_shuffle_seed=k)
    outputs = engine.generate(PROMPTS, GREEDY)
    for output in outputs:
        assert output.token_ids == reference_tokens(tuple(output.prompt_token_ids), 24), output.request_id
    stats = engine.spec_stats
    assert stats.num_accepted_tokens > 0, "no draft was ever accepted: the verification path did not run"
    assert stats.num_accepted_tokens < stats.num_draft_tokens
    assert engine.stats.steps < 24 + 1  # fewer target passes than tokens: speculation saved some


def test_recorded_logits_match_non_speculative_decoding() -> None:
    plain = spec_engine(None, record_logits=True).generate(PROMPTS[:2], GREEDY)
    spec = spec_engine("self", 4, record_logits=True).generate(PROMPTS[:2], GREEDY)
    for a, b in zip(plain, spec):
        assert len(a.logits) == len(b.logits) == 24
        for x, y in zip(a.logits, b.logits):
            torch.testing.assert_close(x, y, rtol=1e-4, atol=1e-4)


def test_triton_kernels_verify_drafts_in_interpreter_mode() -> None:
    params = SamplingParams(max_tokens=5, ignore_eos=True)
    prompts = ["abcabcabc", "Hi"]
    for method in ("ngram", "self"):
        triton_engine = spec_engine(method, 2, attention_backend="triton")
        triton_out = triton_engine.generate(prompts, params)
        torch_out = spec_engine(None).generate(prompts, params)
        assert [o.token_ids for o in triton_out] == [o.token_ids for o in torch_out], method
        assert triton_engine.spec_stats.num_drafts > 0


def test_rejected_slots_are_rolled_back_in_both_pools() -> None:
    """After every step a request holds only the blocks of its tokens, and its computed count
    stops at its last token: no lookahead blocks or rejected drafts linger."""
    engine = spec_engine("draft", 8, block_size=2)
    for prompt in PROMPTS:
        engine.add_request(prompt, GREEDY)
    draft = engine.proposer
    assert isinstance(draft, DraftModelProposer)
    rejected_steps = 0
    while engine.has_unfinished():
        before = engine.spec_stats.num_draft_tokens - engine.spec_stats.num_accepted_tokens
        engine.step()
        rejected_steps += engine.spec_stats.num_draft_tokens - engine.spec_stats.num_accepted_tokens > before
        for request in engine.scheduler.running:
            held = len(engine.kv_manager.get_block_ids(request.request_id)[0])
            assert held <= -(-request.num_tokens // 2), f"{request.request_id} keeps {held} blocks"
            assert request.num_computed_tokens == request.num_tokens - 1
            mirror = draft._sequences[request.request_id].request
            assert request.all_token_ids[: mirror.num_tokens] == mirror.all_token_ids  # synced when drafting
            # the draft holds its verified tokens' blocks plus lookahead for at most k - 1 drafts
            assert len(draft.kv_manager.get_block_ids(request.request_id)[0]) <= -(-(request.num_tokens + 7) // 2)
    assert rejected_steps > 3
    assert engine.kv_manager.get_num_free_blocks() == 127 and draft.kv_manager.get_num_free_blocks() == 127


def test_the_draft_rolls_back_to_the_accepted_tokens_and_redrafts_from_there() -> None:
    """After a partial acceptance the draft's KV past the accepted tokens is stale: proposals
    must equal those of a fresh proposer that never saw the rejected drafts."""
    from engine.core.kv_cache_manager import KVCacheManager
    from engine.runtime.spec_decode.draft_model_proposer import DraftKVConfig
    from engine.runtime.spec_decode.proposer import ProposalRequest

    kv = DraftKVConfig(64, 4, engine_format("f32"), engine_format("f32"), True, "torch")
    draft = standalone_draft(MODEL)
    target_requests = KVCacheManager(64, 4)
    request = target_requests.make_request("r", MODEL_TOKENS("Paged attention"))
    proposer = DraftModelProposer(draft, kv)
    first = proposer.propose([ProposalRequest(request, 5, GREEDY, None)])[0].token_ids
    assert len(first) == 5
    wrong = (first[1] + 1) % MODEL.config.vocab_size
    # the draft's KV holds first[1] where the sequence now has `wrong`, before the last token
    # (which is recomputed anyway): the rollback must notice
    request.append_output_token_ids([first[0], wrong, first[2]])
    # sampled drafts come with their distributions, which show any stale KV row
    sampled = SamplingParams(max_tokens=24, temperature=1.0)
    again = proposer.propose([ProposalRequest(request, 5, sampled, torch.Generator().manual_seed(1))])[0]
    assert proposer._sequences["r"].request.num_tokens == request.num_tokens
    fresh = DraftModelProposer(draft, kv).propose(
        [ProposalRequest(request, 5, sampled, torch.Generator().manual_seed(1))]
    )
    assert again.token_ids == fresh[0].token_ids and again.probs is not None
    torch.testing.assert_close(again.probs, fresh[0].probs, rtol=0, atol=1e-6)
    proposer.remove("r")
    assert proposer.kv_manager.get_num_free_blocks() == 63


def test_free_lookahead_slots_refuses_to_drop_a_hashed_block() -> None:
    engine = spec_engine(None, block_size=2)
    engine.add_request("abcdefgh", GREEDY)
    engine.step()
    request = engine.scheduler.running[0]
    with pytest.raises(AssertionError, match="carry a block hash"):
        engine.kv_manager.free_lookahead_slots(request, 2)
    assert engine.kv_manager.free_lookahead_slots(request, request.num_tokens) == 0


def test_draft_and_target_kv_never_share_memory() -> None:
    engine = spec_engine("self", 2)
    target_storage = engine.runner.attention.storage
    assert isinstance(engine.proposer, DraftModelProposer)
    ensure_separate_kv(target_storage, engine.proposer.storage)  # what the engine checked at start
    with pytest.raises(ValueError, match="share one KV store"):
        ensure_separate_kv(target_storage, target_storage)
    aliased = KVCacheStorage(1, 4, 4, 2, 32, "f32", "f32")
    aliased.k = [target_storage.k[1][:4]]  # a view into the target's layer 1
    with pytest.raises(ValueError, match="shares memory"):
        ensure_separate_kv(target_storage, aliased)
    # the self-speculation draft shares the target's weights, never its KV
    assert engine.proposer.model.weights["blk.0.attn_q.weight"] is MODEL.weights["blk.0.attn_q.weight"]


def test_a_draft_that_copies_the_target_has_every_draft_accepted() -> None:
    """With its own KV the copy drafts exactly the target's tokens; a shared or corrupted KV would not."""
    copy = LlamaModel(MODEL.config, {n: w.clone() for n, w in MODEL.weights.items()}, MODEL.tokens)
    engine = spec_engine("draft", 4, draft_model=copy, block_shuffle_seed=5)
    outputs = engine.generate(PROMPTS, GREEDY)
    assert engine.spec_stats.acceptance_rate == 1.0
    assert all(o.token_ids == reference_tokens(tuple(o.prompt_token_ids), 24) for o in outputs)


def test_prefix_caching_reuses_blocks_that_once_held_rejected_drafts() -> None:
    engine = spec_engine("self", 6, block_size=4)
    first = engine.generate(PROMPTS, GREEDY)
    follow_ups = [o.prompt_token_ids + o.token_ids for o in first]
    second = engine.generate(follow_ups, GREEDY)
    assert all(o.num_cached_tokens >= 4 for o in second[:1] + second[3:])
    for output in second:
        assert output.token_ids == reference_tokens(tuple(output.prompt_token_ids), 24)


def test_preemption_and_chunked_prefill_with_drafts() -> None:
    engine = spec_engine("ngram", 4, num_blocks=24, max_num_batched_tokens=7)
    outputs = engine.generate(PROMPTS, GREEDY)
    assert engine.stats.preemptions > 0 and engine.stats.chunked_prefills > 0
    assert engine.spec_stats.num_drafts > 0
    for output in outputs:
        assert output.token_ids == reference_tokens(tuple(output.prompt_token_ids), 24)
    assert engine.kv_manager.get_num_free_blocks() == 23


def test_ngram_proposer_prefers_the_longest_latest_match() -> None:
    proposer = NgramProposer(1, 3)
    assert proposer.lookup([1, 2, 3, 9, 1, 2, 3, 7, 5, 1, 2, 3], 2) == [7, 5]
    assert proposer.lookup([4, 8, 4, 6, 4], 3) == [6, 4]  # only a 1-gram matches, the latest one
    assert proposer.lookup([1, 2, 3], 4) == []
    assert proposer.lookup([5, 5, 5, 5], 8) == [5]


# --- distribution through the whole engine ----------------------------------------------------------

SMALL = LlamaConfig(
    vocab_size=8,
    hidden_size=32,
    intermediate_size=64,
    num_layers=2,
    num_heads=2,
    num_kv_heads=1,
    head_dim=16,
    max_position=64,
)
SMALL_PROMPT = [0, 3, 5, 3, 5, 3]  # repetitive, so prompt lookup finds drafts
NUM_REQUESTS = 1500


@cache
def small_models() -> tuple[LlamaModel, LlamaModel]:
    target = LlamaModel(SMALL, random_weights(SMALL, seed=21))
    draft_config = replace(SMALL, num_layers=1)
    return target, LlamaModel(draft_config, random_weights(draft_config, seed=22))


def exact_marginals(target: LlamaModel) -> tuple[torch.Tensor, torch.Tensor]:
    """The target's exact distributions of the 2nd and 3rd generated tokens (temperature 1)."""
    vocab = SMALL.vocab_size

    def next_probs(prefixes: list[list[int]]) -> torch.Tensor:
        cache_kv = ContiguousKV.empty(target, len(prefixes), len(prefixes[0]))
        with torch.inference_mode():
            return torch.softmax(forward_contiguous(target, cache_kv, torch.tensor(prefixes)), dim=-1)

    p1 = next_probs([SMALL_PROMPT])[0]
    p2_given = next_probs([[*SMALL_PROMPT, a] for a in range(vocab)])  # [t1, t2]
    second = (p1[:, None] * p2_given).sum(0)
    p3_given = next_probs([[*SMALL_PROMPT, a, b] for a in range(vocab) for b in range(vocab)]).view(vocab, vocab, -1)
    third = (p1[:, None, None] * p2_given[:, :, None] * p3_given).sum((0, 1))
    return second, third


@pytest.mark.parametrize("method", ["draft", "ngram"])
def test_speculative_sampling_keeps_the_targets_distribution_end_to_end(method: str) -> None:
    target, draft = small_models()
    engine = LLMEngine(
        target,
        EngineConfig(
            block_size=4,
            num_blocks=512,
            max_num_seqs=128,
            max_num_batched_tokens=1024,
            cache_type_k="f32",
            cache_type_v="f32",
            attention_backend="torch",
            flash_attn="enabled",
            speculative=SpeculativeConfig(method, 2),
        ),
        draft if method == "draft" else None,
    )
    params = [SamplingParams(max_tokens=4, temperature=1.0, seed=seed, ignore_eos=True) for seed in range(NUM_REQUESTS)]
    outputs = engine.generate([SMALL_PROMPT] * NUM_REQUESTS, params)
    stats = engine.spec_stats
    assert stats.num_accepted_tokens > NUM_REQUESTS // 20, stats
    assert stats.num_accepted_tokens < stats.num_draft_tokens, stats  # rejections happened: the residual path ran
    second, third = exact_marginals(target)
    assert chi_square_p_value([o.token_ids[1] for o in outputs], second) > P_VALUE_THRESHOLD
    assert chi_square_p_value([o.token_ids[2] for o in outputs], third) > P_VALUE_THRESHOLD


# --- draft checks -------------------------------------------------------------------------------------------


def test_drafts_with_another_vocabulary_or_too_many_layers_are_refused() -> None:
    other_vocab = replace(MODEL.config, vocab_size=50, num_layers=1)
    with pytest.raises(ValueError, match="vocabulary has 50 tokens, the target's 98"):
        spec_engine("draft", draft_model=LlamaModel(other_vocab, random_weights(other_vocab)))
    renamed = standalone_draft(MODEL)
    renamed.tokens = ("<unk>", *MODEL.tokens[1:])
    with pytest.raises(ValueError, match="token 0 is '<unk>' in the draft"):
        spec_engine("draft", draft_model=renamed)
    with pytest.raises(ValueError, match="fewer layers than the target's 2"):
        first_layers(MODEL, 2)
    with pytest.raises(ValueError, match="only with speculative method 'draft'"):
        spec_engine("ngram", draft_model=standalone_draft(MODEL))
    with pytest.raises(ValueError, match=r"num_speculative_tokens must be in \[1, 32\], got 0"):
        SpeculativeConfig("ngram", 0)
