"""Prompt lookup replayed over the target's own replies, without the machine's noise.

    python benchmarks/lookup_replay.py replies [--suite quick|full] [--categories a,b]   # 2 min for the full suite here
    python benchmarks/lookup_replay.py replay [--lookup-max 4,8] [--slope 0.05,0.065,0.08,0.1] [-v]

`replies` has the default target write its greedy reply (96 tokens, T = 0) to workload
prompts and keeps the prompt's and the reply's token ids (benchmarks/bench/lookup-replies.json;
committed: every T = 0 prompt of the full suite).
At T = 0 a copied draft is accepted exactly while it equals the reply, so every step of
prompt lookup can be replayed from the ids alone.

`replay` runs `lookup_ngram` and the real `spectui.engines.adaptive.AdaptiveK.choose_for` (how many
of the drafts in hand to verify, from how drafts with the same kind of match fared) as the
embedded loop drives them, and fixed k 1, 2, 4, 6 and 8 beside it, charging a verify of n drafts
1 + slope·n plain steps (the bench measured slopes of 0.05-0.1 per draft on these CPUs) and a
draft nothing. Each prompt runs twice on one controller and the second run counts, as in a
bench. It prints tokens per plain step of time (the speedup over k = 0) per category (geometric
means), and per prompt with -v; "ceiling" verifies exactly the drafts that will be accepted.
Then auto against the category's best fixed k, as `spectui bench` holds it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
REPLIES = HERE / "bench" / "lookup-replies.json"
REPLY_TOKENS = 96
ROUNDS = 2
FIXED_K = (1, 2, 4, 6, 8)


def build_replies(path: Path, suite_name: str, categories: list[str] | None) -> None:
    from spectui.bench.workloads import suite
    from spectui.engines.torch_backend.build import build_embedded_engine
    from spectui.core.events import Control, GenerationParams, Step
    from spectui.settings.options import EngineOptions

    from spectui.models.registry import resolve_pair

    engine = build_embedded_engine(EngineOptions(method="ngram"), resolve_pair(None, None))
    kept = json.loads(path.read_text()) if path.exists() else []
    for workload in suite(suite_name):
        if workload.temperature != 0 or (categories and workload.category not in categories):
            continue
        prompt = engine.prompt_ids(workload.as_messages())
        # lossless at T = 0: the reply is the target's own greedy one, written faster
        params = GenerationParams(max_tokens=REPLY_TOKENS, seed=workload.seed)
        events = engine.stream_ids(prompt, params, Control(k=6, temperature=0.0))
        reply = [token for event in events if isinstance(event, Step) for token in event.token_ids]
        kept = [r for r in kept if r["name"] != workload.name]
        kept.append({"name": workload.name, "category": workload.category, "prompt": prompt, "reply": reply})
        print(f"{workload.name}: {len(reply)} tokens", file=sys.stderr, flush=True)
        path.write_text(json.dumps(kept))


def accepted(drafted: list[int], truth: list[int]) -> int:
    n = 0
    while n < len(drafted) and drafted[n] == truth[n]:
        n += 1
    return n


def replay_prompt(case: dict, lookup_max: int, slope: float, how, chooser=None) -> float:
    """Tokens per plain step of time over the reply after its first token; how: a fixed k,
    "auto" (chooser decides per step) or "ceiling"."""
    from spectui.engines.adaptive import K_AUTO_MAX
    from spectui.engines.speculative.ngram import NO_MATCH, lookup_ngram
    from spectui.core.events import Source, Step

    prompt, reply = case["prompt"], case["reply"]
    if chooser is not None:
        chooser.observe(Step((0,), (Source.TARGET,), "", temperature=0.0), prefill=True)
    position, tokens, seconds = 1, 0, 0.0
    while position < len(reply):
        room = len(reply) - position - 1
        most = min(K_AUTO_MAX if how in ("auto", "ceiling") else how, room)
        drafted, match = lookup_ngram(prompt + reply[:position], most, 1, lookup_max) if most > 0 else ([], NO_MATCH)
        auto = None
        if drafted and how == "auto":
            auto = chooser.choose_for(match, 0.0)
            drafted = drafted[: auto.k]
        num_accepted = accepted(drafted, reply[position:])
        if how == "ceiling":
            drafted = drafted[:num_accepted]
        verify = 1 + slope * len(drafted)
        emitted = num_accepted + 1
        if chooser is not None:
            chooser.observe_overhead(0.0)
            chooser.observe(Step((0,) * emitted, (Source.DRAFT,) * num_accepted + (Source.TARGET,), "",
                                 drafted=tuple(drafted), k=len(drafted), temperature=0.0, accepted_count=num_accepted,
                                 draft_seconds=0.0, verify_seconds=verify, auto=auto),
                            evidence=match if auto is not None else None)
        position += emitted
        tokens += emitted
        seconds += verify
    return tokens / seconds


def replay(cases: list[dict], lookup_max: int, slope: float) -> dict[str, dict[str, float]]:
    """prompt -> arm -> speedup over k = 0."""
    from spectui.engines.adaptive import AdaptiveK

    chooser = AdaptiveK()
    out: dict[str, dict[str, float]] = {case["name"]: {} for case in cases}
    for _ in range(ROUNDS):
        for case in cases:  # suite order, one controller: what each prompt learns carries on
            out[case["name"]]["auto"] = replay_prompt(case, lookup_max, slope, "auto", chooser)
    for case in cases:
        for how in (*FIXED_K, "ceiling"):
            out[case["name"]][f"k {how}" if how != "ceiling" else how] = replay_prompt(case, lookup_max, slope, how)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("what", choices=["replies", "replay"])
    parser.add_argument("--suite", default="quick", choices=["quick", "full"])
    parser.add_argument("--categories", default=None)
    parser.add_argument("--lookup-max", default="4,8")
    parser.add_argument("--slope", default="0.05,0.065,0.08,0.1")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()
    categories = args.categories.split(",") if args.categories else None
    if args.what == "replies":
        build_replies(REPLIES, args.suite, categories)
        return
    if not REPLIES.exists():
        sys.exit(f"no {REPLIES.relative_to(HERE.parent)}: run `python benchmarks/lookup_replay.py replies` first")
    cases = [c for c in json.loads(REPLIES.read_text()) if not categories or c["category"] in categories]
    for slope in map(float, args.slope.split(",")):
        for lookup_max in map(int, args.lookup_max.split(",")):
            rates = replay(cases, lookup_max, slope)
            by_category: dict[str, list[dict[str, float]]] = {}
            for case in cases:
                by_category.setdefault(case["category"], []).append(rates[case["name"]])
                if args.verbose:
                    print(f"  {case['name']:20}" + "  ".join(f"{arm} {r:.2f}" for arm, r in rates[case["name"]].items()))
            print(f"slope {slope}, lookup_max {lookup_max}: " + "; ".join(
                f"{category} " + " ".join(f"{arm} {statistics.geometric_mean(r[arm] for r in rows):.2f}" for arm in rows[0])
                for category, rows in by_category.items()))
            # as the bench holds it: auto against the one fixed k (k = 0 included) with the
            # category's best geometric mean
            to_best = {}
            for category, rows in by_category.items():
                means = {arm: statistics.geometric_mean(r[arm] for r in rows) for arm in rows[0] if arm != "ceiling"}
                best = max([1.0, *(mean for arm, mean in means.items() if arm != "auto")])
                to_best[category] = means["auto"] / best
            print("  auto / the best fixed k: " + ", ".join(f"{c} {r:.2f}" for c, r in to_best.items())
                  + f"; worst {min(to_best.values()):.2f}")


if __name__ == "__main__":
    main()
