"""Suffix decoding's drafts computed once per reply position and shared by every arm that asks.

At a position of a reply, suffix decoding drafts from two indexes (spectui.engines.speculative.suffix):
this conversation's, which holds exactly the context (the prompt and the reply so far), and the
history's (earlier replies). The conversation's walks are a function of the context alone, so
every suffix arm (each k, with or without history) shares one set per (reply, position), walked
at the widest k and cut to each arm's (best_of: a narrower k may pick another match length, so a
draft is never assumed to be the prefix of a wider one). The history differs per arm (a reply
joins it as far as that arm's last step read it), so each arm keeps its own, and a memo of the
walks of every match met while it does not change (one reply).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from typing import TYPE_CHECKING

from spectui.advise.replay import ReplayInput
from spectui.engines.adaptive import K_AUTO_MAX
from spectui.engines.speculative.proposers import Proposal, Proposer
from spectui.engines.speculative.suffix import (
    END,
    MAX_DEPTH,
    MAX_OCCURRENCES,
    NO_DRAFT,
    SuffixIndex,
    Walk,
    best_of,
    suffix_proposal,
)

if TYPE_CHECKING:
    from spectui.engines.speculative.sampling import Generator


class ConversationWalks:
    """(reply, context length) -> this conversation's walks, for the reply last asked about: its
    prompt and whole reply indexed once, each context read from it as if the index stopped there."""

    def __init__(self, replies: Sequence[ReplayInput]) -> None:
        self.replies = replies
        self.reply = -1
        self.index = SuffixIndex()
        self.found: dict[int, tuple[int, list[Walk]]] = {}  # context length -> (width walked at, walks)

    def walks(self, reply: int, context: Sequence[int], k: int) -> list[Walk]:
        """The walks SuffixProposer's conversation index gives for `context` (reply's prompt and
        first tokens), at k or wider."""
        if reply != self.reply:
            self.reply, self.index, self.found = reply, SuffixIndex(), {}
            self.index.add([*self.replies[reply].prompt_ids, *self.replies[reply].reply_ids])
        length = len(context)
        found = self.found.get(length)
        if found is None or found[0] < k:
            width = max(k, K_AUTO_MAX)
            found = (width, self._walk_at(context, width))
            self.found[length] = found
        return found[1]

    def _walk_at(self, context: Sequence[int], width: int) -> list[Walk]:
        flat, last = self.index.flat, len(context)  # flat[last] is the context's last token
        if flat[last] != context[-1]:
            raise ValueError("the context is not this reply's prompt and first tokens")
        places = self.index.occurrences[context[-1]]
        upto = bisect_right(places, last)
        ends = places[max(0, upto - MAX_OCCURRENCES):upto - 1]  # the context's own last token is no match
        following, flat[last + 1] = flat[last + 1], END  # the index stops at the context
        try:
            return self.index.walks_from(ends, context[-MAX_DEPTH:], width)
        finally:
            flat[last + 1] = following


class SharedSuffix(Proposer):
    """SuffixProposer(use_history=history) with its defaults, drafting from the shared conversation
    walks: set `reply` to the index of the reply being replayed before it proposes."""

    method = "suffix"
    looks_first = True

    def __init__(self, conversation: ConversationWalks, history: bool = True) -> None:
        self.conversation = conversation
        self.use_history = history
        self.history = SuffixIndex()
        self.memo: dict[int, dict] = {}  # width -> the history's walks per match, while it is unchanged
        self.reply = 0
        self._prompt_length: int | None = 0
        self._read: Sequence[int] = ()  # the conversation as far as the last step read it

    def reset(self) -> None:
        self._start([])

    def prefill(self, token_ids: Sequence[int]) -> None:
        self._start(token_ids)

    def _start(self, token_ids: Sequence[int]) -> None:
        """The reply so far joins the history (as SuffixProposer's _start)."""
        reply = self._read[self._prompt_length or 0:] if self._prompt_length is not None else ()
        if self.use_history and reply:
            self.history.add(reply)
            self.memo = {}
        self._read = list(token_ids)
        self._prompt_length = len(token_ids) if token_ids else None  # none yet: the first context is the prompt

    def propose(self, token_ids: Sequence[int], k: int, temperature: float, top_p: float,
                generator: Generator | None) -> Proposal:
        if self._prompt_length is None:
            self._prompt_length = len(token_ids)
        self._read = token_ids
        if k <= 0 or not token_ids:
            return Proposal([], None)
        here = best_of(self.conversation.walks(self.reply, token_ids, k), k)
        earlier = NO_DRAFT
        if self.use_history:
            width = max(k, K_AUTO_MAX)
            memo = self.memo.setdefault(width, {})
            earlier = best_of(self.history.walks_from(None, token_ids[-MAX_DEPTH:], width, memo=memo), k)
        return suffix_proposal(here, earlier)
