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


class SuffixIndex:
    """Token sequences, and where each token value occurs in them."""

    def __init__(self) -> None:
        self.sequences: list[list[int]] = []
        self.occurrences: dict[int, list[tuple[int, int]]] = {}  # token -> (sequence, index), oldest first

    def add(self, tokens: Iterable[int]) -> int:
        self.sequences.append([])
        self.extend(len(self.sequences) - 1, tokens)
        return len(self.sequences) - 1

    def extend(self, sequence: int, tokens: Iterable[int]) -> None:
        stored = self.sequences[sequence]
        for token in tokens:
            self.occurrences.setdefault(token, []).append((sequence, len(stored)))
            stored.append(token)

    @property
    def num_tokens(self) -> int:
        return sum(len(sequence) for sequence in self.sequences)

    def draft(self, context: Sequence[int], k: int, max_depth: int = MAX_DEPTH, factor: float = MAX_SPEC_FACTOR,
              offset: float = MAX_SPEC_OFFSET, min_probability: float = MIN_TOKEN_PROB,
              exclude: tuple[int, int] | None = None) -> Draft:
        """The best-scoring draft over every match length (ties: the longer match).
        exclude: an occurrence that is the context itself (its own last token)."""
        if not context or k <= 0:
            return NO_DRAFT
        sequences = self.sequences
        # end positions of the context's suffix, matched on `length` tokens so far
        ends = [place for place in self.occurrences.get(context[-1], [])[-MAX_OCCURRENCES:] if place != exclude]
        best = NO_DRAFT
        length = 1
        # as Arctic: a match is shorter than the context it is looked up from
        while ends and length < min(max_depth, len(context)):
            limit = min(k, int(length * factor + offset + 1e-6), max_depth - length)
            draft = self._walk(ends, limit, min_probability, length)
            if draft.tokens and draft.score >= best.score:
                best = draft
            wanted = context[-1 - length]
            ends = [(s, i) for s, i in ends if i - length >= 0 and sequences[s][i - length] == wanted]
            length += 1
        return best

    def _walk(self, ends: list[tuple[int, int]], limit: int, min_probability: float, length: int) -> Draft:
        """Follow the most frequent continuation while the draft's probability holds."""
        sequences = self.sequences
        tokens: list[int] = []
        probability, score, first = 1.0, 0.0, 0.0
        while len(tokens) < limit and ends:
            # each continuation's occurrences, most recent first: a tie goes to the latest continuation
            following: dict[int, list[tuple[int, int]]] = {}
            for s, i in reversed(ends):
                stored = sequences[s]
                if i + 1 < len(stored):
                    token = stored[i + 1]
                    if token in following:
                        following[token].append((s, i + 1))
                    else:
                        following[token] = [(s, i + 1)]
            if not following:
                break
            token = max(following, key=lambda t: len(following[t]))
            count = len(following[token])
            # occurrences that end here (nothing after them yet) count against every continuation
            probability *= count / len(ends)
            if probability < min_probability:
                break
            if not tokens:
                first = count / len(ends)
            tokens.append(token)
            score += probability
            ends = following[token][::-1]  # back in the order the search keeps them
        return Draft(tokens, score, length, first)


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
        best, from_history = (here, False) if here.score >= earlier.score else (earlier, True)
        if not best.tokens:
            return Proposal([], None)
        evidence = SuffixMatch(min(best.match_length, EVIDENCE_LENGTH_CAP), best.first_probability < 1.0, from_history)
        return Proposal(best.tokens, None, evidence=evidence)

    def _draft(self, index: SuffixIndex, context: Sequence[int], k: int,
               exclude: tuple[int, int] | None = None) -> Draft:
        return index.draft(context, k, max_depth=self.max_depth, factor=self.factor, offset=self.offset,
                           min_probability=self.min_probability, exclude=exclude)
