"""What the panels show, computed from Steps: plain classes and functions, no textual."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import astuple, dataclass, field

from spectui.core.events import AutoChoice, Done, Step
from spectui.measure.metrics import MemoryReading, ReplyClock, RollingRate
from spectui.core.stats import ReplyStats
from spectui.core.theory import best_k, expected_tokens, linear_verify_cost, speedup

DEFAULT_VERIFY_SLOPE = 0.1  # v(k) = 1 + 0.1 k: a guess until a k = 0 step is measured


@dataclass(frozen=True)
class CostEstimate:
    draft_cost: float  # c: one draft token's time / one target decode step's time
    verify_slope: float  # v(k) = 1 + slope * k
    estimated: bool  # True when derived from step timings (not the engine's own figure)


def alpha_estimate(steps: Sequence[Step]) -> float | None:
    """Per-token acceptance α, the maximum-likelihood value for i.i.d. acceptance.

    Each step contributes its accepted drafts as successes and one failure if it stopped
    before its last draft; this stays right when k changes within a reply.
    """
    accepted = rejections = 0
    for step in steps:
        if step.num_drafted:
            accepted += step.num_accepted
            rejections += step.num_accepted < step.num_drafted
    total = accepted + rejections
    return accepted / total if total else None


@dataclass
class CostSums:
    """Running sums of step timings, so the cost estimate costs O(1) per frame."""

    drafted_steps: int = 0
    drafted_tokens: int = 0
    verify_drafted: float = 0.0  # verify seconds of steps that drafted
    draft_per_token: float = 0.0  # sum over those steps of draft seconds / drafted
    plain_steps: int = 0
    verify_plain: float = 0.0

    def add(self, step: Step) -> None:
        if step.verify_seconds <= 0:
            return
        if step.num_drafted:
            self.drafted_steps += 1
            self.drafted_tokens += step.num_drafted
            self.verify_drafted += step.verify_seconds
            self.draft_per_token += step.draft_seconds / step.num_drafted
        else:
            self.plain_steps += 1
            self.verify_plain += step.verify_seconds

    def plus(self, other: "CostSums") -> "CostSums":
        return CostSums(*(a + b for a, b in zip(astuple(self), astuple(other))))

    def estimate(self, engine_stats: dict | None = None) -> CostEstimate | None:
        """c and v(k) from the engine's figures if it gives them, else from the timings.

        Without a k = 0 step the target's one-token time is unknown and is backed out of
        the verify time with the default slope; the result is labelled an estimate.
        """
        engine_stats = engine_stats or {}
        if isinstance(engine_stats.get("draft_cost"), (int, float)):
            slope = engine_stats.get("verify_slope")
            given_slope = isinstance(slope, (int, float))
            return CostEstimate(
                float(engine_stats["draft_cost"]),
                float(slope) if given_slope else DEFAULT_VERIFY_SLOPE,
                estimated=not given_slope,
            )
        if not self.drafted_steps:
            return None
        mean_k = self.drafted_tokens / self.drafted_steps
        verify_k = self.verify_drafted / self.drafted_steps
        if self.plain_steps:
            one_token = self.verify_plain / self.plain_steps
            slope = max(0.0, (verify_k / one_token - 1.0) / mean_k)
        else:
            slope = DEFAULT_VERIFY_SLOPE
            one_token = verify_k / (1.0 + slope * mean_k)
        return CostEstimate(self.draft_per_token / self.drafted_steps / one_token, slope, estimated=True)


def estimate_costs(timing_steps: Sequence[Step], engine_stats: dict | None = None) -> CostEstimate | None:
    """The cost estimate from steps; leave out each reply's first step (it holds the prefill)."""
    sums = CostSums()
    for step in timing_steps:
        sums.add(step)
    return sums.estimate(engine_stats)


class ReplyTracker:
    """One reply's steps, clocks and running totals, as they arrive (O(1) per step)."""

    def __init__(self, started: float, window_s: float = 2.0) -> None:
        self.steps: list[Step] = []
        self.clock = ReplyClock(started)
        self.rolling = RollingRate(window_s)
        self.done: Done | None = None
        self.ended: float | None = None
        self.num_drafted = 0
        self.num_accepted = 0
        self.num_rejections = 0  # steps that stopped before their last draft
        self.offered: list[int] = []  # per draft position: steps that drafted it
        self.kept: list[int] = []  # per draft position: steps that accepted it
        self.alpha_values: list[float | None] = []
        self.costs = CostSums()  # timing of every step but the first (the prefill)
        self.tree_steps = 0  # steps that verified a draft tree (Step.tree_nodes set)
        self.tree_nodes = 0  # the nodes those steps verified, in all
        self.tree_nodes_last: int | None = None

    def add(self, step: Step, arrived: float) -> None:
        if self.steps:
            self.costs.add(step)
        self.steps.append(step)
        self.clock.on_tokens(arrived, len(step.token_ids))
        self.rolling.add(arrived, len(step.token_ids))
        drafted, accepted = step.num_drafted, step.num_accepted
        self.num_drafted += drafted
        self.num_accepted += accepted
        self.num_rejections += accepted < drafted
        while len(self.offered) < drafted:
            self.offered.append(0)
            self.kept.append(0)
        for position in range(drafted):
            self.offered[position] += 1
            self.kept[position] += position < accepted
        self.alpha_values.append(accepted / drafted if drafted else None)
        if step.tree_nodes is not None:
            self.tree_steps += 1
            self.tree_nodes += step.tree_nodes
            self.tree_nodes_last = step.tree_nodes

    def finish(self, done: Done | None, now: float) -> None:
        self.done = done
        self.ended = now

    @property
    def seconds(self) -> float:
        if self.done is not None and self.done.seconds > 0:
            return self.done.seconds  # the engine's own timing, as `spectui generate` reports
        end = self.clock.last_token if self.clock.last_token is not None else self.clock.started
        return max(0.0, end - self.clock.started)

    def stats(self) -> ReplyStats:
        """The same numbers as stats.summarize(self.steps, ...), kept up as steps arrive."""
        return ReplyStats(len(self.steps), self.clock.num_tokens, self.num_drafted, self.num_accepted, self.seconds)

    def per_position(self) -> list[float]:
        return [kept / offered for kept, offered in zip(self.kept, self.offered)]

    def alpha(self) -> float | None:
        """α by maximum likelihood, as alpha_estimate(self.steps)."""
        total = self.num_accepted + self.num_rejections
        return self.num_accepted / total if total else None

    def alpha_series(self) -> list[float | None]:
        return self.alpha_values

    def tree_nodes_mean(self) -> float | None:
        """Candidates the target verified per tree step in this reply; None without a tree."""
        return self.tree_nodes / self.tree_steps if self.tree_steps else None

    def time_to_first_token(self) -> float | None:
        if self.done is not None and self.done.time_to_first_token > 0:
            return self.done.time_to_first_token
        return self.clock.time_to_first_token


