"""propose_ngram: prompt lookup drafts."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spectui.engines.speculative.ngram import Match, lookup_ngram, propose_ngram
from spectui.core.errors import UsageError


def test_copies_what_followed_the_suffix():
    #           0  1  2  3  4  5  6  7
    token_ids = [5, 6, 7, 8, 9, 1, 5, 6]
    assert propose_ngram(token_ids, k=3) == [7, 8, 9]


def test_no_match_gives_nothing():
    assert propose_ngram([1, 2, 3, 4], k=4) == []
    assert propose_ngram([], k=4) == []
    assert propose_ngram([7], k=4) == []


def test_k_limits_the_proposal_and_zero_gives_nothing():
    token_ids = [1, 2, 3, 4, 5, 6, 7, 9, 1, 2]
    assert propose_ngram(token_ids, k=2) == [3, 4]
    assert propose_ngram(token_ids, k=5) == [3, 4, 5, 6, 7]
    assert propose_ngram(token_ids, k=0) == []


def test_fewer_than_k_when_the_match_is_near_the_end():
    assert propose_ngram([3, 4, 3], k=5) == [4, 3]


def test_prefers_the_longest_suffix():
    # Suffix [2, 3]: a 1-gram match on 3 at index 1 (followed by 9) and a 2-gram match
    # [2, 3] at indices 4-5 (followed by 8). The longer match wins though it is older.
    token_ids = [0, 3, 9, 1, 2, 3, 8, 7, 3, 9, 2, 3]
    assert propose_ngram(token_ids, k=2) == [8, 7]


def test_lookup_max_caps_the_match_length():
    # With lookup_max=1 only the last token is matched: the most recent 3 wins.
    token_ids = [0, 3, 9, 1, 2, 3, 8, 7, 3, 4, 2, 3]
    assert propose_ngram(token_ids, k=1, lookup_max=1) == [4]
    assert propose_ngram(token_ids, k=1, lookup_max=2) == [8]


def test_by_default_a_quote_is_matched_past_four_tokens_to_the_passage_it_copies():
    quoted = [10, 11, 12, 13, 14, 15, 16, 17]
    # the passage, then a later 4-gram that equals the passage's last four tokens
    context = quoted + [50, 51] + [99, 14, 15, 16, 17, 60, 61]
    reply = quoted
    assert lookup_ngram(context + reply, k=2) == ([50, 51], Match(8))
    # matched on four tokens only, the more recent 4-gram wins and the copy goes astray
    # (a full-length match ends the scan: what came before it is not read)
    assert lookup_ngram(context + reply, k=2, lookup_max=4) == ([60, 61], Match(4))


def test_lookup_min_rejects_short_matches():
    token_ids = [1, 2, 3, 9, 3]
    assert propose_ngram(token_ids, k=2, lookup_min=1) == [9, 3]
    assert propose_ngram(token_ids, k=2, lookup_min=2) == []


def test_prefers_the_most_recent_of_equal_matches():
    token_ids = [1, 2, 10, 11, 1, 2, 20, 21, 1, 2]
    assert propose_ngram(token_ids, k=2) == [20, 21]


def test_bad_lookup_range_is_a_usage_error():
    with pytest.raises(UsageError):
        propose_ngram([1, 2, 1], k=2, lookup_min=0)
    with pytest.raises(UsageError):
        propose_ngram([1, 2, 1], k=2, lookup_min=3, lookup_max=2)


def test_long_history_is_cheap_enough():
    # A few thousand tokens with no repeat of the suffix: a full scan, still a single pass.
    token_ids = list(range(5000)) + [123456]
    assert propose_ngram(token_ids, k=4) == []
    token_ids = list(range(5000)) + [10, 11, 12, 13]
    assert propose_ngram(token_ids, k=4) == [14, 15, 16, 17]


def brute_force(token_ids, k, lookup_min, lookup_max):
    """The definition, spelled out: longest n first, then the latest earlier occurrence; the
    match is contested when its earlier occurrences went on with different tokens (a
    full-length match is taken without looking further back)."""
    length = len(token_ids)
    for n in range(lookup_max, lookup_min - 1, -1):
        if n >= length:
            continue
        suffix = list(token_ids[length - n :])
        starts = [start for start in range(length - n - 1, -1, -1) if list(token_ids[start : start + n]) == suffix]
        if starts:
            followers = {token_ids[start + n] for start in starts}
            contested = n < lookup_max and len(followers) > 1
            return list(token_ids[starts[0] + n : starts[0] + n + k]), Match(n, contested)
    return [], Match(0)


@given(
    st.lists(st.integers(0, 3), max_size=40),
    st.integers(0, 6),
    st.integers(1, 3),
    st.integers(0, 3),
)
def test_matches_the_brute_force_definition(token_ids, k, lookup_min, extra):
    lookup_max = lookup_min + extra
    drafted, match = lookup_ngram(token_ids, k, lookup_min, lookup_max)
    if k == 0:
        assert (drafted, match) == ([], Match(0))
    else:
        assert (drafted, match) == brute_force(token_ids, k, lookup_min, lookup_max)
    assert propose_ngram(token_ids, k, lookup_min, lookup_max) == drafted
    assert len(drafted) <= k


def test_the_lookup_says_how_long_a_match_it_copies_from():
    assert lookup_ngram([1, 2, 3, 9, 8, 1, 2, 3], k=2) == ([9, 8], Match(3))
    assert lookup_ngram([5, 1, 9, 8, 7, 1], k=3) == ([9, 8, 7], Match(1))
    assert lookup_ngram([1, 2, 3, 4], k=2) == ([], Match(0))
    assert lookup_ngram([1, 2, 3, 1, 2, 3], k=2, lookup_min=4) == ([], Match(0))


def test_the_lookup_says_when_earlier_copies_of_the_match_went_on_differently():
    # `"` began a different key each time: the latest copy is a guess
    assert lookup_ngram([7, 1, 20, 7, 1, 30, 7, 1], k=1) == ([30], Match(2, contested=True))
    # the same continuation every time: a field name being written again
    assert lookup_ngram([7, 1, 20, 7, 1, 20, 5, 7, 1], k=1) == ([20], Match(2, contested=False))
    # only longest matches count: a shorter one that went on differently says nothing
    assert lookup_ngram([9, 1, 40, 7, 1, 20, 5, 7, 1], k=1) == ([20], Match(2, contested=False))
    assert str(Match(2, contested=True)) == "2, contested"
    assert str(Match(3)) == "3"


def test_the_proposer_hands_its_match_to_adaptive_k_as_evidence():
    from spectui.engines.speculative.proposers import NgramProposer

    proposal = NgramProposer().propose([7, 1, 20, 7, 1, 30, 7, 1], 2, 0.0, 1.0, None)
    assert proposal.drafted == [30, 7] and proposal.evidence == Match(2, contested=True)
    assert NgramProposer().propose([1, 2, 3], 2, 0.0, 1.0, None).evidence is None  # nothing to copy
