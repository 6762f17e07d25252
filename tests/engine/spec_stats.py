"""Pearson's chi-square goodness-of-fit test for the speculative sampling tests.

The threshold: a test fails when the p-value is below P_VALUE_THRESHOLD = 1e-3. The seeds
are fixed, so each test is deterministic; for a correct sampler a given seed fails with
probability 0.1%, and the seeds in use were run and pass. A sampler that drifts toward
the draft distribution gives p-values far below the threshold (the negative controls show it).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

P_VALUE_THRESHOLD = 1e-3
MIN_EXPECTED = 5.0  # cells expected to hold fewer samples are pooled, as the test's approximation needs


def chi_square_p_value(samples: Sequence[int], probs: torch.Tensor) -> float:
    """p-value of the samples (token ids) against the distribution `probs` `[vocab]`."""
    n = len(samples)
    observed = torch.bincount(torch.tensor(list(samples)), minlength=probs.numel()).double()
    expected = probs.double() * n
    if float(observed[expected == 0].sum()) > 0:
        return 0.0  # a token the distribution never produces
    big = expected >= MIN_EXPECTED
    obs_cells = [*observed[big].tolist(), float(observed[~big].sum())]
    exp_cells = [*expected[big].tolist(), float(expected[~big].sum())]
    if exp_cells[-1] == 0:
        obs_cells, exp_cells = obs_cells[:-1], exp_cells[:-1]
    statistic = sum((o - e) ** 2 / e for o, e in zip(obs_cells, exp_cells))
    dof = len(exp_cells) - 1
    return float(torch.special.gammaincc(torch.tensor(dof / 2.0), torch.tensor(statistic / 2.0)))
