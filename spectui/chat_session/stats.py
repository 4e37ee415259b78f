"""What the panels show, computed from Steps: plain classes and functions, no textual."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from spectui.core.engine import SPECULATION_NOT_REPORTED
from spectui.core.events import AutoChoice, Done, Step
from spectui.core.stats import AcceptanceCounts, ReplyStats
from spectui.core.theory import best_k, expected_tokens, linear_verify_cost, speedup
from spectui.engines.threads import BUSY_SHARE
from spectui.measure.costs import CostEstimate, StepTimings
from spectui.measure.metrics import MemoryReading, ReplyClock, RollingRate




class ReplyTracker:
    """One reply's steps, clocks and running totals, as they arrive (O(1) per step)."""

    def __init__(self, started: float, window_s: float = 2.0) -> None:
        self.steps: list[Step] = []
        self.clock = ReplyClock(started)
        self.rolling = RollingRate(window_s)
        self.done: Done | None = None
        self.ended: float | None = None
        self.acceptance = AcceptanceCounts()
        self.alpha_values: list[float | None] = []
        self.costs = StepTimings()  # timing of every step but the first (the prefill)
        self.tree_steps = 0  # steps that verified a draft tree (Step.tree_nodes set)
        self.tree_nodes = 0  # the nodes those steps verified, in all
        self.tree_nodes_last: int | None = None
        self.k_total = 0  # the k of every step, summed: the reply's mean k
        self.drafted_steps: dict[int, int] = {}  # drafted tokens -> steps that drafted that many
        self.timed_tokens = 0  # tokens of the timed decode steps (not the prefill's)...
        self.timed_seconds = 0.0  # ...and their draft and verify seconds
        self.k0_steps = 0  # timed steps at k = 0 (a step at k 4 that drafted nothing is plain, not k = 0)
        self.first_chunk_tokens = 0  # the tokens the first step with any brought (the prefill's)

    def add(self, step: Step, arrived: float) -> None:
        if self.steps:
            self.costs.add(step)
            self.k0_steps += step.k == 0
            if step.verify_seconds > 0:
                self.timed_tokens += len(step.token_ids)
                self.timed_seconds += step.draft_seconds + step.verify_seconds
        self.k_total += step.k
        self.drafted_steps[step.num_drafted] = self.drafted_steps.get(step.num_drafted, 0) + 1
        self.steps.append(step)
        if not self.clock.num_tokens:
            self.first_chunk_tokens = len(step.token_ids)
        self.clock.on_tokens(arrived, len(step.token_ids))
        self.rolling.add(arrived, len(step.token_ids))
        self.acceptance.observe(step)
        drafted = step.num_drafted
        self.alpha_values.append(step.num_accepted / drafted if drafted else None)
        if step.tree_nodes is not None:
            self.tree_steps += 1
            self.tree_nodes += step.tree_nodes
            self.tree_nodes_last = step.tree_nodes

    def finish(self, done: Done | None, now: float) -> None:
        self.done = done
        self.ended = now

    @property
    def busy(self) -> bool:
        """Other processes held the cores while it ran (Done.neighbour_share): its timings
        are not comparable with a quiet machine's."""
        share = self.done.neighbour_share if self.done is not None else None
        return share is not None and share >= BUSY_SHARE

    @property
    def seconds(self) -> float:
        if self.done is not None and self.done.seconds > 0:
            return self.done.seconds  # the engine's own timing, as `spectui generate` reports
        end = self.clock.last_token if self.clock.last_token is not None else self.clock.started
        return max(0.0, end - self.clock.started)

    def decode_rate(self, now: float | None = None) -> float | None:
        """Tokens after the first over the time after it (now: while it streams): a prefill is
        not decoding, and after a model switch the whole conversation goes through it."""
        tokens = self.clock.num_tokens - self.first_chunk_tokens
        done = self.done
        if done is not None and done.seconds > 0 and done.time_to_first_token > 0:
            seconds = done.seconds - done.time_to_first_token  # the engine's own clock, as `seconds`
        else:
            end = now if now is not None and done is None else self.clock.last_token
            first = self.clock.first_token
            seconds = end - first if end is not None and first is not None else 0.0
        return tokens / seconds if tokens > 0 and seconds > 0 else None

    def stats(self) -> ReplyStats:
        """The same numbers as stats.summarize(self.steps, ...), kept up as steps arrive."""
        return ReplyStats(len(self.steps), self.clock.num_tokens, self.seconds, self.acceptance.copy())

    def per_position(self) -> list[float]:
        return self.acceptance.per_position

    def alpha(self) -> float | None:
        return self.acceptance.alpha

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

    acceptance: AcceptanceCounts = field(default_factory=AcceptanceCounts)
    costs: StepTimings = field(default_factory=StepTimings)
    engine_stats: dict = field(default_factory=dict)
    # The compare view's last speedup over k = 0, and what it ran ("k = 4", "k auto (from 4)")
    compared: tuple[float, str] | None = None
    k0_steps: int = 0  # the finished replies' timed steps at k = 0
    busy_replies: int = 0  # of them, those timed while other processes held the cores

    def add_reply(self, reply: ReplyTracker) -> None:
        self.k0_steps += reply.k0_steps
        self.busy_replies += reply.busy
        self.acceptance = self.acceptance.merged(reply.acceptance)
        self.costs = self.costs.merged(reply.costs)
        if reply.done is not None and reply.done.engine_stats:
            self.engine_stats = dict(reply.done.engine_stats)

    def gamma(self, current: ReplyTracker | None = None) -> float | None:
        if current is not None and current.done is None:
            return self.acceptance.merged(current.acceptance).gamma
        return self.acceptance.gamma


