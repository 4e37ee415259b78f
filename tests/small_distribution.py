"""A six-token model and the exact distribution of its sampled tokens, for chi-square tests
that a speculative method keeps the target's distribution at T > 0."""

from __future__ import annotations

import torch

SMALL_VOCAB = 6
CHI2_CRITICAL_0_001_DF5 = 20.515  # as in test_verify: a correct rule fails 1 seed in 1000


def make_small_target():
    """Soft enough that every token has a fair chance at each position."""
    from tiny_models import make_tiny_model

    model = make_tiny_model(SMALL_VOCAB, seed=5)
    with torch.no_grad():
        model.lm_head.weight.mul_(0.25)
    return model


def exact_marginals(model, prompt_ids, temperature):
    """The target's own distribution of its 2nd and 3rd sampled tokens, by enumeration."""
    from spectui.engines.speculative.sampling import target_probs

    def probs(ids):
        with torch.no_grad():
            return target_probs(model(input_ids=torch.tensor([ids])).logits[0, -1], temperature, 1.0)

    first = probs(prompt_ids)
    second = torch.zeros(SMALL_VOCAB)
    third = torch.zeros(SMALL_VOCAB)
    for a in range(SMALL_VOCAB):
        p_b = probs(prompt_ids + [a])
        second += first[a] * p_b
        for b in range(SMALL_VOCAB):
            third += first[a] * p_b[b] * probs(prompt_ids + [a, b])
    return second, third


def chi_square(samples, expected):
    counts = torch.bincount(torch.tensor(samples), minlength=SMALL_VOCAB).float()
    return float(((counts - len(samples) * expected) ** 2 / (len(samples) * expected)).sum())
