"""common_prefix_len (issue 60): slice compares instead of a Python loop, the loop's answers exactly."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from spectui.engines.speculative.cached_model import common_prefix_len


def loop(a, b) -> int:
    """The definition: the loop it replaces."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


tokens = st.lists(st.integers(0, 3), max_size=400)  # a small alphabet: long shared runs, late differences


@settings(max_examples=400, deadline=None)
@given(shared=tokens, a_tail=tokens, b_tail=tokens, a_tuple=st.booleans(), b_tuple=st.booleans())
def test_the_common_prefix_is_the_loops(shared, a_tail, b_tail, a_tuple, b_tuple):
    a, b = shared + a_tail, shared + b_tail
    expected = loop(a, b)
    assert common_prefix_len(tuple(a) if a_tuple else a, tuple(b) if b_tuple else b) == expected
    assert common_prefix_len(b, a) == expected


def test_a_difference_anywhere_in_a_long_context_is_found():
    context = list(range(5000))
    for where in (0, 1, 31, 32, 33, 2500, 4998, 4999):
        changed = context[:where] + [-1] + context[where + 1:]
        assert common_prefix_len(context, changed) == where == loop(context, changed)
    assert common_prefix_len(context, context + [7]) == 5000 and common_prefix_len([], context) == 0
