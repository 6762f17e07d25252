"""The rejection sampler: greedy verification is exact, sampling preserves the target distribution
(chi-square with fixed seeds; threshold in tests/engine/spec_stats.py) and the test catches a biased sampler."""

from __future__ import annotations

import pytest
import torch

from engine.runtime.sampling import SamplingParams, sampling_probs
from engine.runtime.spec_decode.rejection_sampler import RejectionSampler
from tests.engine.spec_stats import P_VALUE_THRESHOLD, chi_square_p_value

VOCAB = 6
NUM_SAMPLES = 8000
SAMPLER = RejectionSampler()


def distributions(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Target logits `[3, vocab]` (k = 2 drafts) and a draft distribution `[2, vocab]` unlike the target."""
    gen = torch.Generator().manual_seed(seed)
    target_logits = torch.randn(3, VOCAB, generator=gen) * 1.5
    draft_probs = torch.softmax(torch.randn(2, VOCAB, generator=gen) * 1.5, dim=-1)
    return target_logits, draft_probs


def run_sampler(sampler, params: SamplingParams, point_mass_drafts: bool, seed: int) -> tuple[list[int], list[int]]:  # type: ignore[no-untyped-def]
    """First emitted tokens of every trial, and second emitted tokens where one was emitted."""
    target_logits, draft_probs = distributions(seed)
    gen = torch.Generator().manual_seed(seed + 1)
    firsts, seconds = [], []
    for _ in range(NUM_SAMPLES):
        if point_mass_drafts:  # an n-gram proposer: fixed drafts (here the likeliest tokens), no distribution
            drafts, probs = [int(target_logits[0].argmax()), int(target_logits[1].argmax())], None
        else:
            drafts = [int(torch.multinomial(draft_probs[i], 1, generator=gen)) for i in range(2)]
            probs = draft_probs
        out = sampler(target_logits, drafts, probs, params, gen)
        firsts.append(out[0])
        if len(out) > 1:
            seconds.append(out[1])
    return firsts, seconds


@pytest.mark.parametrize("point_mass_drafts", [False, True], ids=["draft-model", "ngram"])
@pytest.mark.parametrize(
    "params",
    [SamplingParams(temperature=1.0), SamplingParams(temperature=0.7, top_k=4)],
    ids=["t1.0", "t0.7-topk4"],
)
def test_emitted_tokens_follow_the_target_distribution(point_mass_drafts: bool, params: SamplingParams) -> None:
    target_logits, _ = distributions(seed=11)
    firsts, seconds = run_sampler(SAMPLER, params, point_mass_drafts, seed=11)
    p0, p1 = sampling_probs(target_logits[0], params), sampling_probs(target_logits[1], params)
    assert chi_square_p_value(firsts, p0) > P_VALUE_THRESHOLD
    # the target's row 1 does not depend on the first token here, so the second token follows p1 too
    assert len(seconds) > NUM_SAMPLES // 10
    assert chi_square_p_value(seconds, p1) > P_VALUE_THRESHOLD
    assert set(range(VOCAB)) - set(firsts) == set(int(t) for t in torch.nonzero(p0 == 0))


def test_the_chi_square_check_catches_a_sampler_that_keeps_every_draft() -> None:
    def accepts_everything(target_logits, drafts, probs, params, gen):  # type: ignore[no-untyped-def]
        return [*drafts, int(torch.multinomial(sampling_probs(target_logits[-1], params), 1, generator=gen))]

    params = SamplingParams(temperature=1.0)
    target_logits, _ = distributions(seed=11)
    firsts, _ = run_sampler(accepts_everything, params, point_mass_drafts=False, seed=11)
    assert chi_square_p_value(firsts, sampling_probs(target_logits[0], params)) < P_VALUE_THRESHOLD


def test_the_chi_square_check_catches_a_sampler_that_resamples_from_the_target_on_rejection() -> None:
    """A subtler bug: on rejection, drawing from p instead of max(p - q, 0) over-weights the drafts."""

    def wrong_residual(target_logits, drafts, probs, params, gen):  # type: ignore[no-untyped-def]
        p = sampling_probs(target_logits[0], params)
        q = probs[0]
        if float(torch.rand((), generator=gen)) * float(q[drafts[0]]) < float(p[drafts[0]]):
            return [drafts[0]]
        return [int(torch.multinomial(p, 1, generator=gen))]

    params = SamplingParams(temperature=1.0)
    target_logits, _ = distributions(seed=11)
    firsts, _ = run_sampler(wrong_residual, params, point_mass_drafts=False, seed=11)
    assert chi_square_p_value(firsts, sampling_probs(target_logits[0], params)) < P_VALUE_THRESHOLD


def test_greedy_keeps_the_matching_prefix_and_adds_the_targets_token() -> None:
    logits = torch.full((4, VOCAB), -1.0)
    for row, best in enumerate([3, 1, 5, 0]):
        logits[row, best] = 1.0
    greedy = SamplingParams()
    assert SAMPLER(logits, [3, 1, 5], None, greedy, None) == [3, 1, 5, 0]  # all accepted + bonus
    assert SAMPLER(logits, [3, 2, 5], None, greedy, None) == [3, 1]  # second rejected, corrected
    assert SAMPLER(logits, [0, 1, 5], None, greedy, None) == [3]
    assert SAMPLER(logits[:1], [], None, greedy, None) == [3]


def test_seeded_sampling_is_reproducible() -> None:
    target_logits, draft_probs = distributions(seed=3)
    params = SamplingParams(temperature=1.0)
    runs = [
        [SAMPLER(target_logits, [1, 2], draft_probs, params, gen) for _ in range(50)]
        for gen in (torch.Generator().manual_seed(5), torch.Generator().manual_seed(5))
    ]
    assert runs[0] == runs[1]


def test_mismatched_shapes_are_refused() -> None:
    logits = torch.zeros(3, VOCAB)
    with pytest.raises(ValueError, match="2 draft tokens need 3 rows"):
        SAMPLER(logits[:2], [1, 2], None, SamplingParams(), None)
    with pytest.raises(ValueError, match="2 rows of draft probabilities"):
        SAMPLER(logits, [1, 2], torch.ones(1, VOCAB) / VOCAB, SamplingParams(temperature=1.0), None)
