"""One timed reply of one arm (a runner at a method and k), and the numbers it yields.

Every runner, spectui's engines and the anchors alike, is timed the same way: wall clock
from the call to the last token, and the first token's arrival. Stdlib only.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from spectui.core.events import Step


@dataclass(frozen=True)
class Arm:
    """What runs: a runner ("spectui", "transformers", "vllm") drafting by `method` with k."""

    runner: str
    method: str  # "none" for plain decoding; "draft", "ngram", "assisted", "prompt-lookup"
    k: int  # with auto: where adaptive k starts
    auto: bool = False  # adaptive k picks each step's k

    @property
    def label(self) -> str:
        if self.auto:
            return f"{self.runner} {self.method} k=auto"
        return f"{self.runner} {self.method}" + (f" k={self.k}" if self.k else "")

    @property
    def speculative(self) -> bool:
        return self.k > 0 and self.method != "none"


@dataclass
class TimedReply:
    arm: Arm
    token_ids: list[int]
    wall_seconds: float  # the call to the last token
    first_token_seconds: float | None  # the call to the first token
    steps: list[Step] = field(default_factory=list)  # spectui's engines only
    finish_reason: str = "stop"
    # Tokens that arrived with the first: 1 where the prompt's prefill makes the first token
    # on its own; k + 1 where the prefill also verifies the first drafts (transformers'
    # assisted generation and prompt lookup).
    first_chunk_tokens: int = 1

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def tokens_per_s(self) -> float | None:
        return self.num_tokens / self.wall_seconds if self.wall_seconds > 0 else None

    @property
    def decode_tokens_per_s(self) -> float | None:
        """Tokens after the first chunk, over the time after it: the prompt's prefill left out,
        so a runner that keeps the prompt's cache between replies gains nothing here, and one
        whose prefill also verifies drafts does not get those tokens for free."""
        if self.first_token_seconds is None or self.num_tokens <= self.first_chunk_tokens:
            return None
        seconds = self.wall_seconds - self.first_token_seconds
        return (self.num_tokens - self.first_chunk_tokens) / seconds if seconds > 0 else None


def median_of(values: Iterable[float | None]) -> float | None:
    present = [value for value in values if value is not None]
    return statistics.median(present) if present else None


def paired_ratio(top: Sequence[TimedReply], bottom: Sequence[TimedReply]) -> float | None:
    """One arm's decode speed over another's: the median over rounds of the two replies of
    the same round (both lists in round order). A VM whose neighbours slow it for a while
    slows both arms of the rounds that stretch covers, while two separate medians can take
    one arm's from a slow round and the other's from a fast one: with five rounds, a slowdown
    that began mid-round put three of one arm's replies and two of the other's in it, and
    moved their ratio by 25%."""
    ratios = [
        upper.decode_tokens_per_s / lower.decode_tokens_per_s
        for upper, lower in zip(top, bottom)
        if upper.decode_tokens_per_s and lower.decode_tokens_per_s
    ]
    return statistics.median(ratios) if ratios else None


def target_step_seconds(step_lists: Iterable[Sequence[Step]]) -> float | None:
    """One plain target decode step: the median verify time of the k = 0 steps of some
    replies, each reply's first step left out (it holds the prompt's prefill)."""
    return median_of(step.verify_seconds for steps in step_lists for step in steps[1:] if not step.num_drafted)


def draft_cost(steps: Sequence[Step], target_seconds: float | None) -> float | None:
    """c: one drafted token's cost relative to one target decode step."""
    per_token = [step.draft_seconds / step.num_drafted for step in steps if step.num_drafted]
    if not per_token or not target_seconds:
        return None
    return statistics.median(per_token) / target_seconds


def verify_cost(steps: Sequence[Step], target_seconds: float | None) -> float | None:
    """v(k): the target's cost for a full verify step (k drafts + 1) relative to one decode step."""
    full = [step.verify_seconds for step in steps if step.num_drafted and step.num_drafted == step.k]
    if not full or not target_seconds:
        return None
    return statistics.median(full) / target_seconds


def linear_fit(points: Sequence[tuple[float, float]]) -> tuple[float, float] | None:
    """Least squares (intercept, slope); None with fewer than two distinct x."""
    if len({x for x, _ in points}) < 2:
        return None
    mean_x = statistics.fmean(x for x, _ in points)
    mean_y = statistics.fmean(y for _, y in points)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / sum((x - mean_x) ** 2 for x, _ in points)
    return mean_y - slope * mean_x, slope


def verify_cost_model(measured: dict[int, float]) -> Callable[[int], float]:
    """v(k) for any k from the ks measured: v(0) = 1 plus a line through the measured ones."""
    points = [(0.0, 1.0), *((float(k), v) for k, v in measured.items())]
    fit = linear_fit(points)
    intercept, slope = fit if fit is not None else (1.0, 0.0)
    return lambda k: 1.0 if k <= 0 else max(1.0, intercept + slope * k)


@dataclass(frozen=True)
class CaseCosts:
    """One case's median seconds per operation, over every arm's steps (each reply's first
    step, which holds the prefill, left out)."""

    verify: dict[int, float]  # drafted tokens -> the target's forward over them and one more
    draft: dict[str, float]  # method -> one drafted token


def case_costs(replies: Iterable[tuple[str, Sequence[Step]]]) -> CaseCosts:
    """replies: (method, steps) of spectui's arms in one case."""
    verify: dict[int, list[float]] = {}
    draft: dict[str, list[float]] = {}
    for method, steps in replies:
        for step in steps[1:]:
            verify.setdefault(step.num_drafted, []).append(step.verify_seconds)
            if step.num_drafted:
                draft.setdefault(method, []).append(step.draft_seconds / step.num_drafted)
    return CaseCosts({n: statistics.median(v) for n, v in verify.items()},
                     {m: statistics.median(d) for m, d in draft.items()})


def replayed_seconds(steps: Sequence[Step], method: str, costs: CaseCosts) -> float | None:
    """A reply's decode time with each of its steps at the case's median costs: the arm's real
    choices and acceptances, without the machine's moment-to-moment speed (rounds of one arm
    differ by 15-40% on a shared VM). A draft model that sat out plain steps first runs over
    the tokens it missed: charged as one forward over that many tokens, scaled as the
    target's forwards scale. None for draft trees (their cost is not a chain's)."""
    if 0 not in costs.verify:
        return None
    total, missed = 0.0, 0
    for step in steps[1:]:
        drafted = step.num_drafted
        if step.tree_nodes is not None or drafted not in costs.verify or (drafted and method not in costs.draft):
            return None
        total += costs.verify[drafted]
        if drafted:
            total += drafted * costs.draft[method]
            if method == "draft" and missed:
                widest = costs.verify.get(missed, costs.verify[max(costs.verify)])
                total += costs.draft[method] * widest / costs.verify[0]
            missed = 0
        else:
            missed += len(step.token_ids)
    return total


def replayed_rate(replies: Sequence[Sequence[Step]], method: str, costs: CaseCosts) -> float | None:
    """Tokens per replayed second over replies (their first steps left out, as decode speed does)."""
    tokens, seconds = 0, 0.0
    for steps in replies:
        replayed = replayed_seconds(steps, method, costs)
        if replayed is None:
            return None
        tokens += sum(len(step.token_ids) for step in steps[1:])
        seconds += replayed
    return tokens / seconds if seconds > 0 else None
