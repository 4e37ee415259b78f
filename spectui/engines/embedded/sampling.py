"""Turning logits into the distribution the target samples from, and drawing from it.

Drafts and target go through the same function so that the rejection rule compares
like with like: p_draft and p_target are both after temperature and top-p.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable

import torch

from spectui.core.errors import UsageError


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


# Inverse-CDF sampling by blocks, much faster than torch.multinomial over a large vocabulary
# (a sampled step draws once per drafted token and once to verify); float64 sums keep every
# token's interval exact to about 1e-16.
_BLOCK = 1024


def sample(probs: torch.Tensor, generator: torch.Generator | None) -> int:
    """One token id drawn from a [V] probability vector (seeded when generator is): the
    token whose interval of the cumulative distribution holds one uniform draw."""
    if probs.dim() != 1:
        raise ValueError(f"sample needs a [V] vector, got shape {tuple(probs.shape)}")
    size = probs.shape[0]
    blocks = torch.nn.functional.pad(probs, (0, (-size) % _BLOCK)).view(-1, _BLOCK)
    edges = torch.cumsum(blocks.sum(dim=1, dtype=torch.float64), 0)
    u = float(torch.rand((), generator=generator, dtype=torch.float64, device=probs.device)) * float(edges[-1])
    block = _first_above(edges, u)
    inner = torch.cumsum(blocks[block], 0, dtype=torch.float64)
    index = _first_above(inner, u - (float(edges[block - 1]) if block else 0.0))
    return block * _BLOCK + index


def _first_above(cumulative: torch.Tensor, value: float) -> int:
    """The first index whose cumulative sum exceeds value: an entry with mass 0 never is. At
    the top edge, where rounding can leave value at the total, the last entry with mass."""
    index = int(torch.searchsorted(cumulative, torch.tensor([value], dtype=cumulative.dtype, device=cumulative.device), right=True))
    if index < cumulative.shape[0]:
        return index
    steps = torch.diff(cumulative, prepend=cumulative.new_zeros(1))
    return int(torch.nonzero(steps > 0)[-1])


# A generator for the token `i` places after the context (row i of a verify).
Draws = Callable[[int], "torch.Generator | None"]

_MASK = (1 << 64) - 1


def _mixed(seed: int, position: int) -> int:
    """splitmix64 of (seed, position): neighbouring positions get unrelated streams."""
    z = (seed * 0x9E3779B97F4A7C15 + (position + 1) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return (z ^ (z >> 31)) & ((1 << 63) - 1)


class PositionDraws:
    """The target's randomness, keyed by the position of the token it draws.

    With drafts that are point masses (prompt lookup, a heads tree) the target's token at
    every position is its own draw x ~ p, and a draft is kept when it equals x. Drawing x
    from (seed, position) rather than from one stream makes the sampled reply the same
    whatever k, auto included, as the greedy reply is: two ks, or k and auto, compare on the
    same text, and a seed means one reply. A draft model's drafts are not point masses: its
    rule (min(1, p/q), the residual) takes its draws from the reply's one stream."""

    def __init__(self, seed: int | None, device: torch.device | str = "cpu") -> None:
        self.seed = seed if seed is not None else secrets.randbits(63)
        self.device = device

    def at(self, position: int) -> torch.Generator:
        return torch.Generator(device=self.device).manual_seed(_mixed(self.seed, position))

    def after(self, context_length: int) -> Draws:
        """Draws for the rows of a verify over a context of context_length tokens."""
        return lambda i: self.at(context_length + i)
