"""SpecDecodingStats: how many draft tokens the target accepted (vLLM's names).

- acceptance rate: accepted draft tokens / proposed draft tokens;
- mean accepted length: accepted draft tokens per verification (the bonus token not counted:
  1.0 means one draft token saved a forward pass on average);
- tokens per verification: emitted tokens per verification, bonus included (= 1 + mean accepted length).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class SpecDecodingStats:
    num_drafts: int = 0  # verifications of a non-empty draft
    num_draft_tokens: int = 0
    num_accepted_tokens: int = 0
    num_accepted_tokens_per_pos: list[int] = field(default_factory=list)

    def observe(self, num_draft_tokens: int, num_accepted_tokens: int) -> None:
        if num_draft_tokens == 0:
            return
        self.num_drafts += 1
        self.num_draft_tokens += num_draft_tokens
        self.num_accepted_tokens += num_accepted_tokens
        while len(self.num_accepted_tokens_per_pos) < num_accepted_tokens:
            self.num_accepted_tokens_per_pos.append(0)
        for pos in range(num_accepted_tokens):
            self.num_accepted_tokens_per_pos[pos] += 1

    @property
    def acceptance_rate(self) -> float:
        return self.num_accepted_tokens / self.num_draft_tokens if self.num_draft_tokens else 0.0

    @property
    def mean_accepted_length(self) -> float:
        return self.num_accepted_tokens / self.num_drafts if self.num_drafts else 0.0
