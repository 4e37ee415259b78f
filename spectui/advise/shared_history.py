"""Suffix decoding's history walks shared by every arm with history (spectui.advise.suffixes).

Each arm's history holds every earlier reply as far as that arm's last step read it, so the
arms' histories differ only in the replies' last few tokens. One index holds each reply as far
as any arm read it; `absent[arm]` are its places that arm did not read, `differ` their union.
An arm's index is that index without its absent places, so its walks follow from the shared
index's: an arm's ends are the shared ends but its absent ones (and, past MAX_OCCURRENCES of a
token, those older than its own window), and a place it lacks reads as the end of its reply.
A match length whose ends are every arm's and whose walk reads no place in `differ` is walked
once for all; another is walked once per set of ends the arms have, and only where that walk
reads a place in `differ` by each arm alone.
"""

from __future__ import annotations

from collections.abc import Sequence

from spectui.advise.replay import ReplayInput
from spectui.engines.speculative.suffix import (
    END,
    MAX_DEPTH,
    MAX_OCCURRENCES,
    MAX_SPEC_FACTOR,
    MAX_SPEC_OFFSET,
    MIN_TOKEN_PROB,
    NO_DRAFT,
    Draft,
    SuffixIndex,
    Unsure,
    Walk,
    most_frequent,
)

NOTHING: frozenset[int] = frozenset()
DIFFER = -2  # SharedHistory.shadow's mark of a place some arm did not read


