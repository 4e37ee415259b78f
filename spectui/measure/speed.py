"""Speed of a timed reply, and the one rule that turns two arms' replies into a speedup.

Stdlib only. `spectui compare` (CLI and view) and `spectui bench` both divide with
`paired_ratio`, so the same replies give the same speedup in both.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence


def median_or_none(values: Iterable[float | None]) -> float | None:
    present = [value for value in values if value is not None]
    return statistics.median(present) if present else None


def tokens_per_s(num_tokens: int, wall_seconds: float) -> float | None:
    """Wall-clock speed, the prompt's prefill included."""
    return num_tokens / wall_seconds if wall_seconds > 0 else None


def decode_tokens_per_s(
    num_tokens: int, wall_seconds: float, first_token_seconds: float | None, first_chunk_tokens: int = 1
) -> float | None:
    """Tokens after the first chunk over the time after it: the prompt's prefill is not what
    speculation speeds up, an engine that keeps the prompt's cache gains nothing here, and a
    prefill that also verifies drafts (first_chunk_tokens > 1) does not get them for free."""
    if first_token_seconds is None or num_tokens <= first_chunk_tokens:
        return None
    seconds = wall_seconds - first_token_seconds
    return (num_tokens - first_chunk_tokens) / seconds if seconds > 0 else None


def paired_ratio(top: Sequence[float | None], bottom: Sequence[float | None]) -> float | None:
    """One arm's speed over another's: the median over rounds of the ratio within each round
    (both lists in round order; a round where either speed is missing is left out).

    A slow stretch of a shared machine slows both arms of the rounds it covers, while two
    separate medians can take one arm's from a slow round and the other's from a fast one."""
    ratios = [upper / lower for upper, lower in zip(top, bottom) if upper and lower]
    return statistics.median(ratios) if ratios else None
