"""The bench loop: every case runs every arm, in rounds whose order alternates, and each
arm's numbers are medians over the rounds. Stdlib only: runners are passed in.

A case's speedups divide by spectui's own k = 0 arm of the same case, measured in the same
rounds, so slow and fast moments of the machine fall on both sides of every ratio.
Speed is decode tokens/s (after the first token): the prompt's prefill (the draft model's
included) is not what speculation speeds up. Replayed ratios put every step at the case's
median costs, to see an arm's choices apart from the machine's noise.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from spectui.bench.runs import Arm, ArmReply, case_costs, median_of, paired_ratio, replayed_rate
from spectui.bench.workloads import Workload
from spectui.core.events import K_MAX, GenerationParams
from spectui.core.stats import count_acceptance
from spectui.core.theory import alpha_from_tau, best_k, linear_verify_cost, speedup
from spectui.measure.costs import slope_through_one, timings_of

BASELINE = Arm("spectui", "none", 0)
Runner = Callable[[Arm, list, GenerationParams, float], ArmReply]


def same_sampled_reply(arm: Arm) -> bool:
    """spectui's prompt lookup writes, for a seed, the reply its k = 0 writes at any temperature
    (its copies are point masses: spectui.engines.speculative.verify.verify_copies)."""
    return arm.runner == "spectui" and arm.method == "ngram"


@dataclass(frozen=True)
class Case:
    workload: Workload
    temperature: float

    @property
    def params(self) -> GenerationParams:
        return GenerationParams(max_tokens=self.workload.max_tokens, top_p=1.0, seed=self.workload.seed)


@dataclass
class ArmResult:
    arm: Arm
    replies: list[ArmReply]
    tokens_per_s: float | None = None  # wall clock, prefill included
    decode_tokens_per_s: float | None = None
    time_to_first_token: float | None = None
    tokens: float | None = None
    gamma: float | None = None
    tau: float | None = None
    per_position: list[float] = field(default_factory=list)
    draft_cost: float | None = None
    verify_cost: float | None = None
    speedup: float | None = None  # decode tokens/s over spectui k = 0, same case
    # the same ratio with every step at the case's median costs: the machine's noise left out
    replayed_speedup: float | None = None
    predicted_speedup: float | None = None
    # T = 0: greedy is deterministic; at T > 0 for prompt lookup, whose seeded reply is the same whatever k
    same_tokens_as_baseline: bool | None = None
    mean_k: float | None = None  # adaptive k: the mean k it chose

    def as_dict(self) -> dict:
        return {
            "runner": self.arm.runner, "method": self.arm.method, "k": self.arm.k, "label": self.arm.label,
            "tokens_per_s": self.tokens_per_s, "decode_tokens_per_s": self.decode_tokens_per_s,
            "time_to_first_token": self.time_to_first_token, "tokens": self.tokens,
            "gamma": self.gamma, "tau": self.tau, "per_position": self.per_position,
            "draft_cost": self.draft_cost, "verify_cost": self.verify_cost,
            "speedup": self.speedup, "replayed_speedup": self.replayed_speedup,
            "predicted_speedup": self.predicted_speedup,
            "same_tokens_as_baseline": self.same_tokens_as_baseline, "auto": self.arm.auto, "mean_k": self.mean_k,
            "runs": [
                {"tokens": r.num_tokens, "wall_seconds": r.wall_seconds, "time_to_first_token": r.first_token_seconds,
                 "tokens_per_s": r.tokens_per_s, "decode_tokens_per_s": r.decode_tokens_per_s,
                 "first_chunk_tokens": r.first_chunk_tokens,
                 "finish_reason": r.finish_reason}
                for r in self.replies
            ],
        }


@dataclass
class CaseResult:
    case: Case
    arms: list[ArmResult]
    best: dict[str, dict] = field(default_factory=dict)  # method -> measured and predicted best k

    def arm(self, arm: Arm) -> ArmResult | None:
        return next((result for result in self.arms if result.arm == arm), None)

    def as_dict(self) -> dict:
        return {
            "category": self.case.workload.category, "workload": self.case.workload.name,
            "temperature": self.case.temperature, "max_tokens": self.case.workload.max_tokens,
            "arms": [result.as_dict() for result in self.arms], "best_k": self.best,
        }


def round_order(arms: Sequence[Arm], round_index: int) -> list[Arm]:
    """Forward on even rounds, backward on odd ones: no arm always runs first or last."""
    return list(arms) if round_index % 2 == 0 else list(reversed(arms))


def run_case(
    case: Case,
    arms: Sequence[Arm],
    runners: dict[str, Runner],
    repeats: int,
    on_reply: Callable[[ArmReply], None] = lambda reply: None,
) -> CaseResult:
    replies: dict[Arm, list[ArmReply]] = {arm: [] for arm in arms}
    for round_index in range(repeats):
        for arm in round_order(arms, round_index):
            reply = runners[arm.runner](arm, case.workload.as_messages(), case.params, case.temperature)
            replies[arm].append(reply)
            on_reply(reply)
    return summarize_case(case, replies)


def summarize_case(case: Case, replies: dict[Arm, list[ArmReply]]) -> CaseResult:
    target_seconds = timings_of(reply.steps for reply in replies.get(BASELINE, [])).target_seconds()
    results = [arm_result(arm, arm_replies, target_seconds) for arm, arm_replies in replies.items()]
    base = next((r for r in results if r.arm == BASELINE), None)
    ours = {arm: [reply.steps for reply in arm_replies if reply.steps]
            for arm, arm_replies in replies.items() if arm.runner == "spectui"}
    costs = case_costs((arm.method, steps) for arm, step_lists in ours.items() for steps in step_lists)
    base_rate = replayed_rate(ours.get(BASELINE, []), BASELINE.method, costs)
    for result in results:
        if base is not None:
            result.speedup = paired_ratio(result.replies, base.replies)
        rate = replayed_rate(ours.get(result.arm, []), result.arm.method, costs)
        if base_rate and rate:
            result.replayed_speedup = rate / base_rate
        if base is not None and (case.temperature == 0 or same_sampled_reply(result.arm)):
            result.same_tokens_as_baseline = all(
                reply.token_ids == base.replies[0].token_ids for reply in result.replies
            )
    return CaseResult(case, results, best_ks(results))


def arm_result(arm: Arm, replies: list[ArmReply], target_seconds: float | None) -> ArmResult:
    result = ArmResult(
        arm,
        replies,
        tokens_per_s=median_of(r.tokens_per_s for r in replies),
        decode_tokens_per_s=median_of(r.decode_tokens_per_s for r in replies),
        time_to_first_token=median_of(r.first_token_seconds for r in replies),
        tokens=median_of(r.num_tokens for r in replies),
    )
    steps = [step for reply in replies for step in reply.steps]
    if not steps or not arm.speculative:
        return result
    acceptance = count_acceptance(steps)
    result.gamma, result.tau = acceptance.gamma, acceptance.mean_acceptance_length
    result.per_position = acceptance.per_position
    timings = timings_of(reply.steps for reply in replies)
    result.draft_cost = timings.draft_cost(target_seconds)
    result.verify_cost = timings.verify_cost(arm.k, target_seconds)
    if arm.auto:
        # its own prediction, step by step; k changes, so one E(α,k) would not describe it
        choices = [step.auto for step in steps if step.auto is not None]
        result.mean_k = sum(c.k for c in choices) / len(choices) if choices else None
        result.predicted_speedup = median_of(c.predicted_speedup for c in choices)
    elif result.tau is not None and result.draft_cost is not None and (verify_cost := result.verify_cost) is not None:
        alpha = alpha_from_tau(result.tau, arm.k)
        result.predicted_speedup = speedup(alpha, arm.k, result.draft_cost, lambda _k: verify_cost)
    return result


def best_ks(results: Sequence[ArmResult]) -> dict[str, dict]:
    """Per spectui method: the k with the highest measured speedup over k = 0, and the k the model
    S(k) = E(α,k) / (k·c + v(k)) picks from α, c and v measured on this case."""
    best: dict[str, dict] = {}
    methods = {r.arm.method for r in results if r.arm.runner == "spectui" and r.arm.speculative}
    for method in sorted(methods):
        ours = [r for r in results if r.arm.runner == "spectui" and not r.arm.auto
                and (r.arm.method == method or r.arm.k == 0)]
        timed = [r for r in ours if r.speedup is not None]
        if not timed:
            continue
        fastest = max(timed, key=lambda r: r.speedup or 0.0)  # each one timed
        entry: dict = {"measured_k": fastest.arm.k, "measured_speedup": fastest.speedup}
        drafted = [r for r in ours if r.arm.speculative and r.tau is not None and r.draft_cost is not None]
        if drafted:
            # α from the longest k measured: its positions cover the others'
            longest = max(drafted, key=lambda r: r.arm.k)
            cost = median_of(r.draft_cost for r in drafted)
            assert longest.tau is not None and cost is not None, "drafted holds the arms with their τ and c"
            alpha = alpha_from_tau(longest.tau, longest.arm.k)
            slope = slope_through_one([(r.arm.k, r.verify_cost) for r in drafted if r.verify_cost is not None])
            verify = linear_verify_cost(max(0.0, slope or 0.0))
            k, predicted = best_k(alpha, cost, verify, K_MAX)
            entry.update(alpha=alpha, predicted_k=k, predicted_speedup=predicted)
        best[method] = entry
    return best
