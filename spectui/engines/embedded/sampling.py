"""Turning logits into the distribution the target samples from, and drawing from it.

Drafts and target go through the same function so that the rejection rule compares
like with like: p_draft and p_target are both after temperature and top-p.
"""

from __future__ import annotations

import torch

from spectui.errors import UsageError


def target_probs(logits: torch.Tensor, temperature: float, top_p: float) -> torch.Tensor:
    """Probabilities after temperature and nucleus filtering, renormalised, float32.

    logits: [..., V]. temperature must be > 0 (greedy is handled by argmax elsewhere).
    top_p = 1.0 keeps every token.
    """
    if not temperature > 0.0:
        raise UsageError(f"sampling needs a temperature > 0, got {temperature!r}")
    if not 0.0 < top_p <= 1.0:
        raise UsageError(f"top_p must be in (0, 1], got {top_p!r}")
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    if top_p >= 1.0:
        return probs
    # A stable sort puts equal probabilities in id order, so ties at the edge of the
    # nucleus are broken the same way on every run (lowest id kept first).
    sorted_probs, order = torch.sort(probs, dim=-1, descending=True, stable=True)
    mass_before = torch.cumsum(sorted_probs, dim=-1) - sorted_probs
    # Keep a token while the mass above it is still short of top_p: the smallest set
    # reaching top_p, and the top token always (nothing is above it).
    keep_sorted = mass_before < top_p
    keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
    kept = probs * keep
    return kept / kept.sum(dim=-1, keepdim=True)


def sample(probs: torch.Tensor, generator: torch.Generator | None) -> int:
    """One token id drawn from a [V] probability vector (seeded when generator is)."""
    if probs.dim() != 1:
        raise ValueError(f"sample needs a [V] vector, got shape {tuple(probs.shape)}")
    return int(torch.multinomial(probs, 1, generator=generator))