@dataclass(frozen=True)
class ReplyFigures:
    """An ended reply as it ran, over all its steps (not its last one's k)."""

    mean_k: float
    tokens_per_step: float  # measured
    expected_tokens: float  # predicted: E(α, n) over the drafts n of its steps
    speedup: float  # predicted for those steps


@dataclass(frozen=True)
class Theory:
    alpha: float
    k: int
    expected_tokens: float  # E(α, k) at the current k
    speedup: float  # the one prediction: at the current k, or for the ended reply's steps
    best_k: int | None  # None until v(k) is measured at two k (`missing` says what is)
    best_speedup: float | None
    cost: CostEstimate
    missing: str = ""  # what best k waits for
    reply: ReplyFigures | None = None  # set once the reply ended
    measured_speedup: float | None = None  # the reply's tokens per step-second over a plain step's
    # What the plain step's time comes from: "k=0 steps", "undrafted steps" (steps at k > 0
    # that drafted nothing: one token each, as plain decoding) or "k=0, compare" (the compare view's runs)
    measured_against: str = "k=0 steps"


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
    # What the engine could not see of the speculation (a server that is not vLLM):
    # "not reported by this server", or "counted by the server per reply".
    speculation_note: str | None = None
    # Some timing behind the figures was taken while other processes held the cores
    busy: bool = False
    # A draft with another tokenizer: the share of its vocabulary the target holds ("80% shared").
    draft_vocab: str = ""


def theory_for(alpha: float | None, k: int, cost: CostEstimate | None, reply: ReplyTracker | None = None,
               plain_seconds: float | None = None, plain_from: str = "k=0 steps") -> Theory | None:
    """The prediction at k while `reply` streams, for its steps once it ended; best k only
    once v(k) is measured at two k."""
    if alpha is None or cost is None:
        return None
    verify = linear_verify_cost(cost.verify_slope)
    top_k, top_speedup = best_k(alpha, cost.draft_cost, verify) if cost.slope_measured else (None, None)
    figures = reply_figures(reply, alpha, cost) if reply is not None and reply.done is not None else None
    return Theory(
        alpha=alpha,
        k=k,
        expected_tokens=expected_tokens(alpha, k),
        speedup=figures.speedup if figures is not None else speedup(alpha, k, cost.draft_cost, verify),
        best_k=top_k,
        best_speedup=top_speedup,
        cost=cost,
        missing="" if cost.slope_measured else slope_missing(cost),
        reply=figures,
        measured_speedup=measured_speedup(reply, plain_seconds),
        measured_against=plain_from,
    )


def with_compared(theory: Theory | None, compared: tuple[float, str] | None) -> Theory | None:
    """The compare view's measured speedup where the reply has none of its own (no plain steps)."""
    if theory is None or theory.measured_speedup is not None or compared is None:
        return theory
    speedup, _ = compared
    return replace(theory, measured_speedup=speedup, measured_against="k=0, compare")


