"""One timed reply of one arm (a runner at a method and k), and the numbers it yields.

Every runner, spectui's engines and the anchors alike, is timed the same way: wall clock
from the call to the last token, and the first token's arrival. Stdlib only.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from spectui.events import Step


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
