"""Suffix decoding's drafts computed once per reply position and shared by every arm that asks.

At a position of a reply, suffix decoding drafts from two indexes (spectui.engines.speculative.suffix):
this conversation's, which holds exactly the context (the prompt and the reply so far), and the
history's (earlier replies). The conversation's walks are a function of the context alone, so
every suffix arm (each k, with or without history) shares one set per (reply, position), walked
at the widest k and cut to each arm's (best_of: a narrower k may pick another match length, so a
draft is never assumed to be the prefix of a wider one). The history differs per arm (a reply
joins it as far as that arm's last step read it): its walks come from one index for every arm
(spectui.advise.shared_history), each arm walking alone only what reads its own last tokens; an
arm keeps its own index too, for arms not replayed reply by reply.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from typing import TYPE_CHECKING

from spectui.advise.replay import ReplayInput
from spectui.advise.shared_history import Node, SharedHistory, rewalk, view_walk
from spectui.engines.adaptive import K_AUTO_MAX
from spectui.engines.speculative.proposers import Proposal, Proposer
from spectui.engines.speculative.suffix import (
    END,
    MAX_DEPTH,
    MAX_OCCURRENCES,
    NO_DRAFT,
    Draft,
    SuffixIndex,
    Walk,
    best_of,
    suffix_proposal,
)

if TYPE_CHECKING:
    from spectui.engines.speculative.sampling import Generator


class ConversationWalks:
    """(reply, context) -> this conversation's draft at k, for the reply last asked about: its
    prompt and whole reply indexed once, each context read from it as if the index stopped there,
    each match's walk walked once (at the widest k) for every arm that needs it."""

    def __init__(self, replies: Sequence[ReplayInput]) -> None:
        self.replies = replies
        self.reply = -1
        self.index = SuffixIndex()
        self.nodes: dict[int, list[Node]] = {}  # context length -> its matches' ends and walks (best)

    def best(self, reply: int, tail: Sequence[int], length: int, k: int) -> Draft:
        """SuffixProposer's conversation draft at k for a context of `length` tokens (reply's prompt
        and first tokens) ending in `tail` (its last MAX_DEPTH): best_of its walks, longest match
        first, a match whose draft cannot score above the best so far (a score is at most its
        drafts' count) not walked."""
        self._at(reply)
        width = max(k, K_AUTO_MAX)
        nodes = self.nodes.get(length)
        if nodes is None:
            nodes = self.nodes[length] = self._nodes(tail, length)
        flat = self.index.flat
        following, flat[length + 1] = flat[length + 1], END  # the index stops at the context
        try:
            best, best_score, best_n = None, 0.0, 0
            for index in range(len(nodes) - 1, -1, -1):
                node = nodes[index]
                if best is not None and min(k, node.limit) <= best_score:
                    continue
                walk = node.walk if node.walk is not None and node.width >= width else self._walk(node, nodes, index, width)
                n = min(k, len(walk.tokens))
                if n and (best is None or walk.scores[n - 1] > best_score):  # ties: the longer match, met first
                    best, best_score, best_n = walk, walk.scores[n - 1], n
        finally:
            flat[length + 1] = following
        return NO_DRAFT if best is None else Draft(best.tokens[:best_n], best_score, best.match_length, best.first_probability)

    def _at(self, reply: int) -> None:
        if reply != self.reply:
            self.reply, self.index, self.nodes = reply, SuffixIndex(), {}
            self.index.add([*self.replies[reply].prompt_ids, *self.replies[reply].reply_ids])

    def _nodes(self, tail: Sequence[int], length: int) -> list[Node]:
        """Every match length's ends for the context, shortest first, while there are any."""
        flat = self.index.flat  # flat[length] is the context's last token
        if flat[length] != tail[-1]:
            raise ValueError("the context is not this reply's prompt and first tokens")
        places = self.index.occurrences[tail[-1]]
        upto = bisect_right(places, length)
        ends = places[max(0, upto - MAX_OCCURRENCES):upto - 1]  # the context's own last token is no match
        nodes = []
        for match in range(1, min(MAX_DEPTH, len(tail))):
            if match > 1:
                wanted = tail[-match]
                ends = [i for i in ends if flat[i - match + 1] == wanted]
            if not ends:
                break
            nodes.append(Node(match, ends, True))
        return nodes

    def _walk(self, node: Node, nodes: list[Node], index: int, width: int) -> Walk:
        """The node's walk at width, from a neighbour's from the same ends where there is one."""
        limit = min(width, node.limit)
        for other in (nodes[index - 1] if index else None, nodes[index + 1] if index + 1 < len(nodes) else None):
            if other is not None and other.walk is not None and other.width >= width and len(other.ends) == len(node.ends):
                walk = rewalk(self.index.flat, other.walk, node.ends, limit, node.match)  # the same ends walk the same
                break
        else:
            walk = view_walk(self.index.flat, node.ends, limit, node.match)
        node.walk, node.width = walk, width
        return walk


