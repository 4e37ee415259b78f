"""Suffix decoding and adaptive k replayed over a real chat about an attached file, on ggml's
costs, without the machine's noise.

    python benchmarks/followup_ttft.py --k 0 --save-ids benchmarks/bench/chat-ids.json   # ~3 min: the chat's token ids
    python benchmarks/copy_replay.py [--ids benchmarks/bench/chat-ids.json] [--pieces 1,1.55,2.3] [--history]

At T = 0 a copied draft is accepted exactly while it equals the reply, so every step of suffix
decoding can be replayed from the chat's prompt and reply ids. The turns run in order on one
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
IDS = HERE / "bench" / "chat-ids.json"
FIXED_K = (1, 2, 3, 4, 8)
PIECE = 3


def verify_cost(num_drafted: int, num_accepted: int, pieces: list[float]) -> tuple[float, int]:
    """(plain steps, drafts verified) of a T = 0 verify in pieces that stops at its first rejection."""
    rows = num_drafted + 1
    if rows <= PIECE:
        return pieces[rows - 1], num_drafted
    cost, done = 0.0, 0
    while done < rows:
        width = min(PIECE, rows - done)
        cost += pieces[width - 1]
        done += width
        if num_accepted < done:  # the piece held the first rejected draft (or the bonus row)
            break
    return cost, done - 1


def replay_turn(turn: dict, proposer, how, chooser, pieces: list[float]) -> dict:
    """how: a fixed k, "auto" or "ceiling". Returns speed over k = 0 and the coloured share."""
    from spectui.core.events import Source, Step
    from spectui.engines.adaptive import K_AUTO_MAX
    from spectui.engines.speculative.cached_model import common_prefix_len

    prompt, reply = turn["prompt"], turn["reply"]
    proposer.prefill(prompt)
    if chooser is not None:
        chooser.observe(Step((0,), (Source.TARGET,), "", temperature=0.0), prefill=True)
    position, seconds, kept, steps = 1, 0.0, 0, 0
    while position < len(reply):
        room = len(reply) - position - 1
        most = min(K_AUTO_MAX if how in ("auto", "ceiling") else how, room)
        proposal = proposer.propose(prompt + reply[:position], most, 0.0, 1.0, None) if most > 0 else None
        drafted = list(proposal.drafted) if proposal is not None else []
        auto = None
        if drafted and how == "auto":
            auto = chooser.choose_for(proposal.evidence, 0.0)
            drafted = drafted[: auto.k]
        num_accepted = common_prefix_len(drafted, reply[position:])  # T = 0: kept while it equals the reply
        if how == "ceiling":
            drafted = drafted[:num_accepted]
        cost, verified = verify_cost(len(drafted), num_accepted, pieces) if drafted else (1.0, 0)
        emitted = num_accepted + 1
        if chooser is not None:
            chooser.observe_overhead(0.0)
            chooser.observe(Step((0,) * emitted, (Source.DRAFT,) * num_accepted + (Source.TARGET,), "",
                                 drafted=tuple(drafted), k=len(drafted), temperature=0.0, accepted_count=num_accepted,
                                 draft_seconds=0.0, verify_seconds=cost, auto=auto,
                                 verified_count=verified if verified < len(drafted) else None),
                            evidence=proposal.evidence if auto is not None else None)
        position += emitted
        seconds += cost
        kept += num_accepted
        steps += 1
    decoded = len(reply) - 1
    return {"speed": decoded / seconds, "coloured": kept / len(reply), "steps": steps}


def replay(turns: list[dict], pieces: list[float], history: bool) -> dict[str, list[dict]]:
    """arm -> per turn: the chat's turns in order on one proposer (and one chooser for auto)."""
    from spectui.engines.adaptive import AdaptiveK
    from spectui.engines.speculative.suffix import SuffixProposer

    out: dict[str, list[dict]] = {}
    for how in (*FIXED_K, "auto", "ceiling"):
        proposer = SuffixProposer(use_history=history)
        chooser = AdaptiveK(verify_piece=PIECE, prior_verify_slope=pieces[1] - 1) if how == "auto" else None
        out["auto" if how == "auto" else "ceiling" if how == "ceiling" else f"k {how}"] = [
            replay_turn(turn, proposer, how, chooser, pieces) for turn in turns]
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
