"""What a proposer is given and what it returns; every proposer has `propose` and `remove`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import torch

from engine.core.request import Request
from engine.runtime.sampling import SamplingParams


@dataclass(frozen=True)
class ProposalRequest:
    """Draft up to `num_draft_tokens` tokens after the request's last token."""

    request: Request
    num_draft_tokens: int
    params: SamplingParams
    generator: torch.Generator | None


@dataclass(frozen=True)
class DraftProposal:
    token_ids: list[int]
    # [len(token_ids), vocab]: the distribution each draft token was sampled from;
    # None when each was chosen deterministically (a point mass: n-gram, greedy drafts)
    probs: torch.Tensor | None = None


class Proposer(Protocol):
    def propose(self, inputs: Sequence[ProposalRequest]) -> list[DraftProposal]: ...

    def remove(self, request_id: str) -> None:
        """Forget a finished request (and free what the proposer held for it)."""
        ...