class SharedSuffix(Proposer):
    """SuffixProposer(use_history=history) with its defaults, drafting from the shared conversation
    walks: set `reply` to the index of the reply being replayed before it proposes."""

    method = "suffix"
    looks_first = True

    def __init__(self, conversation: ConversationWalks, history: bool = True, shared: SharedHistory | None = None) -> None:
        self.conversation = conversation
        self.shared = shared if history else None
        self.use_history = history
        self.history = SuffixIndex()
        self.memo: dict[int, dict] = {}  # width -> the history's walks per match, while it is unchanged
        self.reply = 0
        self._prompt_length: int | None = 0
        self._read: tuple[Sequence[int], int] = ((), 0)  # the conversation as far as the last step read it

    def reset(self) -> None:
        self._start([])

    def prefill(self, token_ids: Sequence[int]) -> None:
        self._start(token_ids)

    def _start(self, token_ids: Sequence[int]) -> None:
        """The reply so far joins the history (as SuffixProposer's _start)."""
        read, upto = self._read
        reply = read[self._prompt_length or 0:upto] if self._prompt_length is not None else ()
        if self.use_history and reply:
            self.history.add(reply)
            self.memo = {}
        self._read = (list(token_ids), len(token_ids))
        self._prompt_length = len(token_ids) if token_ids else None  # none yet: the first context is the prompt
        if self.shared is not None:
            self.shared.read(id(self), self.reply, 0)

    def propose(self, token_ids: Sequence[int], k: int, temperature: float, top_p: float,
                generator: Generator | None) -> Proposal:
        return self.propose_at(token_ids, len(token_ids), k)

    def propose_at(self, whole: Sequence[int], length: int, k: int) -> Proposal:
        """propose(whole[:length], k, …) without the copy."""
        return suffix_proposal(*self._drafts(whole, length, k))

    def drafts_at(self, whole: list[int], length: int, k: int) -> list[int]:
        """propose(whole[:length], k)'s drafts (k > 0), without the copy or the Proposal."""
        here, earlier = self._drafts(whole, length, k)
        return here.tokens if here.score >= earlier.score else earlier.tokens  # suffix_proposal's choice

    def _drafts(self, whole: Sequence[int], length: int, k: int) -> tuple[Draft, Draft]:
        """(this conversation's draft, the history's) after whole[:length], the steps read so far noted."""
        if self._prompt_length is None:
            self._prompt_length = length
        self._read = (whole, length)
        if self.shared is not None:
            self.shared.read(id(self), self.reply, length - self._prompt_length)
        if k <= 0 or not length:
            return NO_DRAFT, NO_DRAFT
        tail = whole[max(0, length - MAX_DEPTH):length]
        here = self.conversation.best(self.reply, tail, length, k)
        earlier = NO_DRAFT
        if self.use_history:
            width = max(k, K_AUTO_MAX)
            shared = self.shared.best(id(self), tail, length, width, k, here.score) if self.shared is not None else None
            earlier = shared if shared is not None else best_of(
                self.history.walks_from(None, tail, width, memo=self.memo.setdefault(width, {})), k)
        return here, earlier
