"""Prompt lookup's matches computed once per reply position and shared by every arm that asks.

A lookup (spectui.engines.speculative.ngram.lookup_ngram) reads only the context: its match
does not depend on k (k only cuts the copy: the drafts at k are the first k of the drafts at
any wider k) nor on lookup_min (the scan is the same; a match shorter than lookup_min is no
match). So the replay's 9 arms of each n-gram range, and the ranges with the same lookup_max,
share one lookup per (reply, position) where each ran its own: the same drafts and evidence.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from typing import TYPE_CHECKING

from spectui.engines.adaptive import K_AUTO_MAX
from spectui.engines.speculative.ngram import NO_MATCH, Match
from spectui.engines.speculative.proposers import Proposal, Proposer

if TYPE_CHECKING:
    from spectui.engines.speculative.sampling import Generator


class LookupTable:
    """(reply, context length) -> (the width looked up, its drafts, its match), for one lookup_max.
    Within a reply the context is its prompt and the reply's first tokens: its length names it.
    The reply's tokens are indexed by value as they come, so a lookup reads only the earlier
    occurrences of the context's last token (lookup_ngram scans every position)."""

    def __init__(self, lookup_max: int) -> None:
        self.lookup_max = lookup_max
        self.found: dict[tuple[int, int], tuple[int, list[int], Match]] = {}
        self.reply = -1
        self.tokens: list[int] = []  # the reply's longest context seen
        self.places: dict[int, list[int]] = {}  # token -> its places in tokens, in order

    def lookup(self, reply: int, token_ids: Sequence[int], k: int) -> tuple[list[int], Match]:
        drafts, match = self.at(reply, token_ids, len(token_ids), k)
        return drafts[:k], match

    def at(self, reply: int, whole: Sequence[int], length: int, k: int) -> tuple[list[int], Match]:
        """The lookup after whole[:length] (the reply's prompt and first tokens) at k or wider."""
        key = (reply, length)
        found = self.found.get(key)
        if found is None or found[0] < k:
            width = max(k, K_AUTO_MAX)
            found = (width, *self._look(reply, whole, length, width))
            self.found[key] = found
        return found[1], found[2]

    def forget(self, reply: int) -> None:
        """Drop a reply's lookups once no arm asks for them again (the replay runs reply by reply)."""
        self.found = {key: value for key, value in self.found.items() if key[0] != reply}

    def _look(self, reply: int, whole: Sequence[int], length: int, k: int) -> tuple[list[int], Match]:
        """lookup_ngram(whole[:length], k, 1, lookup_max), from the index."""
        if reply != self.reply:
            self.reply, self.tokens, self.places = reply, [], {}
        tokens, places = self.tokens, self.places
        for place in range(len(tokens), length):
            token = whole[place]
            tokens.append(token)
            places.setdefault(token, []).append(place)
        last = length - 1
        if k == 0 or last < 1:
            return [], NO_MATCH
        earlier = places[tokens[last]]
        best_end, best_length, contested = -1, 0, False
        # as lookup_ngram's backward scan, over the only places where a match can end
        for index in range(bisect_left(earlier, last) - 1, -1, -1):
            end = earlier[index]
            length = 0
            while length < self.lookup_max and length <= end and tokens[end - length] == tokens[last - length]:
                length += 1
            if length > best_length:
                best_end, best_length, contested = end, length, False
                if length == self.lookup_max:
                    break
            elif length == best_length and tokens[end + 1] != tokens[best_end + 1]:
                contested = True
        if not best_length:
            return [], NO_MATCH
        return tokens[best_end + 1:min(best_end + 1 + k, last + 1)], Match(best_length, contested)


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
        return self.propose_at(token_ids, len(token_ids), k)

    def propose_at(self, whole: Sequence[int], length: int, k: int) -> Proposal:
        """propose(whole[:length], k, …) without the copy."""
        if k <= 0:
            return Proposal([], None)
        drafted, match = self.table.at(self.reply, whole, length, k)
        if match.length < self.lookup_min:
            return Proposal([], None)
        return Proposal(drafted[:k], None, evidence=match)

    def drafts_at(self, whole: list[int], length: int, k: int) -> list[int]:
        """propose(whole[:length], k)'s drafts (k > 0), without the copy or the Proposal."""
        drafted, match = self.table.at(self.reply, whole, length, k)
        return drafted[:k] if match.length >= self.lookup_min else []
