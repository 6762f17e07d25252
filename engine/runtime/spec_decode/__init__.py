"""Speculative decoding (vLLM V1's design, one idea per module).

A proposer guesses the next k tokens of each decoding request; the target model verifies
them all in one forward pass over its paged KV (the request's last token and its k drafts
scheduled together, the prefill path with a query of k + 1 tokens); the rejection sampler
keeps the longest acceptable prefix plus one token of the target's own, so the output is
distributed exactly as without speculation (token-identical when greedy).

- `config`: `SpeculativeConfig`, the method (ngram, draft, self) and k, validated.
- `proposer`: what every proposer takes and returns (`ProposalRequest`, `DraftProposal`).
- `ngram_proposer`: `NgramProposer`, prompt lookup: no model.
- `draft_model_proposer`: `DraftModelProposer`, a smaller llama on its own KV store and block pool.
- `draft_models`: the draft for self-speculation (the target's first layers) and the checks a draft must pass.
- `kv_isolation`: proof that draft and target KV never share memory.
- `rejection_sampler`: `RejectionSampler`, greedy and distribution-preserving acceptance.
- `metrics`: `SpecDecodingStats`, acceptance counters.
"""