@dataclass
class SessionTracker:
    """Totals over the finished replies of this chat, for session γ and the cost estimate."""

    num_drafted: int = 0
    num_accepted: int = 0
    costs: CostSums = field(default_factory=CostSums)
    engine_stats: dict = field(default_factory=dict)

    def add_reply(self, reply: ReplyTracker) -> None:
        self.num_drafted += reply.num_drafted
        self.num_accepted += reply.num_accepted
        self.costs = self.costs.plus(reply.costs)
        if reply.done is not None and reply.done.engine_stats:
            self.engine_stats = dict(reply.done.engine_stats)

    def gamma(self, current: ReplyTracker | None = None) -> float | None:
        drafted, accepted = self.num_drafted, self.num_accepted
        if current is not None and current.done is None:
            drafted += current.num_drafted
            accepted += current.num_accepted
        return accepted / drafted if drafted else None


@dataclass(frozen=True)
class Theory:
    alpha: float
    k: int
    expected_tokens: float  # E(α, k) at the current k
    speedup: float  # predicted at the current k
    best_k: int
    best_speedup: float
    cost: CostEstimate


@dataclass(frozen=True)
class PanelData:
    k: int
    temperature: float
    num_tokens: int = 0
    num_steps: int = 0
    gamma_reply: float | None = None
    gamma_session: float | None = None
    tau: float | None = None
    alpha: float | None = None
    per_position: tuple[float, ...] = ()
    alpha_series: tuple[float | None, ...] = ()
    rate_now: float | None = None
    rate_reply: float | None = None
    time_to_first_token: float | None = None
    memory: MemoryReading | None = None
    theory: Theory | None = None
    status: str = "idle"
    auto: AutoChoice | None = None  # adaptive k's latest choice in this reply
    k_series: tuple[int, ...] = ()  # the k of each step, when adaptive k chose them
    # Tree drafting: drafted nodes verified per step, the mean over the reply's tree steps and
    # the latest one's; None for chains.
    tree_nodes_mean: float | None = None
    tree_nodes_last: int | None = None


def theory_for(alpha: float | None, k: int, cost: CostEstimate | None) -> Theory | None:
    if alpha is None or cost is None:
        return None
    verify = linear_verify_cost(cost.verify_slope)
    top_k, top_speedup = best_k(alpha, cost.draft_cost, verify)
    return Theory(
        alpha=alpha,
        k=k,
        expected_tokens=expected_tokens(alpha, k),
        speedup=speedup(alpha, k, cost.draft_cost, verify),
        best_k=top_k,
        best_speedup=top_speedup,
        cost=cost,
    )


def panel_data(
    reply: ReplyTracker | None,
    session: SessionTracker,
    k: int,
    temperature: float,
    now: float,
    memory: MemoryReading | None = None,
    status: str = "idle",
) -> PanelData:
    if reply is None:
        return PanelData(k, temperature, gamma_session=session.gamma(), memory=memory, status=status)
    stats = reply.stats()
    streaming = reply.done is None
    alpha = reply.alpha()
    costs = session.costs.plus(reply.costs) if streaming else session.costs
    cost = costs.estimate(session.engine_stats)
    adaptive = adaptive_fields(reply.steps)
    # Under adaptive k the theory line is about the k it chose last, not the k the keys set.
    theory_k = adaptive["auto"].k if adaptive else k
    return PanelData(
        k=k,
        temperature=temperature,
        num_tokens=stats.num_tokens,
        num_steps=stats.num_steps,
        gamma_reply=stats.gamma,
        gamma_session=session.gamma(reply),
        tau=stats.tau,
        alpha=alpha,
        per_position=tuple(reply.per_position()),
        alpha_series=tuple(reply.alpha_series()),
        rate_now=reply.rolling.rate(now) if streaming else None,
        rate_reply=stats.tokens_per_s if not streaming else reply.clock.tokens_per_s(now),
        time_to_first_token=reply.time_to_first_token(),
        memory=memory,
        theory=theory_for(alpha, theory_k, cost),
        status=status,
        tree_nodes_mean=reply.tree_nodes_mean(),
        tree_nodes_last=reply.tree_nodes_last,
        **adaptive,
    )


def adaptive_fields(steps: Sequence[Step]) -> dict:
    """Adaptive k's latest choice and the k it chose at each step; nothing when it was off."""
    latest = next((step.auto for step in reversed(steps) if step.auto is not None), None)
    if latest is None:
        return {}
    return {"auto": latest, "k_series": tuple(step.k for step in steps if step.auto is not None)}
