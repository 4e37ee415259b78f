"""Replayed vs timed: `spectui advise`'s predicted speed against a real timed run of the same arms.

    python benchmarks/advise_vs_timed.py [--model M] [--categories A,B] [--methods suffix,ngram]
        [--k 0,4,auto] [--rounds 3] [--max-tokens N] [--markdown PATH] [--tiny]

Runs the conversations suite's categories for real (spectui's loop on ggml, T = 0, each arm in
alternating rounds as `spectui bench` runs them), measures this machine's cost profile in the same
run (spectui.advise.measure, at the median conversation's length), then replays the very replies
the run wrote with advise's code at those costs. Per category: each arm's timed speed over k 0
(decode speed, each reply at the median of its rounds: spectui.bench.history.timed_rate), the
replayed one, their difference (issue 57's target: within ±5 %), and whether the arm advise
recommends among the timed ones is at least 0.97× the best arm actually timed.

Timings on a shared machine measure the neighbours: run the full form on a quiet box. The report's
header says the command for the full run. --tiny: SmolLM2, one category, prompt lookup, 8 tokens, one
round (the form the suite runs).
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from spectui.advise.advice import AUTO, SAME_SPEED, Advice, advise, replay_arm  # noqa: E402
from spectui.advise.chats import ChatReply, Selection  # noqa: E402
from spectui.advise.costs import CostProfile  # noqa: E402
from spectui.bench.history import history_drafters, timed_rate  # noqa: E402
from spectui.bench.measure import BASELINE, CaseResult  # noqa: E402
from spectui.bench.runs import Arm  # noqa: E402

CATEGORIES = ("chat-code-python", "chat-json-schema", "chat-attached-file")
TARGET_DIFFERENCE = 0.05  # issue 57: the replayed ratio within ±5 % of the timed one
TARGET_RECOMMENDED = 0.97  # the recommended arm at least this share of the best timed arm
FULL = "python benchmarks/advise_vs_timed.py --rounds 3 --markdown benchmarks/reports/advise-vs-timed.md"


@dataclass
class CategoryRow:
    arm: Arm
    timed: float | None
    replayed: float | None
    same_tokens: bool

    @property
    def difference(self) -> float | None:
        return None if self.timed is None or self.replayed is None else self.replayed / self.timed - 1


def arm_name(arm: Arm) -> str:
    return "k 0" if not arm.speculative else f"{arm.method} k {'auto' if arm.auto else arm.k}"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="The target (a cached GGUF; default: the configured model, as advise's).")
    parser.add_argument("--categories", default=",".join(CATEGORIES))
    parser.add_argument("--methods", default="suffix,ngram", help="Copy drafters: suffix, ngram.")
    parser.add_argument("--k", default="0,4,auto")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=None, help="Each reply's budget (default: the workload's).")
    parser.add_argument("--markdown", type=Path, default=HERE / "reports" / "advise-vs-timed.md")
    parser.add_argument("--tiny", action="store_true", help="SmolLM2, one category, prompt lookup, 8 tokens, one round.")
    args = parser.parse_args(argv)
    if args.tiny:
        args.model, args.categories, args.methods, args.max_tokens, args.rounds = "smollm2-135m", CATEGORIES[0], "ngram", 8, 1
    return args


def run(args: argparse.Namespace) -> tuple[list[CaseResult], list[Arm], dict[int, ChatReply], CostProfile, str]:
    """The timed run; the replies it wrote (the baseline's first round) as replay inputs; the costs."""
    from spectui.advise.measure import cached_gguf, measure_profile, median_context_ids
    from spectui.bench.conversations import fill_case_replies
    from spectui.bench.plan import BenchOptions, plan_arms, plan_cases, run_bench
    from spectui.bench.workloads import suite
    from spectui.cli.bench import build_runners
    from spectui.models.registry import ModelPair, resolve_pair
    from spectui.settings.checks import check_k_list
    from spectui.settings.options import AUTO_START_K, EngineOptions

    from spectui.settings.config import load_config

    pair = resolve_pair(args.model or load_config().model, None)  # None: the default target
    options = EngineOptions(model=pair.target.name, method="ngram", k=AUTO_START_K)
    target = cached_gguf(pair.target)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    ks, auto = check_k_list(args.k)
    categories = [c.strip() for c in args.categories.split(",")]
    workloads = [w for w in suite("conversations") if w.category in categories]
    if args.max_tokens:
        workloads = [replace(w, max_tokens=args.max_tokens) for w in workloads]
    bench = BenchOptions("conversations", ["spectui"], methods, ks, auto, AUTO_START_K, args.rounds)
    runners, engines, _ = build_runners(options, ModelPair(target.resolved), bench, lambda stage, done, total: None)
    engine = engines[0]
    try:
        cases = fill_case_replies(plan_cases(workloads, [0.0]), engine)
        arms = plan_arms(["spectui"], methods, sorted({0, *ks}), AUTO_START_K, auto)
        started = time.monotonic()
        result = run_bench(cases, arms, runners, args.rounds, {},
                           on_reply=lambda case, reply: print(f"{case.workload.name} {reply.arm.label}: "
                                                              f"{reply.decode_tokens_per_s or 0:.1f} tok/s", flush=True))
        print(f"timed in {time.monotonic() - started:.0f} s", flush=True)
        replies = {}
        for index, case in enumerate(result.cases):
            base = case.arm(BASELINE)
            assert base is not None and base.replies, "every case ran k 0"
            reply = base.replies[0]
            prompt = engine.prompt_ids(case.case.workload.as_messages())
            replies[index] = ChatReply(tuple(prompt), tuple(reply.token_ids), reply.finish_reason,
                                       conversation_id=index + 1, message_id=index + 1)
    finally:
        for each in engines:
            each.close()
    costs = measure_profile(target, median_context_ids(list(replies.values())), refuse_unsteady=False)
    return result.cases, arms, replies, costs, target.name


def category_rows(cases: list[CaseResult], arms: list[Arm], replies: list[ChatReply], costs: CostProfile,
                  lookup: tuple[int, int]) -> tuple[list[CategoryRow], Advice]:
    """Each arm's timed and replayed speed over k 0 on one category's replies; advise among the timed arms."""
    methods = sorted({arm.method for arm in arms if arm.speculative})
    drafters = history_drafters(methods, lookup)
    base_timed = timed_rate(cases, BASELINE)
    base_replayed = replay_arm(replies, None, 0, costs)
    rows = []
    for arm in arms:
        rate = timed_rate(cases, arm)
        if arm.speculative:
            replayed = replay_arm(replies, drafters[arm.method], AUTO if arm.auto else arm.k, costs)
            predicted = base_replayed.seconds / replayed.seconds if replayed.seconds else None
        else:
            predicted = 1.0
        ran = [case.arm(arm) for case in cases]
        same = all(result is not None and all(r.token_ids == list(reply.reply_ids) for r in result.replies)
                   for result, reply in zip(ran, replies, strict=True))
        rows.append(CategoryRow(arm, rate / base_timed if rate and base_timed else None, predicted, same))
    ks = sorted({AUTO if arm.auto else arm.k for arm in arms if arm.speculative}, key=str)
    advice = advise(Selection(list(replies)), costs, list(drafters.values()), ks)
    return rows, advice


def recommended_row(rows: list[CategoryRow], advice: Advice, drafters: dict) -> CategoryRow | None:
    """The timed row of the arm advise recommends (k 0 where no drafter is predicted to pay)."""
    best = advice.best
    if best.speedup < 1 + SAME_SPEED:
        return next((row for row in rows if not row.arm.speculative), None)
    for row in rows:
        drafter = drafters.get(row.arm.method)
        if drafter is not None and drafter.name == best.drafter and (AUTO if row.arm.auto else row.arm.k) == best.k:
            return row
    return None


def fmt(value: float | None, shape: str = "×{:.3f}") -> str:
    return "—" if value is None else shape.format(value)


def category_section(category: str, rows: list[CategoryRow], advice: Advice, drafters: dict) -> tuple[list[str], bool | None]:
    lines = [f"### {category}", "", "| arm | timed vs k 0 | replayed vs k 0 | difference | within ±5 % | same tokens as k 0 |",
             "| --- | --- | --- | --- | --- | --- |"]
    for row in rows:
        within = "—" if row.difference is None else ("yes" if abs(row.difference) <= TARGET_DIFFERENCE else "**no**")
        lines.append(f"| {arm_name(row.arm)} | {fmt(row.timed)} | {fmt(row.replayed)} | "
                     f"{fmt(row.difference, '{:+.1%}')} | {within} | {'yes' if row.same_tokens else '**no**'} |")
    chosen = recommended_row(rows, advice, drafters)
    timed = [row.timed for row in rows if row.timed is not None]
    ok = None
    if chosen is not None and chosen.timed is not None and timed:
        share = chosen.timed / max(timed)
        ok = share >= TARGET_RECOMMENDED
        lines += ["", f"advise recommends **{arm_name(chosen.arm)}** ({advice.recommendation()}); timed it is "
                  f"{share:.3f}× the best timed arm ({'meets' if ok else '**misses**'} ≥ {TARGET_RECOMMENDED})."]
    else:
        lines += ["", f"advise: {advice.recommendation()} (not among the timed arms)"]
    return lines + [""], ok


def report(args: argparse.Namespace, command: str, cases: list[CaseResult], arms: list[Arm], replies: dict[int, ChatReply],
           costs: CostProfile, model: str) -> str:
    from spectui.bench.plan import cpu_model
    from spectui.cli.advise import costs_line
    from spectui.settings.options import EngineOptions

    defaults = EngineOptions()
    lookup = (defaults.lookup_min, defaults.lookup_max)
    lines = ["# Replayed vs timed: advise's prediction against a real run of the same arms", "",
             f"Command: `{command}`", "",
             f"Full run (on a quiet box; this file's numbers mean little from a shared one): `{FULL}`", "",
             f"Machine: {cpu_model() or 'unknown CPU'}; target {model} on ggml, T = 0, {args.rounds} round(s), "
             f"{len(cases)} case(s). {costs_line(costs)}.", ""]
    if "unsteady" in costs.machine:
        lines += [f"**The costs were measured while the machine was not steady** ({costs.machine}).", ""]
    sections: list[str] = []
    summary = ["| category | largest difference | recommended ≥ 0.97× best timed |", "| --- | --- | --- |"]
    for category in dict.fromkeys(case.case.workload.category for case in cases):
        indices = [i for i, case in enumerate(cases) if case.case.workload.category == category]
        chosen = [cases[i] for i in indices]
        rows, advice = category_rows(chosen, arms, [replies[i] for i in indices], costs, lookup)
        drafters = history_drafters(sorted({arm.method for arm in arms if arm.speculative}), lookup)
        section, ok = category_section(category, rows, advice, drafters)
        sections += section
        differences = [abs(row.difference) for row in rows if row.difference is not None and row.arm.speculative]
        summary.append(f"| {category} | {fmt(max(differences, default=None), '{:.1%}')} | "
                       f"{'—' if ok is None else ('yes' if ok else '**no**')} |")
    lines += [*summary, "", *sections]
    median_tokens = statistics.median(len(reply.reply_ids) for reply in replies.values()) if replies else 0
    lines.append(f"Replies: {len(replies)}, median {median_tokens:g} tokens; speeds are decode speeds over k 0 "
                 "(each reply's first token left out), each reply at the median of its rounds.")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    command = "python benchmarks/advise_vs_timed.py " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    cases, arms, replies, costs, model = run(args)
    text = report(args, command.strip(), cases, arms, replies, costs, model)
    args.markdown.parent.mkdir(parents=True, exist_ok=True)
    args.markdown.write_text(text, encoding="utf-8")
    print(text)
    print(f"wrote {args.markdown}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