def slope_missing(cost: CostEstimate) -> str:
    ks = cost.verify_ks or ()
    if cost.slope_guessed:
        return f"v(k) timed at k={','.join(map(str, ks))}: no line fits them"
    if len(ks) == 1:
        return f"v(k) timed at k={ks[0]} only: needs another k"
    return "v(k) not timed yet"


def reply_figures(reply: ReplyTracker, alpha: float, cost: CostEstimate) -> ReplyFigures | None:
    steps = sum(reply.drafted_steps.values())
    if not steps:
        return None
    verify = linear_verify_cost(cost.verify_slope)
    tokens = sum(count * expected_tokens(alpha, n) for n, count in reply.drafted_steps.items())
    time = sum(count * (n * cost.draft_cost + verify(n)) for n, count in reply.drafted_steps.items())
    return ReplyFigures(reply.k_total / steps, reply.clock.num_tokens / steps, tokens / steps, tokens / time)


def measured_speedup(reply: ReplyTracker | None, plain_seconds: float | None) -> float | None:
    """The reply's tokens per second of drafting and verifying, over one plain (k = 0) step's:
    measured, where the chat has timed plain steps and the reply drafted."""
    if reply is None or not plain_seconds or not reply.timed_seconds or not reply.acceptance.num_drafts:
        return None
    return reply.timed_tokens / reply.timed_seconds * plain_seconds


def panel_data(
    reply: ReplyTracker | None,
    session: SessionTracker,
    k: int,
    temperature: float,
    now: float,
    memory: MemoryReading | None = None,
    status: str = "idle",
    speculation_reported: bool = True,
    draft_vocab: str = "",
    load_slope: float | None = None,
) -> PanelData:
    note = speculation_note(session, speculation_reported)
    if reply is None:
        return PanelData(
            k, temperature, gamma_session=session.gamma(), memory=memory, status=status, speculation_note=note,
            draft_vocab=draft_vocab,
        )
    stats = reply.stats()
    streaming = reply.done is None
    if reply.steps:  # the reply's k and T as its last step ran them (a key may have changed them since)
        k, temperature = reply.steps[-1].k, reply.steps[-1].temperature
    alpha = reply.alpha()
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
        rate_reply=reply.decode_rate(now),
        time_to_first_token=reply.time_to_first_token(),
        memory=memory,
        theory=reply_theory(reply, session, alpha, theory_k, streaming, load_slope),
        status=status,
        tree_nodes_mean=reply.tree_nodes_mean(),
        tree_nodes_last=reply.tree_nodes_last,
        speculation_note=note,
        busy=reply.busy or session.busy_replies > 0,
        draft_vocab=draft_vocab,
        **adaptive,
    )


def speculation_note(session: SessionTracker, speculation_reported: bool) -> str | None:
    """The last reply's word on speculation, if any; else whether the engine reports it at all."""
    note = session.engine_stats.get("speculation")
    if isinstance(note, str):
        return note
    return None if speculation_reported else SPECULATION_NOT_REPORTED


def reply_theory(reply: ReplyTracker, session: SessionTracker, alpha: float | None, theory_k: int,
                 streaming: bool, load_slope: float | None = None) -> Theory | None:
    """The theory line for this reply at theory_k, its costs merged in while it streams;
    load_slope: v(k)'s slope the engine timed at load, where the steps cannot give one."""
    costs = session.costs.merged(reply.costs) if streaming else session.costs
    cost = costs.estimate(session.engine_stats, load_slope)
    k0_steps = session.k0_steps + (reply.k0_steps if streaming else 0)
    plain_from = "k=0 steps" if k0_steps else "undrafted steps"
    return with_compared(theory_for(alpha, theory_k, cost, reply, costs.target_seconds(), plain_from), session.compared)


def adaptive_fields(steps: Sequence[Step]) -> dict:
    """Adaptive k's latest choice and the k it chose at each step; nothing when it was off,
    or turned off mid-reply (a k key: the last step ran a fixed k)."""
    latest = steps[-1].auto if steps else None
    if latest is None:
        return {}
    return {"auto": latest, "k_series": tuple(step.k for step in steps if step.auto is not None)}