class SharedHistory:
    """The history's drafts for every suffix arm with history, from one index (the module's doc).
    Arms say how far they read (read) as they go; the replay runs reply by reply, so when the
    next reply starts every arm has read its last."""

    def __init__(self, replies: Sequence[ReplayInput]) -> None:
        self.replies = replies
        self.index = SuffixIndex()
        self.shadow: list[int] = self.index.flat  # the index's tokens, DIFFER where some arm lacks the place
        self.absent: dict[int, set[int]] = {}  # arm -> places of the index it did not read
        self.differ: set[int] = set()  # places some arm did not read
        self.reads: dict[int, tuple[int, int]] = {}  # arm -> (reply, its tokens read)
        self.reply = -1
        self.found: dict[int, list[Node]] = {}  # context length -> its matches' nodes, shortest first
        self.memo: dict[tuple[int, ...], Node] = {}  # match -> node, for this reply
        self.by_ends: dict[tuple[int, int, tuple[int, ...]], Walk | None] = {}  # (width, length, ends) -> walk or None: unsure
        self.own: dict[tuple[int, int, int, tuple[int, ...]], Walk] = {}  # (arm, width, length, its ends) -> its own walk
        self.cutoffs: dict[tuple[int, int], int] = {}  # (arm, token) -> the oldest 1-token end in its window
        self.alone = False  # arms were not replayed reply by reply: each keeps to its own

    def read(self, arm: int, reply: int, tokens: int) -> None:
        if reply != self.reply:
            self._join()
            self.reply, self.found, self.memo, self.by_ends, self.own, self.cutoffs = reply, {}, {}, {}, {}, {}
        self.reads[arm] = (reply, tokens)

    def _join(self) -> None:
        """The last reply into the index as far as any arm read it; the rest of each arm's absent."""
        if self.reply < 0 or not self.reads:
            return
        if any(reply != self.reply for reply, _ in self.reads.values()):
            self.alone = True
            return
        most = max(tokens for _, tokens in self.reads.values())
        if not most:
            return
        self.index.add(self.replies[self.reply].reply_ids[:most])
        start = self.index.starts[-1]
        for arm, (_, tokens) in self.reads.items():
            if tokens < most:
                places = range(start + tokens, start + most)
                self.absent.setdefault(arm, set()).update(places)
                self.differ.update(places)
        self.shadow = list(self.index.flat)
        for place in self.differ:
            self.shadow[place] = DIFFER

    def best(self, arm: int, tail: Sequence[int], length: int, width: int, k: int, floor: float = 0.0) -> Draft | None:
        """best_of(the arm's history walks at width, k) after a context of `length` tokens (this
        reply's prompt and first tokens) ending in `tail` (its last MAX_DEPTH) where it scores
        above `floor` (the conversation's draft, which wins ties), else NO_DRAFT; None: not
        shared (alone). Longest match first, and a match whose draft cannot score above the best
        so far nor the floor (a score is at most its drafts' count) is not walked."""
        if self.alone:
            return None
        nodes = self.found.get(length)
        if nodes is None:
            nodes = self.found[length] = self._nodes(tail)
        best, best_score, best_n = None, 0.0, 0
        for index in range(len(nodes) - 1, -1, -1):
            node = nodes[index]
            if min(k, node.limit) <= (floor if best is None else best_score):
                continue
            walk = self._walk(node, nodes, index, width) if node.width < width else node.walk
            if walk is None:
                walk = self._arm_walk(arm, tail[-1], node, width)
                if walk is None:  # none of the ends is the arm's (nor of any longer match's)
                    continue
            n = min(k, len(walk.tokens))
            if n and walk.scores[n - 1] > (floor if best is None else best_score):  # ties: the longer match, met first
                best, best_score, best_n = walk, walk.scores[n - 1], n
        return NO_DRAFT if best is None else Draft(best.tokens[:best_n], best_score, best.match_length, best.first_probability)

    def _nodes(self, tail: Sequence[int]) -> list[Node]:
        """Every match length's node (its ends), shortest first, while the shared index has ends."""
        occurrences = self.index.occurrences.get(tail[-1], [])
        low = occurrences[-MAX_OCCURRENCES] if len(occurrences) > MAX_OCCURRENCES else 0  # the window every arm has
        nodes: list[Node] = []
        ends: list[int] = []
        for match in range(1, min(MAX_DEPTH, len(tail))):
            key = tuple(tail[len(tail) - match:])
            node = self.memo.get(key)
            if node is None:
                node = self.memo[key] = self._node(key, ends, occurrences, low)
            ends = node.ends
            if not ends:
                break
            nodes.append(node)
        return nodes

    def _node(self, key: tuple[int, ...], ends: list[int], occurrences: list[int], low: int) -> Node:
        match = len(key)
        if match == 1:
            ends = occurrences[-MAX_OCCURRENCES:]
            if low and DIFFER in map(self.shadow.__getitem__, ends):  # an arm's window reaches back as far as it lacks
                ends = occurrences[-(MAX_OCCURRENCES + sum(1 for end in occurrences if end in self.differ)):]
        else:
            flat, wanted = self.index.flat, key[0]
            ends = [i for i in ends if flat[i - match + 1] == wanted]
        every = bool(ends) and ends[0] >= low and DIFFER not in map(self.shadow.__getitem__, ends)
        return Node(match, ends, every)

    def _walk(self, node: Node, nodes: list[Node], index: int, width: int) -> Walk | None:
        """The node's walk at width where it is every arm's (None: each arm's own), from a
        neighbour's walk from the same ends where there is one."""
        walk = None
        if node.every:
            limit = min(width, node.limit)
            try:
                for other in (nodes[index - 1] if index else None, nodes[index + 1] if index + 1 < len(nodes) else None):
                    if other is not None and other.walk is not None and other.width >= width and len(other.ends) == len(node.ends):
                        walk = rewalk(self.shadow, other.walk, node.ends, limit, node.match)  # the same ends walk the same
                        break
                else:
                    walk = view_walk(self.shadow, node.ends, limit, node.match)
            except Unsure:
                node.every = False
                walk = None
        node.walk, node.width = walk, width
        return walk

    def _arm_walk(self, arm: int, last: int, node: Node, width: int) -> Walk | None:
        """The arm's walk from its own of the node's ends (None: it has none), shared with arms that have the same."""
        absent = self.absent.get(arm, NOTHING)
        low = self._cutoff(arm, last)
        mine = tuple(end for end in node.ends if end not in absent and end >= low)
        if not mine:
            return None
        match, limit = node.match, min(width, node.limit)
        key = (width, match, mine)
        if key not in self.by_ends:
            try:
                self.by_ends[key] = view_walk(self.shadow, list(mine), limit, match)
            except Unsure:
                self.by_ends[key] = None
        walk = self.by_ends[key]
        if walk is None:  # it reads a place some arm lacks: this arm's own
            walk = self.own.get((arm, *key))
            if walk is None:
                walk = self.own[(arm, *key)] = view_walk(self.index.flat, list(mine), limit, match, absent=absent)
        return walk

    def _cutoff(self, arm: int, token: int) -> int:
        """The oldest of the last MAX_OCCURRENCES places of `token` the arm has (0: it has no more)."""
        key = (arm, token)
        if key not in self.cutoffs:
            occurrences, absent, cutoff, seen = self.index.occurrences.get(token, []), self.absent.get(arm, NOTHING), 0, 0
            if len(occurrences) > MAX_OCCURRENCES:
                for place in reversed(occurrences):
                    seen += place not in absent
                    if seen == MAX_OCCURRENCES:
                        cutoff = place
                        break
            self.cutoffs[key] = cutoff
        return self.cutoffs[key]


