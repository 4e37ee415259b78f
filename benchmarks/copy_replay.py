"""Suffix decoding and adaptive k replayed over a real chat about an attached file, on ggml's
costs, without the machine's noise.

    python benchmarks/followup_ttft.py --k 0 --save-ids benchmarks/bench/chat-ids.json   # ~3 min: the chat's token ids
    python benchmarks/copy_replay.py [--ids benchmarks/bench/chat-ids.json] [--pieces 1,1.55,2.3] [--history]

At T = 0 a copied draft is accepted exactly while it equals the reply, so every step of suffix
decoding can be replayed from the chat's prompt and reply ids: spectui.advise.replay does it
(the library behind `spectui advise`); this script feeds it one saved chat. The turns run in order on one
`SuffixProposer` and one `spectui.engines.adaptive.AdaptiveK` (verify_piece 3, as the engine
builds them for Q4_K_M), driven as the loop drives them (`draft_then_choose`): drafts, then
choose_for on their evidence. A verify runs in pieces of at most 3 rows and stops at the piece
of the first rejected draft (`loop.verify_greedy_in_pieces`); a piece of r rows costs
--pieces[r-1] plain steps (the defaults: on the 2-core box at ~1,300 cached tokens a plain step
took 61-67 ms, a decode of 2 rows 94-99 ms and of 3 rows 124-150 ms, timed alone and inside the
loop), and the chooser is shown those seconds. It prints each turn's
speed over k = 0 for fixed k 1..8, auto, and "ceiling" (verifying exactly the drafts that will
be kept), with the share of the reply coloured.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from spectui.advise.advice import new_chooser  # noqa: E402
from spectui.advise.costs import CostProfile  # noqa: E402
from spectui.advise.replay import AUTO, CEILING, ReplayInput, replay_reply  # noqa: E402
from spectui.engines.adaptive import AdaptiveK  # noqa: E402
from spectui.engines.speculative.proposers import Proposer  # noqa: E402
from spectui.engines.speculative.suffix import SuffixProposer  # noqa: E402

IDS = HERE / "bench" / "chat-ids.json"
FIXED_K = (1, 2, 3, 4, 8)
PIECE = 3


def pieces_profile(pieces: list[float]) -> CostProfile:
    """The pieces as a cost profile in plain steps (a plain step costs 1 s): speed is then over k = 0."""
    return CostProfile("chat-ids", "ggml", 1.0, {rows: cost for rows, cost in enumerate(pieces, start=1)}, piece=PIECE)


def replay_turn(turn: dict, proposer: Proposer, how: int | str, chooser: AdaptiveK | None, costs: CostProfile) -> dict:
    """how: a fixed k, "auto" or "ceiling" (spectui.advise.replay). Returns speed over k = 0 and the coloured share."""
    steps = replay_reply(ReplayInput(tuple(turn["prompt"]), tuple(turn["reply"]), "length"), proposer, how, costs, chooser)
    decoding = steps[1:]
    seconds = sum(step.seconds for step in decoding)
    decoded = sum(step.emitted for step in decoding)
    return {"speed": decoded / seconds if seconds else 1.0, "coloured": sum(step.coloured for step in decoding) / len(turn["reply"]),
            "steps": len(decoding)}


def replay(turns: list[dict], pieces: list[float], history: bool) -> dict[str, list[dict]]:
    """arm -> per turn: the chat's turns in order on one proposer (and one chooser for auto)."""
    costs = pieces_profile(pieces)
    out: dict[str, list[dict]] = {}
    for how in (*FIXED_K, AUTO, CEILING):
        proposer = SuffixProposer(use_history=history)
        chooser = new_chooser(costs) if how == AUTO else None
        out[how if isinstance(how, str) else f"k {how}"] = [replay_turn(turn, proposer, how, chooser, costs) for turn in turns]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ids", type=Path, default=IDS)
    parser.add_argument("--pieces", default="1,1.55,2.3", help="plain steps a verify piece of 1, 2, 3 rows costs")
    parser.add_argument("--history", action="store_true", help="draft from earlier replies too (the chat's default)")
    args = parser.parse_args()
    if not args.ids.exists():
        sys.exit(f"no {args.ids}: run `python benchmarks/followup_ttft.py --k 0 --save-ids {args.ids}` first")
    pieces = [float(x) for x in args.pieces.split(",")]
    if len(pieces) != PIECE:
        sys.exit(f"--pieces: {PIECE} costs, for pieces of 1 to {PIECE} rows")
    turns = json.loads(args.ids.read_text())["turns"]
    results = replay(turns, pieces, args.history)
    print(f"pieces {pieces}, history {'on' if args.history else 'off'}; speed over k = 0 (coloured share):")
    print(f"{'arm':10}" + "".join(f"{turn['name'] + ' ' + turn['question'][:24]:40}" for turn in turns))
    for arm, rows in results.items():
        print(f"{arm:10}" + "".join(f"{row['speed']:.3f}× ({row['coloured']:.0%}, {row['steps']} steps)".ljust(40) for row in rows))


if __name__ == "__main__":
    main()
