"""The replay charges a T = 0 verify as the loop runs it on ggml: in pieces of at most 3 rows,
up to the piece that holds the first rejected draft (spectui.advise.costs), and
benchmarks/copy_replay.py replays a chat through the library."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from copy_replay import pieces_profile, replay_turn  # noqa: E402

from spectui.engines.speculative.suffix import SuffixProposer  # noqa: E402

PIECES = [1.0, 1.5, 2.0]


def test_a_verify_pays_the_pieces_up_to_its_first_rejected_draft():
    costs = pieces_profile(PIECES)
    assert costs.verify_steps(2, 0) == (2.0, None)  # 3 rows: one decode, whatever was kept
    assert costs.verify_steps(1, 1) == (1.5, None)
    assert costs.verify_steps(8, 1) == (2.0, 2)  # draft 2 refused: rows 0-2 decided it
    assert costs.verify_steps(8, 3) == (4.0, 5)  # draft 4 refused: the second piece decided it
    assert costs.verify_steps(8, 8) == (6.0, None)  # every piece, the bonus row last
    assert costs.verify_steps(4, 4) == (3.5, None)  # 5 rows: a piece of 3, then of 2
    assert costs.verify_steps(0, 0) == (1.0, None)  # a plain step


def test_a_reply_that_copies_its_prompt_is_replayed_step_by_step():
    copied = list(range(100, 130))
    turn = {"prompt": [1, 2, *copied, 3], "reply": [7, *copied]}
    plain = replay_turn(turn, SuffixProposer(use_history=False), 0, None, pieces_profile(PIECES))
    assert plain == {"speed": 1.0, "coloured": 0.0, "steps": 30}
    k2 = replay_turn(turn, SuffixProposer(use_history=False), 2, None, pieces_profile(PIECES))
    # the first step after 7 has nothing to match; then each step keeps 2 drafts and adds the bonus
    assert k2["coloured"] > 0.5 and k2["steps"] < 15
    assert k2["speed"] > 1.2
