"""Suffix decoding: draft what most often followed the context's suffix, in the conversation
and in earlier replies (SuffixDecoding, Oliaro et al., arXiv 2411.04975; vLLM's `suffix`
method through Snowflake's Arctic Inference).

Where prompt lookup copies the one most recent continuation of the longest match, suffix
decoding weighs every earlier continuation: for each match length it follows the most
frequent next token while the product of their frequencies (the draft's estimated
probability) stays above min_token_prob, and keeps the draft whose probabilities sum
highest. A match of m tokens drafts at most max_spec_factor·m + max_spec_offset tokens,
and match plus draft stay within max_depth (Arctic's tree is that deep).

Two sources, as in Arctic: this conversation (the prompt and the reply so far) and the
replies of earlier prompts (the user's stored history and this session's own replies), the
better-scoring draft wins. Drafts are copies (point masses): the target verifies them with
its own tokens (spectui.engines.speculative.verify.verify_copies), so a draft from another
conversation can only be accepted where the target would have written the same tokens.

Arctic keeps a suffix tree per source; this keeps, per source, the positions of every token
and narrows them by matching backwards, which is the same search over a few thousand
conversation tokens and a bounded number of recent history occurrences.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, NamedTuple

from spectui.engines.speculative.proposers import Proposal, Proposer

if TYPE_CHECKING:
    from spectui.engines.speculative.sampling import Generator

# vLLM's defaults for its suffix method (SpeculativeConfig.suffix_decoding_*)
MAX_DEPTH = 24
MAX_SPEC_FACTOR = 1.0
MAX_SPEC_OFFSET = 0.0
MIN_TOKEN_PROB = 0.1
# Occurrences of the context's last token looked at per source (the most recent ones): a
# frequent token in a long history would otherwise cost a scan of all of them every step.
MAX_OCCURRENCES = 1024
EVIDENCE_LENGTH_CAP = 8  # adaptive k learns per match length up to here


class SuffixMatch(NamedTuple):
    """What a suffix draft knew before it was verified (adaptive k keeps odds per value)."""

    length: int  # matched context tokens, capped at EVIDENCE_LENGTH_CAP
    contested: bool  # the first drafted token was not the only continuation seen
    history: bool  # drafted from earlier replies rather than this conversation

    def __str__(self) -> str:
        where = "history" if self.history else "conversation"
        return f"{self.length}{', contested' if self.contested else ''}, {where}"


class Draft(NamedTuple):
    tokens: list[int]
    score: float  # the sum of the drafted tokens' estimated probabilities
    match_length: int
    first_probability: float


NO_DRAFT = Draft([], 0.0, 0, 0.0)
END = -1  # SuffixIndex.flat's mark between sequences: nothing follows it, nothing matches it


class Walk(NamedTuple):
    """The most frequent continuation after a match of match_length tokens, as far as the draft's
    probability held: its tokens and the draft's score after each. A walk cut at a narrower k is
    its first k tokens (it is greedy), so one walk serves every k up to the one it was walked at."""

    tokens: list[int]
    scores: list[float]
    match_length: int
    first_probability: float
    # where it goes on past its limit: the ends after its last token and the draft's probability;
    # None where it stopped on its own (any wider limit walks the same) or is not known
    onward: tuple[list[int], float] | None = None
    stopped: bool = True

    def cut(self, k: int) -> Draft:
        n = min(k, len(self.tokens))
        return Draft(self.tokens[:n], self.scores[n - 1], self.match_length, self.first_probability) if n else NO_DRAFT


NO_WALK = Walk([], [], 0, 0.0)


def best_of(walks: Iterable[Walk], k: int) -> Draft:
    """SuffixIndex.draft's choice among every match length's walk at k (no wider than they were
    walked at): the best score, ties to the longer match. A narrower k can change the winner
    (each walk's score is cut), so a draft at k is not always the first k of a wider draft."""
    best, best_score, best_n = None, 0.0, 0
    for walk in walks:
        n = min(k, len(walk.tokens))
        if n and walk.scores[n - 1] >= best_score:
            best, best_score, best_n = walk, walk.scores[n - 1], n
    return NO_DRAFT if best is None else Draft(best.tokens[:best_n], best_score, best.match_length, best.first_probability)


class SuffixIndex:
    """Token sequences, and where each token value occurs in them.

    flat holds every sequence, each behind an END mark and the last one followed by one, so an
    occurrence is one int (its place in flat), a match read backwards stops at the END before
    its sequence, and a walk forwards at the END after it."""

    def __init__(self) -> None:
        self.sequences: list[list[int]] = []
        self.flat: list[int] = [END]
        self.starts: list[int] = []  # each sequence's first place in flat
        self.occurrences: dict[int, list[int]] = {}  # token -> places in flat, oldest first

    def add(self, tokens: Iterable[int]) -> int:
        self.sequences.append([])
        self.starts.append(len(self.flat))
        self.flat.append(END)
        self.extend(len(self.sequences) - 1, tokens)
        return len(self.sequences) - 1

    def extend(self, sequence: int, tokens: Iterable[int]) -> None:
        """More tokens at the end of the last sequence (the only one that grows)."""
        if sequence != len(self.sequences) - 1:
            raise ValueError(f"only the last sequence grows, not {sequence}")
        stored, flat, occurrences = self.sequences[sequence], self.flat, self.occurrences
        flat.pop()  # the END after the last sequence
        for token in tokens:
            place = len(flat)
            if token in occurrences:
                occurrences[token].append(place)
            else:
                occurrences[token] = [place]
            flat.append(token)
            stored.append(token)
        flat.append(END)

    @property
    def num_tokens(self) -> int:
        return sum(len(sequence) for sequence in self.sequences)

    def draft(self, context: Sequence[int], k: int, max_depth: int = MAX_DEPTH, factor: float = MAX_SPEC_FACTOR,
              offset: float = MAX_SPEC_OFFSET, min_probability: float = MIN_TOKEN_PROB,
              exclude: tuple[int, int] | None = None) -> Draft:
        """The best-scoring draft over every match length (ties: the longer match).
        exclude: an occurrence (sequence, index) that is the context itself (its own last token)."""
        return best_of(self.walks(context, k, max_depth, factor, offset, min_probability, exclude), k)

    def walks(self, context: Sequence[int], k: int, max_depth: int = MAX_DEPTH, factor: float = MAX_SPEC_FACTOR,
              offset: float = MAX_SPEC_OFFSET, min_probability: float = MIN_TOKEN_PROB,
              exclude: tuple[int, int] | None = None) -> list[Walk]:
        """Every match length's walk at k, shortest match first (best_of picks the draft)."""
        if not context or k <= 0:
            return []
        excluded = self.starts[exclude[0]] + exclude[1] if exclude is not None else None
        # the most recent occurrences of the context's last token: the ends of 1-token matches
        ends = [place for place in self.occurrences.get(context[-1], [])[-MAX_OCCURRENCES:] if place != excluded]
        return self.walks_from(ends, context, k, max_depth, factor, offset, min_probability)

    def walks_from(self, ends: list[int] | None, context: Sequence[int], k: int, max_depth: int = MAX_DEPTH,
                   factor: float = MAX_SPEC_FACTOR, offset: float = MAX_SPEC_OFFSET,
                   min_probability: float = MIN_TOKEN_PROB,
                   memo: dict[tuple[int, ...], tuple[list[int], Walk]] | None = None,
                   unsure: set[int] | None = None) -> list[Walk]:
        """walks() from the 1-token matches' ends (places in flat; None: the last MAX_OCCURRENCES
        occurrences of context[-1]). memo: each match's (its tokens') ends and walk at this k, met
        before: the caller keeps it while the index is unchanged. unsure: END places where the
        caller's other indexes may go on; a walk that reaches one raises Unsure."""
        flat = self.flat
        walks = []
        shorter: Walk | None = None  # the last length's walk, from the ends it was walked from
        # as Arctic: a match is shorter than the context it is looked up from
        most = min(max_depth, len(context))
        length = 1
        while length < most:
            key = tuple(context[len(context) - length:]) if memo is not None else ()
            node = memo.get(key) if memo is not None else None
            if node is None:
                kept = ends
                if length > 1:  # the END before each sequence ends every match that reaches it
                    wanted = context[-length]
                    ends = [i for i in ends or () if flat[i - length + 1] == wanted]
                elif ends is None:
                    ends = self.occurrences.get(context[-1], [])[-MAX_OCCURRENCES:]
                limit = min(k, int(length * factor + offset + 1e-6), max_depth - length)
                if not ends:
                    walk = NO_WALK
                elif shorter is not None and kept is not None and len(ends) == len(kept):
                    walk = self._rewalk(shorter, ends, limit, min_probability, length, unsure)  # the same ends walk the same
                else:
                    walk = self._walk(ends, limit, min_probability, length, unsure=unsure)
                node = (ends, walk)
                if memo is not None:
                    memo[key] = node
            ends, shorter = node
            if not ends:
                break
            if shorter.tokens:
                walks.append(shorter)
            length += 1
        return walks

    def _rewalk(self, walk: Walk, ends: list[int], limit: int, min_probability: float, length: int,
                unsure: set[int] | None) -> Walk:
        """The walk from the same ends at another limit, from the one walked already."""
        walked = len(walk.tokens)
        if limit == walked or (limit > walked and walk.stopped):
            return walk._replace(match_length=length)
        if limit < walked:
            return Walk(walk.tokens[:limit], walk.scores[:limit], length, walk.first_probability, None, False)
        if walk.onward is None:
            return self._walk(ends, limit, min_probability, length, unsure=unsure)
        return self._walk(walk.onward[0], limit, min_probability, length, walk, unsure)

    def _walk(self, ends: list[int], limit: int, min_probability: float, length: int, start: Walk | None = None,
              unsure: set[int] | None = None) -> Walk:
        """Follow the most frequent continuation while the draft's probability holds (from where
        `start` reached its limit, when given)."""
        flat = self.flat
        tokens, scores = (list(start.tokens), list(start.scores)) if start else ([], [])
        probability = start.onward[1] if start and start.onward else 1.0
        score = scores[-1] if scores else 0.0
        first = start.first_probability if start else 0.0
        while len(tokens) < limit:
            if len(ends) == 1:  # one occurrence: its continuation, if any, is sure
                token, count = flat[ends[0] + 1], 1
                if token == END:
                    if unsure and ends[0] + 1 in unsure:
                        raise Unsure
                    break
                following = None
            else:
                following = [flat[i + 1] for i in ends]
                if unsure and END in following and any(i + 1 in unsure for i in ends):
                    raise Unsure
                token, count = most_frequent(following)
                if token == END:
                    break
            probability *= count / len(ends)
            if probability < min_probability:
                break
            if not tokens:
                first = count / len(ends)
            tokens.append(token)
            score += probability
            scores.append(score)
            ends = [ends[0] + 1] if following is None else [i + 1 for i, t in zip(ends, following, strict=True) if t == token]
        else:
            return Walk(tokens, scores, length, first, (ends, probability), False)
        return Walk(tokens, scores, length, first)


class Unsure(Exception):
    """A walk reached an END where another index goes on (SuffixIndex.walks_from's unsure)."""


def most_frequent(following: list[int]) -> tuple[int, int]:
    """The most frequent token but END, and its count; a tie goes to the latest (END, 0: none)."""
    counts = Counter(following) if len(following) > 24 else dict.fromkeys(following, 0)
    if len(following) <= 24:
        for token in following:
            counts[token] += 1
    counts.pop(END, None)  # occurrences that end here count against every continuation
    if not counts:
        return END, 0
    count = max(counts.values())
    tied = [token for token, seen in counts.items() if seen == count]
    return (tied[0] if len(tied) == 1 else next(t for t in reversed(following) if t in tied)), count


def suffix_proposal(here: Draft, earlier: Draft) -> Proposal:
    """The better of this conversation's draft and the history's (a tie: the conversation's), with its evidence."""
    best, from_history = (here, False) if here.score >= earlier.score else (earlier, True)
    if not best.tokens:
        return Proposal([], None)
    evidence = SuffixMatch(min(best.match_length, EVIDENCE_LENGTH_CAP), best.first_probability < 1.0, from_history)
    return Proposal(best.tokens, None, evidence=evidence)


class SuffixProposer(Proposer):
    """Suffix decoding beside prompt lookup: model-free, lossless, free enough to draft first.

    history: earlier replies as token ids (the engine's tokenizer), drafted from when
    use_history is on; with it on, each reply this proposer sees is added to them when the
    next prompt starts. With use_history off, only the current conversation is read."""

    method = "suffix"
    looks_first = True

    def __init__(self, history: Iterable[Sequence[int]] = (), use_history: bool = True,
                 max_depth: int = MAX_DEPTH, max_spec_factor: float = MAX_SPEC_FACTOR,
                 max_spec_offset: float = MAX_SPEC_OFFSET, min_token_prob: float = MIN_TOKEN_PROB) -> None:
        self.use_history = use_history
        self.max_depth = max_depth
        self.factor, self.offset, self.min_probability = max_spec_factor, max_spec_offset, min_token_prob
        self.history = SuffixIndex()
        if use_history:
            for reply in history:
                self.history.add(reply)
        self._conversation = SuffixIndex()
        self._prompt_length = 0

    def reset(self) -> None:
        """A new prompt follows: this conversation's reply so far joins the history."""
        self._start([])

    def prefill(self, token_ids: Sequence[int]) -> None:
        self._start(token_ids)

    def _start(self, token_ids: Sequence[int]) -> None:
        if self._conversation.sequences:
            reply = self._conversation.sequences[0][self._prompt_length:]
            if self.use_history and reply:
                self.history.add(reply)
        self._conversation = SuffixIndex()
        if token_ids:
            self._conversation.add(token_ids)
        self._prompt_length = len(token_ids)

    def _follow(self, token_ids: Sequence[int]) -> None:
        """Index what the reply added since the last step; a context that does not continue
        the indexed one is a new prompt."""
        if not self._conversation.sequences:
            self._start(token_ids)
            return
        indexed = self._conversation.sequences[0]
        if len(token_ids) >= len(indexed) and list(token_ids[: len(indexed)]) == indexed:
            self._conversation.extend(0, token_ids[len(indexed):])
        else:
            self._start(token_ids)

    def propose(self, token_ids: Sequence[int], k: int, temperature: float, top_p: float,
                generator: Generator | None) -> Proposal:
        self._follow(token_ids)
        if k <= 0 or not token_ids:
            return Proposal([], None)
        context = list(token_ids[-self.max_depth:])
        here = self._draft(self._conversation, context, k, exclude=(0, len(token_ids) - 1))
        earlier = self._draft(self.history, context, k) if self.use_history else NO_DRAFT
        return suffix_proposal(here, earlier)

    def _draft(self, index: SuffixIndex, context: Sequence[int], k: int,
               exclude: tuple[int, int] | None = None) -> Draft:
        return index.draft(context, k, max_depth=self.max_depth, factor=self.factor, offset=self.offset,
                           min_probability=self.min_probability, exclude=exclude)
