"""Leviathan et al.'s expected speedup, with our words.

alpha: per-token acceptance probability; k: draft tokens per step;
draft_cost: one draft token's cost relative to one target decode step (c);
verify_cost(k): the target's cost for k+1 tokens relative to 1 (v(k), v(0) = 1).
"""

from __future__ import annotations

from collections.abc import Callable


def expected_tokens(alpha: float, k: int) -> float:
    """E(alpha, k) = (1 - alpha^(k+1)) / (1 - alpha): tokens emitted per verify step."""
    if k <= 0:
        return 1.0
    if alpha >= 1.0:
        return float(k + 1)
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


def linear_verify_cost(slope: float) -> Callable[[int], float]:
    """v(k) = 1 + slope * k: a simple model when only one k was measured."""
    return lambda k: 1.0 + slope * k


def speedup(
    alpha: float, k: int, draft_cost: float, verify_cost: Callable[[int], float]
) -> float:
    """S = E(alpha, k) / (k * c + v(k)), relative to plain decoding."""
    if k <= 0:
        return 1.0
    return expected_tokens(alpha, k) / (k * draft_cost + verify_cost(k))


def best_k(
    alpha: float,
    draft_cost: float,
    verify_cost: Callable[[int], float],
    k_max: int = 16,
) -> tuple[int, float]:
    """The k in 0..k_max with the highest predicted speedup, and that speedup."""
    return max(
        ((k, speedup(alpha, k, draft_cost, verify_cost)) for k in range(k_max + 1)),
        key=lambda pair: pair[1],
    )


def alpha_from_tau(tau: float, k: int) -> float:
    """Invert E(alpha, k) = tau by bisection (E is increasing in alpha)."""
    if k <= 0:
        return 0.0
    tau = min(max(tau, 1.0), k + 1.0)
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if expected_tokens(mid, k) < tau:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2
