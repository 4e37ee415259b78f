"""c and v(k) from step timings: the one cost estimator of the panels and the bench. Stdlib only.

c is one drafted token's time over one plain target decode step's; v(n) is the target's
forward over n drafts and one more token, over that plain step (v(0) = 1). Every figure is
a median of the steps that did that thing, so a slow moment of a shared machine moves none
of them. A reply's first step holds the prompt's prefill: `add_reply` leaves it out.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from spectui.core.events import Step

DEFAULT_VERIFY_SLOPE = 0.1  # v(k) = 1 + 0.1 k: a guess until a plain step is measured


@dataclass(frozen=True)
class CostEstimate:
    draft_cost: float  # c: one draft token's time / one target decode step's time
    verify_slope: float  # v(k) = 1 + slope * k
    estimated: bool  # True when derived from step timings (not the engine's own figure)
    # The drafted counts (> 0) whose verify forwards were timed; None: the engine gave the slope
    verify_ks: tuple[int, ...] | None = None
    slope_timed_at_load: bool = False  # the slope is the engine's own timing at load (ggml's), not these steps'
    slope_guessed: bool = False  # the default slope, though verify forwards were timed (no line fit them)

    @property
    def slope_measured(self) -> bool:
        """v(k)'s slope rests on measurements: the engine's figure, or verify forwards timed at
        two or more k (one k alone cannot tell a slope from noise in the plain step's time)."""
        if self.slope_timed_at_load:
            return True
        if self.slope_guessed:
            return False
        if self.verify_ks is None:
            return not self.estimated
        return len(self.verify_ks) >= 2


@dataclass
class StepTimings:
    """Step timings by what each step did, kept sorted so that a median costs nothing."""

    verify: dict[int, list[float]] = field(default_factory=dict)  # drafted tokens -> verify seconds
    draft: dict[str, list[float]] = field(default_factory=dict)  # method -> seconds per drafted token
    draft_any: list[float] = field(default_factory=list)  # seconds per drafted token, any method

    def add(self, step: Step, method: str | None = None) -> None:
        """One decode step (never a reply's first); a step without timings says nothing."""
        if step.verify_seconds <= 0:
            return
        drafted = step.num_drafted
        bisect.insort(self.verify.setdefault(step.num_verified, []), step.verify_seconds)
        if drafted:
            per_token = step.draft_seconds / drafted
            bisect.insort(self.draft.setdefault(step.method if method is None else method, []), per_token)
            bisect.insort(self.draft_any, per_token)

    def add_reply(self, steps: Sequence[Step], method: str | None = None) -> None:
        for step in steps[1:]:
            self.add(step, method)

    def merged(self, other: StepTimings) -> StepTimings:
        return StepTimings(
            _merge(self.verify, other.verify), _merge(self.draft, other.draft), sorted(self.draft_any + other.draft_any)
        )

    # seconds

    def verify_seconds(self, drafted: int) -> float | None:
        """The target's forward over `drafted` drafts and one more token (0: a plain step)."""
        return _median(self.verify.get(drafted, ()))

    def draft_seconds(self, method: str | None = None) -> float | None:
        """One drafted token, by `method` or by any method."""
        return _median(self.draft_any if method is None else self.draft.get(method, ()))

    # ratios to one plain target step

    def draft_cost(self, target_seconds: float | None, method: str | None = None) -> float | None:
        """c: one drafted token's cost relative to one target decode step."""
        draft = self.draft_seconds(method)
        return draft / target_seconds if draft is not None and target_seconds else None

    def verify_cost(self, drafted: int, target_seconds: float | None) -> float | None:
        """v(n): a verify forward over n drafts relative to one target decode step."""
        verify = self.verify_seconds(drafted)
        return verify / target_seconds if verify is not None and target_seconds else None

    def verify_slope(self, target_seconds: float | None) -> float | None:
        """The slope of v(k) = 1 + slope * k through the measured v(n), each n weighted by its steps."""
        if not target_seconds:
            return None
        timed = [(n, cost, len(self.verify[n])) for n in self.verify
                 if n and (cost := self.verify_cost(n, target_seconds)) is not None]
        return slope_through_one([(n, cost) for n, cost, _ in timed], [steps for _, _, steps in timed])

    def estimate(self, engine_stats: dict | None = None, load_slope: float | None = None) -> CostEstimate | None:
        """c and v(k) from the engine's figures if it gives them, else from the timings.

        Without a plain step the target's one-token time is unknown and is backed out of
        the verify times with a slope: the one the engine timed at load (load_slope: ggml's,
        whose verify runs in pieces), else a line through two or more k where one fits, else
        the default guess (not measured); the result is labelled an estimate.
        """
        engine_stats = engine_stats or {}
        if isinstance(engine_stats.get("draft_cost"), (int, float)):
            slope = engine_stats.get("verify_slope")
            given_slope = isinstance(slope, (int, float))
            return CostEstimate(
                float(engine_stats["draft_cost"]),
                float(slope) if given_slope else DEFAULT_VERIFY_SLOPE,
                estimated=not given_slope,
                verify_ks=None if given_slope else (),
            )
        drafted = {n: times for n, times in self.verify.items() if n}
        if not drafted:
            return None
        target = self.target_seconds()
        # ggml's verify runs in whole pieces of rows, which no line through its forwards
        # describes: its own timing at load comes first.
        line = None if target or load_slope is not None else self._verify_line(drafted)
        from_steps = bool(target) or line is not None
        if target:
            slope = max(0.0, self.verify_slope(target) or 0.0)
        elif line is not None:
            target, slope = line
        else:
            slope = DEFAULT_VERIFY_SLOPE if load_slope is None else load_slope
            steps = sum(len(times) for times in drafted.values())
            target = sum(len(times) * _middle(times) / (1.0 + slope * n) for n, times in drafted.items()) / steps
        draft_cost = self.draft_cost(target)
        if draft_cost is None:  # verify forwards over drafts, but no drafting timed: c is unknown
            return None
        return CostEstimate(draft_cost, slope, estimated=True, verify_ks=tuple(sorted(drafted)),
                            slope_timed_at_load=not from_steps and load_slope is not None,
                            slope_guessed=not from_steps and load_slope is None and len(drafted) >= 2)

    @staticmethod
    def _verify_line(drafted: dict[int, list[float]]) -> tuple[float, float] | None:
        """Without a plain step, verify times at two or more k give the line t(n) = t0 + b n:
        (t0, b / t0), the plain step's time and v(k)'s slope; None when that fails."""
        if len(drafted) < 2:
            return None
        points = [(n, _middle(times), len(times)) for n, times in drafted.items()]
        weight = sum(w for _, _, w in points)
        mean_n = sum(n * w for n, _, w in points) / weight
        mean_t = sum(t * w for _, t, w in points) / weight
        spread = sum(w * (n - mean_n) ** 2 for n, _, w in points)
        rise = sum(w * (n - mean_n) * (t - mean_t) for n, t, w in points) / spread
        intercept = mean_t - rise * mean_n
        if intercept <= 0:
            return None
        return intercept, max(0.0, rise / intercept)

    def target_seconds(self) -> float | None:
        """One plain target decode step."""
        return self.verify_seconds(0)


def timings_of(replies: Iterable[Sequence[Step]], method: str | None = None) -> StepTimings:
    """The timings of some replies' decode steps (each reply's first step left out)."""
    timings = StepTimings()
    for steps in replies:
        timings.add_reply(steps, method)
    return timings


def slope_through_one(points: Sequence[tuple[float, float]], weights: Sequence[float] | None = None) -> float | None:
    """Weighted least squares slope of v = 1 + slope * n (the line through v(0) = 1); None without a point at n > 0."""
    weights = weights if weights is not None else [1.0] * len(points)
    spread = sum(w * n * n for (n, _), w in zip(points, weights))
    if not spread:
        return None
    return sum(w * n * (v - 1.0) for (n, v), w in zip(points, weights)) / spread


def _median(ordered: Sequence[float]) -> float | None:
    """The median of an already sorted list, without sorting it again."""
    return _middle(ordered) if ordered else None


def _middle(ordered: Sequence[float]) -> float:
    """The median of an already sorted list that holds times (a k's verify times always do)."""
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def _merge(a: dict, b: dict) -> dict:
    merged = {key: list(values) for key, values in a.items()}
    for key, values in b.items():
        merged[key] = sorted(merged.get(key, []) + values)  # two sorted runs: linear time
    return merged
