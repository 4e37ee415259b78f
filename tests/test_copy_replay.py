"""benchmarks/copy_replay.py charges a T = 0 verify as the loop runs it on ggml: in pieces of at
most 3 rows, up to the piece that holds the first rejected draft."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from copy_replay import replay_turn, verify_cost  # noqa: E402

from spectui.engines.speculative.suffix import SuffixProposer  # noqa: E402

PIECES = [1.0, 1.5, 2.0]


def test_a_verify_pays_the_pieces_up_to_its_first_rejected_draft():
    assert verify_cost(2, 0, PIECES) == (2.0, 2)  # 3 rows: one piece, whatever was kept
    assert verify_cost(1, 1, PIECES) == (1.5, 1)
    assert verify_cost(8, 1, PIECES) == (2.0, 2)  # draft 2 refused: rows 0-2 decided it
    assert verify_cost(8, 3, PIECES) == (4.0, 5)  # draft 4 refused: the second piece decided it
    assert verify_cost(8, 8, PIECES) == (6.0, 8)  # every piece, the bonus row last
    assert verify_cost(4, 4, PIECES) == (3.5, 4)  # 5 rows: a piece of 3, then of 2


def test_a_reply_that_copies_its_prompt_is_replayed_step_by_step():
    copied = list(range(100, 130))
    turn = {"prompt": [1, 2, *copied, 3], "reply": [7, *copied]}
    plain = replay_turn(turn, SuffixProposer(use_history=False), 0, None, PIECES)
    assert plain == {"speed": 1.0, "coloured": 0.0, "steps": 30}
    k2 = replay_turn(turn, SuffixProposer(use_history=False), 2, None, PIECES)
    # the first step after 7 has nothing to match; then each step keeps 2 drafts and adds the bonus
    assert k2["coloured"] > 0.5 and k2["steps"] < 15
    assert k2["speed"] > 1.2