class Node:
    """A match in the shared index: its ends (every arm's and then some), whether every arm has
    exactly these, and its walk once walked (at width; None: each arm walks its own)."""

    __slots__ = ("ends", "every", "limit", "match", "walk", "width")

    def __init__(self, match: int, ends: list[int], every: bool) -> None:
        self.match, self.ends, self.every = match, ends, every
        self.limit = limit_at(match, MAX_DEPTH)  # its draft's most tokens at any width
        self.walk: Walk | None = None
        self.width = 0


def limit_at(match: int, width: int) -> int:
    """SuffixIndex.walks_from's limit on a match's draft at the defaults."""
    return min(width, int(match * MAX_SPEC_FACTOR + MAX_SPEC_OFFSET + 1e-6), MAX_DEPTH - match)


def rewalk(flat: list[int], walk: Walk, ends: list[int], limit: int, match: int) -> Walk:
    """SuffixIndex._rewalk: the walk from the same ends at another limit, from the one walked."""
    walked = len(walk.tokens)
    if limit == walked or (limit > walked and walk.stopped):
        return walk._replace(match_length=match)
    if limit < walked:
        return Walk(walk.tokens[:limit], walk.scores[:limit], match, walk.first_probability, None, False)
    if walk.onward is None:
        return view_walk(flat, ends, limit, match)
    return view_walk(flat, walk.onward[0], limit, match, start=walk)


def view_walk(flat: list[int], ends: list[int], limit: int, match: int, start: Walk | None = None,
              absent: set[int] | frozenset[int] = NOTHING) -> Walk:
    """SuffixIndex._walk at MIN_TOKEN_PROB over an index an arm has without its `absent` places
    (each reads as the end of its reply); reading DIFFER (SharedHistory.shadow) raises Unsure."""
    tokens, scores = (list(start.tokens), list(start.scores)) if start else ([], [])
    probability = start.onward[1] if start and start.onward else 1.0
    score = scores[-1] if scores else 0.0
    first = start.first_probability if start else 0.0
    while len(tokens) < limit:
        if len(ends) == 1:  # one occurrence: its continuation, if any, is sure
            token, count = (END if ends[0] + 1 in absent else flat[ends[0] + 1]), 1
            if token == DIFFER:
                raise Unsure
            if token == END:
                break
            following = None
        else:
            following = [END if i + 1 in absent else flat[i + 1] for i in ends] if absent else [flat[i + 1] for i in ends]
            if DIFFER in following:
                raise Unsure
            token, count = most_frequent(following)
            if token == END:
                break
        probability *= count / len(ends)
        if probability < MIN_TOKEN_PROB:
            break
        if not tokens:
            first = count / len(ends)
        tokens.append(token)
        score += probability
        scores.append(score)
        ends = [ends[0] + 1] if following is None else [i + 1 for i, t in zip(ends, following, strict=True) if t == token]
    else:
        return Walk(tokens, scores, match, first, (ends, probability), False)
    return Walk(tokens, scores, match, first)
