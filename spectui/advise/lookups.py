"""Prompt lookup's matches computed once per reply position and shared by every arm that asks.

A lookup (spectui.engines.speculative.ngram.lookup_ngram) reads only the context: its match
does not depend on k (k only cuts the copy: the drafts at k are the first k of the drafts at
any wider k) nor on lookup_min (the scan is the same; a match shorter than lookup_min is no
match). So the replay's 9 arms of each n-gram range, and the ranges with the same lookup_max,
share one lookup per (reply, position) where each ran its own: the same drafts and evidence.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from spectui.engines.adaptive import K_AUTO_MAX
from spectui.engines.speculative.ngram import Match, lookup_ngram
from spectui.engines.speculative.proposers import Proposal, Proposer

if TYPE_CHECKING:
    from spectui.engines.speculative.sampling import Generator


class LookupTable:
    """(reply, context length) -> (the width looked up, its drafts, its match), for one lookup_max.
    Within a reply the context is its prompt and the reply's first tokens: its length names it."""

    def __init__(self, lookup_max: int) -> None:
        self.lookup_max = lookup_max
        self.found: dict[tuple[int, int], tuple[int, list[int], Match]] = {}

    def lookup(self, reply: int, token_ids: Sequence[int], k: int) -> tuple[list[int], Match]:
        key = (reply, len(token_ids))
        found = self.found.get(key)
        if found is None or found[0] < k:
            width = max(k, K_AUTO_MAX)
            found = (width, *lookup_ngram(token_ids, width, 1, self.lookup_max))
            self.found[key] = found
        return found[1][:k], found[2]

    def forget(self, reply: int) -> None:
        """Drop a reply's lookups once no arm asks for them again (the replay runs reply by reply)."""
        self.found = {key: value for key, value in self.found.items() if key[0] != reply}


class SharedLookup(Proposer):
    """NgramProposer(lookup_min, table.lookup_max) drafting from the shared table: set `reply`
    to the index of the reply being replayed before it proposes."""

    method = "ngram"
    looks_first = True

    def __init__(self, table: LookupTable, lookup_min: int) -> None:
        self.table = table
        self.lookup_min = lookup_min
        self.reply = 0

    def propose(self, token_ids: Sequence[int], k: int, temperature: float, top_p: float,
                generator: Generator | None) -> Proposal:
        if k <= 0:
            return Proposal([], None)
        drafted, match = self.table.lookup(self.reply, token_ids, k)
        if match.length < self.lookup_min:
            return Proposal([], None)
        return Proposal(drafted, None, evidence=match)
