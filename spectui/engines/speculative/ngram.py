"""Prompt lookup: draft by copying what followed the current suffix the last time it appeared.

Free (no model) and strong wherever the reply repeats its context: summaries, edits of
given code, quoted text. The same idea as vLLM's `ngram` speculative method.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from spectui.core.errors import UsageError
from spectui.settings.options import LOOKUP_MAX


def propose_ngram(
    token_ids: Sequence[int], k: int, lookup_min: int = 1, lookup_max: int = LOOKUP_MAX
) -> list[int]:
    """Up to k tokens that followed the longest suffix n-gram seen earlier in token_ids
    (lookup_ngram without the match's length)."""
    return lookup_ngram(token_ids, k, lookup_min, lookup_max)[0]


class Match(NamedTuple):
    """What prompt lookup knows of its drafts' odds before anyone verifies them.

    length: the matched suffix n-gram's tokens (0: no match).
    contested: earlier occurrences of that n-gram went on with different tokens (after `"` a
    JSON reply writes a different key each time, after `"na` always `me"`): such copies are
    right far less often."""

    length: int
    contested: bool = False

    def __str__(self) -> str:
        return f"{self.length}, contested" if self.contested else str(self.length)


NO_MATCH = Match(0)


def lookup_ngram(
    token_ids: Sequence[int], k: int, lookup_min: int = 1, lookup_max: int = LOOKUP_MAX
) -> tuple[list[int], Match]:
    """Up to k tokens that followed the longest suffix n-gram seen earlier in token_ids, and
    what the match says of their odds (adaptive k weighs the drafts by it: a longer match's
    copy is accepted far more often).

    n runs from lookup_max down to lookup_min; a longer match is more likely to be the
    passage being copied. Among equally long matches the most recent one wins (vLLM v1
    takes the earliest): a reply usually copies the part of its context it is working on
    now (the latest message, the code it just restated), and the backward scan can stop
    at the first full-length match instead of reading the whole history (so a full-length
    match is never contested). Returns fewer than k tokens when the match sits near the
    end, and ([], NO_MATCH) when nothing matches.

    One backward scan, O(len(token_ids) * lookup_max), stopping at the most recent
    occurrence of the full lookup_max suffix.
    """
    if not 1 <= lookup_min <= lookup_max:
        raise UsageError(
            f"n-gram lookup needs 1 <= lookup_min <= lookup_max, got {lookup_min} and {lookup_max}"
        )
    if k < 0:
        raise UsageError(f"k must be >= 0, got {k}")
    last = len(token_ids) - 1
    if k == 0 or last < 1:
        return [], NO_MATCH
    best_end, best_length, contested = -1, 0, False
    # `end` is where an earlier occurrence of the suffix ends; it needs a token after it.
    for end in range(last - 1, -1, -1):
        length = 0
        while (
            length < lookup_max
            and length <= end
            and token_ids[end - length] == token_ids[last - length]
        ):
            length += 1
        if length > best_length:
            best_end, best_length, contested = end, length, False
            if length == lookup_max:
                break
        elif length == best_length and length and token_ids[end + 1] != token_ids[best_end + 1]:
            contested = True
    if best_length < lookup_min:
        return [], NO_MATCH
    return list(token_ids[best_end + 1 : best_end + 1 + k]), Match(best_length, contested)
