"""Suffix decoding's index searched as one flat list of ints drafts what the search over
(sequence, index) pairs drafted, and its walks, cut at any k, or kept in a memo, give the draft at that k."""

from __future__ import annotations

import random

import pytest

from spectui.engines.speculative.suffix import MAX_DEPTH, MAX_OCCURRENCES, Draft, SuffixIndex, best_of


class PairIndex:
    """The search as it was before the flat list: every occurrence a (sequence, index) pair."""

    def __init__(self, sequences):
        self.sequences = [list(s) for s in sequences]
        self.occurrences = {}
        for s, sequence in enumerate(self.sequences):
            for i, token in enumerate(sequence):
                self.occurrences.setdefault(token, []).append((s, i))

    def draft(self, context, k, max_depth=MAX_DEPTH, min_probability=0.1, exclude=None):
        if not context or k <= 0:
            return Draft([], 0.0, 0, 0.0)
        ends = [place for place in self.occurrences.get(context[-1], [])[-MAX_OCCURRENCES:] if place != exclude]
        best, length = Draft([], 0.0, 0, 0.0), 1
        while ends and length < min(max_depth, len(context)):
            draft = self.walk(ends, min(k, length, max_depth - length), min_probability, length)
            if draft.tokens and draft.score >= best.score:
                best = draft
            wanted = context[-1 - length]
            ends = [(s, i) for s, i in ends if i - length >= 0 and self.sequences[s][i - length] == wanted]
            length += 1
        return best

    def walk(self, ends, limit, min_probability, length):
        tokens, probability, score, first = [], 1.0, 0.0, 0.0
        while len(tokens) < limit and ends:
            following = {}
            for s, i in reversed(ends):
                if i + 1 < len(self.sequences[s]):
                    following.setdefault(self.sequences[s][i + 1], []).append((s, i + 1))
            if not following:
                break
            token = max(following, key=lambda t: len(following[t]))
            count = len(following[token])
            probability *= count / len(ends)
            if probability < min_probability:
                break
            if not tokens:
                first = count / len(ends)
            tokens.append(token)
            score += probability
            ends = following[token][::-1]
        return Draft(tokens, score, length, first)


def random_sequences(rng, count, vocabulary):
    """Repetitive token sequences over a small vocabulary: many matches, ties and contested continuations."""
    motifs = [[rng.randrange(vocabulary) for _ in range(rng.randint(2, 9))] for _ in range(6)]
    out = []
    for _ in range(count):
        sequence = []
        while len(sequence) < rng.randint(5, 120):
            sequence += rng.choice(motifs) if rng.random() < 0.7 else [rng.randrange(vocabulary)]
        out.append(sequence)
    return out


@pytest.mark.parametrize("seed", range(6))
def test_the_flat_index_drafts_what_the_pair_index_drafted(seed):
    rng = random.Random(seed)
    sequences = random_sequences(rng, 8, 6 + seed)
    flat, pairs = SuffixIndex(), PairIndex(sequences)
    for sequence in sequences:
        flat.add(sequence)
    for _ in range(300):
        s = rng.randrange(len(sequences))
        end = rng.randrange(1, len(sequences[s]) + 1)
        context = sequences[s][max(0, end - rng.randint(1, 30)):end]
        exclude = (s, end - 1) if rng.random() < 0.5 else None
        k, depth, floor = rng.randint(1, 10), rng.choice([MAX_DEPTH, 6]), rng.choice([0.1, 0.3, 0.0])
        assert flat.draft(context, k, depth, min_probability=floor, exclude=exclude) == \
            pairs.draft(context, k, depth, floor, exclude)


def test_a_frequent_token_looks_at_its_latest_occurrences_only():
    sequences = [[1, 2] * 700 + [1, 3] * 400]  # the latest 1024 ends of [1] go on to 3 (400) and 2 (624)
    flat = SuffixIndex()
    flat.add(sequences[0])
    assert flat.draft([9, 1], 1) == PairIndex(sequences).draft([9, 1], 1)
    assert flat.draft([9, 1], 1).first_probability == pytest.approx(624 / 1024)


@pytest.mark.parametrize("seed", range(4))
def test_walks_cut_at_a_narrower_k_or_kept_in_a_memo_draft_what_that_k_drafts(seed):
    rng = random.Random(100 + seed)
    index = SuffixIndex()
    for sequence in random_sequences(rng, 10, 5):
        index.add(sequence)
    memo: dict = {}
    narrower_differs = 0
    for _ in range(300):
        context = random_sequences(rng, 1, 5)[0][:rng.randint(1, 40)]
        wide = index.walks(context, 8)
        assert index.walks_from(None, context, 8, memo=memo) == wide
        for k in range(1, 9):
            draft = index.draft(context, k)
            assert best_of(wide, k) == draft
            narrower_differs += draft.tokens != index.draft(context, 8).tokens[:k]
    assert memo  # the memo was used, and a narrower draft is not always the first k of a wider one
    assert narrower_differs > 0
