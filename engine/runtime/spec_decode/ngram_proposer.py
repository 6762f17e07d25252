"""NgramProposer: prompt lookup decoding, no model.

The last n tokens of the sequence (n from `prompt_lookup_max` down to `prompt_lookup_min`)
are looked up earlier in the same sequence, prompt and output alike; the tokens that
followed the most recent earlier occurrence are the draft. Text that repeats itself
(code, quotes, lists, a model stuck in a loop) is drafted for free.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.runtime.spec_decode.proposer import DraftProposal, ProposalRequest


class NgramProposer:
    def __init__(self, prompt_lookup_min: int, prompt_lookup_max: int) -> None:
        if not 1 <= prompt_lookup_min <= prompt_lookup_max:
            raise ValueError(f"need 1 <= min <= max, got {prompt_lookup_min} and {prompt_lookup_max}")
        self.prompt_lookup_min, self.prompt_lookup_max = prompt_lookup_min, prompt_lookup_max

    def propose(self, inputs: Sequence[ProposalRequest]) -> list[DraftProposal]:
        return [DraftProposal(self.lookup(item.request.all_token_ids, item.num_draft_tokens)) for item in inputs]

    def lookup(self, tokens: Sequence[int], k: int) -> list[int]:
        """Up to k tokens that followed the latest earlier occurrence of the longest matching suffix."""
        length = len(tokens)
        for n in range(min(self.prompt_lookup_max, length - 1), self.prompt_lookup_min - 1, -1):
            suffix = list(tokens[length - n :])
            for start in range(length - n - 1, -1, -1):
                if tokens[start] == suffix[0] and list(tokens[start : start + n]) == suffix:
                    return list(tokens[start + n : start + n + k])
        return []

    def remove(self, request_id: str) -> None:
        """Nothing is kept per request."""
