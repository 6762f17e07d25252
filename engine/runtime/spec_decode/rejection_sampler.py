"""RejectionSampler: which draft tokens the target accepts, and the token it adds.

Given the target's logits at the k + 1 verified positions (row i predicts the token after
draft i - 1; row 0 the token after the last verified one) and k draft tokens:

- greedy: accept draft i while it is the target's argmax; the first mismatch is replaced by
  the target's argmax, and if all k pass, the target's argmax at row k is added (the bonus
  token). The output is therefore token for token what greedy decoding without drafts gives.
- sampling (Leviathan et al. 2023; Chen et al. 2023; vLLM's rejection sampler): with p the
  target's distribution (`sampling_probs`, so temperature, top-k and top-p apply) and q the
  draft's, draft token d is accepted with probability min(1, p(d) / q(d)); on the first
  rejection a token is drawn from max(p - q, 0), renormalized, and the rest are dropped; if
  all pass, the bonus token is drawn from p at row k. Every emitted token is then distributed
  exactly as p. A draft without a distribution (n-gram, greedy draft) is a point mass: q = 1
  at d, so d is accepted with probability p(d) and a rejection draws from p without d.

Random draws come from the request's generator, so a seeded request is reproducible.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from engine.runtime.sampling import SamplingParams, sampling_probs


class RejectionSampler:
    def __call__(
        self,
        target_logits: torch.Tensor,
        draft_token_ids: Sequence[int],
        draft_probs: torch.Tensor | None,
        params: SamplingParams,
        generator: torch.Generator | None,
    ) -> list[int]:
        """The emitted tokens: the accepted drafts, then one token from the target (1 .. k + 1 tokens)."""
        k = len(draft_token_ids)
        if target_logits.shape[0] != k + 1:
            raise ValueError(f"{k} draft tokens need {k + 1} rows of target logits, got {target_logits.shape[0]}")
        if draft_probs is not None and draft_probs.shape[0] != k:
            raise ValueError(f"{k} draft tokens need {k} rows of draft probabilities, got {draft_probs.shape[0]}")
        if params.greedy:
            return self._greedy(target_logits, draft_token_ids)
        return self._random(target_logits, draft_token_ids, draft_probs, params, generator)

    @staticmethod
    def _greedy(target_logits: torch.Tensor, draft_token_ids: Sequence[int]) -> list[int]:
        out: list[int] = []
        for row, draft in zip(target_logits, draft_token_ids):
            token = int(torch.argmax(row))
            out.append(token)
            if token != draft:
                return out
        out.append(int(torch.argmax(target_logits[-1])))
        return out

    @staticmethod
    def _random(
        target_logits: torch.Tensor,
        draft_token_ids: Sequence[int],
        draft_probs: torch.Tensor | None,
        params: SamplingParams,
        generator: torch.Generator | None,
    ) -> list[int]:
        out: list[int] = []
        for i, draft in enumerate(draft_token_ids):
            p = sampling_probs(target_logits[i], params)
            if draft_probs is None:
                q = torch.zeros_like(p)
                q[draft] = 1.0
            else:
                q = draft_probs[i].float().cpu()
            uniform = float(torch.rand((), generator=generator))
            # accept when u < p/q, written without the division (q(d) > 0: d was drawn from q)
            if uniform * float(q[draft]) < float(p[draft]):
                out.append(draft)
                continue
            residual = (p - q).clamp_min(0.0)
            total = float(residual.sum())
            # a rejection means p(d) < q(d), so p exceeds q somewhere and the residual has mass
            residual = residual / total if total > 0 else p
            out.append(int(torch.multinomial(residual, 1, generator=generator)))
            return out
        bonus = sampling_probs(target_logits[-1], params)
        out.append(int(torch.multinomial(bonus, 1, generator=generator)))
        return out
