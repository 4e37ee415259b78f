"""Turning logits into the distribution the target samples from, and drawing from it.

Drafts and target go through the same function so that the rejection rule compares
like with like: p_draft and p_target are both after temperature and top-p. Written once for
numpy rows (the ggml backend, no torch) and torch tensors (spectui.engines.speculative.arrays).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any

from spectui.core.errors import UsageError
from spectui.engines.speculative.arrays import ops_named, ops_of

# A numpy array or a torch tensor (spectui.engines.speculative.arrays); a seeded stream of either kind.
Array = Any
Generator = Any


def target_probs(logits: Array, temperature: float, top_p: float) -> Array:
    """Probabilities after temperature and nucleus filtering, renormalised, float32.

    logits: [..., V]. temperature must be > 0 (greedy is handled by argmax elsewhere).
    top_p = 1.0 keeps every token.
    """
    if not temperature > 0.0:
        raise UsageError(f"sampling needs a temperature > 0, got {temperature!r}")
    if not 0.0 < top_p <= 1.0:
        raise UsageError(f"top_p must be in (0, 1], got {top_p!r}")
    ops = ops_of(logits)
    probs = ops.softmax(logits, temperature)
    if top_p >= 1.0:
        return probs
    # A stable sort puts equal probabilities in id order, so ties at the edge of the
    # nucleus are broken the same way on every run (lowest id kept first).
    sorted_probs, order = ops.sort_descending(probs)
    mass_before = ops.cumsum(sorted_probs) - sorted_probs
    # Keep a token while the mass above it is still short of top_p: the smallest set
    # reaching top_p, and the top token always (nothing is above it).
    keep = ops.unsort(mass_before < top_p, order)
    kept = probs * keep
    return kept / kept.sum(-1, keepdims=True)


# Inverse-CDF sampling by blocks, much faster than torch.multinomial over a large vocabulary
# (a sampled step draws once per drafted token and once to verify); float64 sums keep every
# token's interval exact to about 1e-16.
_BLOCK = 1024


def sample(probs: Array, generator: Generator | None) -> int:
    """One token id drawn from a [V] probability vector (seeded when generator is): the
    token whose interval of the cumulative distribution holds one uniform draw."""
    if len(probs.shape) != 1:
        raise ValueError(f"sample needs a [V] vector, got shape {tuple(probs.shape)}")
    ops = ops_of(probs)
    blocks = ops.blocks(probs, _BLOCK)
    edges = ops.cumsum(ops.row_sums64(blocks))
    u = ops.uniform64(generator, probs) * float(edges[-1])
    block = _first_above(edges, u)
    inner = ops.cumsum(blocks[block], float64=True)
    index = _first_above(inner, u - (float(edges[block - 1]) if block else 0.0))
    return block * _BLOCK + index


def _first_above(cumulative: Array, value: float) -> int:
    """The first index whose cumulative sum exceeds value: an entry with mass 0 never is. At
    the top edge, where rounding can leave value at the total, the last entry with mass."""
    ops = ops_of(cumulative)
    index = ops.searchsorted_right(cumulative, value)
    if index < cumulative.shape[0]:
        return index
    return ops.last_with_mass(cumulative)


# A generator for the token `i` places after the context (row i of a verify).
Draws = Callable[[int], "Generator | None"]

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
    rule (min(1, p/q), the residual) takes its draws from the reply's one stream.
    arrays: "torch" or "numpy", the kind of generator the target's rows are sampled with."""

    def __init__(self, seed: int | None, device: Any = "cpu", arrays: str = "torch") -> None:
        self.seed = seed if seed is not None else secrets.randbits(63)
        self.device = device
        self.ops = ops_named(arrays)

    def at(self, position: int) -> Generator:
        return self.ops.generator(_mixed(self.seed, position), self.device)

    def after(self, context_length: int) -> Draws:
        """Draws for the rows of a verify over a context of context_length tokens."""
        return lambda i: self.at(context_length + i)
