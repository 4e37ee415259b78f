"""Speculative decoding against its own baseline, timed. Stdlib only.

The baseline is the same engine with k = 0, so both paths run the very same loop, model
and sampling seed; only drafting differs. An engine whose k is fixed at start (vLLM)
gets a second engine for the baseline: the same model without a speculative_config. Runs never overlap (one engine, one device:
overlapping runs would slow each other down), and the order alternates between rounds
so neither path always runs first with a cold cache or a cool CPU. Each run is timed by
`run_reply`; the speedup pairs the two paths' runs round by round (`paired_ratio`), as
`spectui bench` does.

The CLI (`spectui compare`) and the TUI compare screen both call this module.
"""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from spectui.core.engine import Engine
from spectui.core.events import Control, GenerationParams, Message, Step
from spectui.core.safe_text import safe_line
from spectui.core.stats import summarize
from spectui.measure.run import Clock, MeasuredReply, reply_json, run_reply
from spectui.measure.speed import median_or_none, paired_ratio

PATHS: tuple[str, str] = ("speculative", "baseline")

# Replies that ran to their natural end. A cancelled or failed run is kept (a UI shows
# it) but its partial reply says nothing about speed or output, so statistics skip it.
FINISHED = ("stop", "length")

ControlFactory = Callable[[str, int, float], Control]


@dataclass
class TimedRun:
    path: str  # "speculative" or "baseline"
    index: int  # 0-based index of this run within its path: its round
    reply: MeasuredReply  # with its timing: started, ended, first token
    k: int  # k in force (0 for the baseline)

    @property
    def started(self) -> float:
        return self.reply.started

    @property
    def ended(self) -> float:
        return self.reply.ended

    @property
    def wall_seconds(self) -> float:
        return self.reply.wall_seconds

    @property
    def num_tokens(self) -> int:
        return self.reply.num_tokens

    @property
    def tokens_per_s(self) -> float | None:
        """Wall-clock speed, prefill and any engine overhead included."""
        return self.reply.tokens_per_s

    @property
    def num_forwards(self) -> int:
        """Target forward passes: one per Step."""
        return len(self.reply.steps)

    @property
    def finish_reason(self) -> str | None:
        return self.reply.finish_reason

    @property
    def finished(self) -> bool:
        return self.finish_reason in FINISHED

    @property
    def cancelled(self) -> bool:
        return self.finish_reason == "cancelled"


def first_difference(a: Sequence[int], b: Sequence[int]) -> int | None:
    """Index of the first position where two token lists differ (a length difference counts at min(len)); None if equal."""
    for index, (token_a, token_b) in enumerate(zip(a, b)):
        if token_a != token_b:
            return index
    return None if len(a) == len(b) else min(len(a), len(b))


@dataclass(frozen=True)
class Divergence:
    """Where a speculative reply left the plain one at T = 0, and how near a tie it was there."""

    position: int
    speculative: str  # the token each path wrote there, as text
    baseline: str
    gap: float | None  # the plain path's top logit minus its second there, where the engine says


def divergence_text(comparison: Comparison) -> str:
    """Where the replies parted: the token each wrote, and the plain path's top-two gap there."""
    divergence = comparison.divergence()
    if divergence is None:  # a run of one path differs from another run of the same path
        return f"DIFFERENT at token {comparison.difference}: lossless decoding is broken"
    where = (f"at token {divergence.position}: {safe_line(divergence.speculative)!r} "
             f"where plain decoding wrote {safe_line(divergence.baseline)!r}")
    gap = "" if divergence.gap is None else f", top-two gap {divergence.gap:.4g}"
    if comparison.promised:
        return f"DIFFERENT {where}{gap}: lossless decoding is broken"
    return f"left the plain path {where}{gap} (a near-tie these kernels may round either way)"


def token_texts(run: TimedRun) -> list[str]:
    return [piece for step in run.reply.steps
            for piece in (step.pieces if len(step.pieces) == len(step.token_ids) else map(str, step.token_ids))]


def margins_of(run: TimedRun) -> list[float] | None:
    steps = run.reply.steps
    if not steps or any(len(step.margins) != len(step.token_ids) for step in steps):
        return None
    return [margin for step in steps for margin in step.margins]


@dataclass
class Comparison:
    runs: list[TimedRun]  # in the order they ran
    temperature: float
    auto_k: bool = False  # the speculative path chose k step by step (adaptive k), from its k
    promised: bool = False  # the engine's kernels guarantee identity at T = 0 (greedy_identical)

    def of(self, path: str) -> list[TimedRun]:
        return [run for run in self.runs if run.path == path]

    def finished_of(self, path: str) -> list[TimedRun]:
        """The runs of `path` that the statistics below are computed from."""
        return [run for run in self.of(path) if run.finished]

    @property
    def finished_runs(self) -> list[TimedRun]:
        return [run for run in self.runs if run.finished]

    @property
    def cancelled(self) -> bool:
        return any(run.cancelled for run in self.runs)

    def median_tokens_per_s(self, path: str) -> float | None:
        return median_or_none(run.tokens_per_s for run in self.finished_of(path))

    @property
    def speculative_tokens_per_s(self) -> float | None:
        return self.median_tokens_per_s("speculative")

    @property
    def baseline_tokens_per_s(self) -> float | None:
        return self.median_tokens_per_s("baseline")

    def rounds(self) -> list[tuple[TimedRun, TimedRun]]:
        """(speculative, baseline) pairs of finished runs that ran one right after the other (a
        round), in the order they ran. A run whose partner was cancelled pairs with nothing."""
        pairs: list[tuple[TimedRun, TimedRun]] = []
        waiting: TimedRun | None = None
        for run in self.runs:
            if not run.finished:
                waiting = None
            elif waiting is not None and waiting.path != run.path:
                pairs.append((waiting, run) if waiting.path == "speculative" else (run, waiting))
                waiting = None
            else:
                waiting = run
        return pairs

    @property
    def speedup(self) -> float | None:
        """Decode speed, speculative over baseline: the median over rounds of each round's
        ratio (measure.speed.paired_ratio, the rule `spectui bench` divides by)."""
        pairs = self.rounds()
        return paired_ratio(
            [spec.reply.decode_tokens_per_s for spec, _ in pairs], [base.reply.decode_tokens_per_s for _, base in pairs]
        )

    @property
    def tokens_per_forward(self) -> float | None:
        """Speculative tokens per target forward, pooled over the speculative runs: each forward
        yields the target's own token plus the drafts it accepted. The target's token counts
        when it is the stop token the reply leaves out (plain decoding reads 1.0, not 32/33)."""
        steps = [step for run in self.finished_of("speculative") for step in run.reply.steps]
        return summarize(steps, 0.0).tokens_per_forward

    @property
    def identical(self) -> bool | None:
        """At T = 0 lossless decoding makes every run the same; at T > 0 it need not be."""
        runs = self.finished_runs
        if self.temperature > 0 or not runs:
            return None
        reference = runs[0].reply.token_ids
        return all(run.reply.token_ids == reference for run in runs[1:])

    @property
    def difference(self) -> int | None:
        """First differing token position (T = 0 only), speculative against baseline first."""
        if self.identical is not False:
            return None
        pairs = itertools.chain(
            itertools.product(self.finished_of("speculative"), self.finished_of("baseline")),
            # Both paths may agree with each other while one run of a path differs.
            itertools.combinations(self.finished_runs, 2),
        )
        for run_a, run_b in pairs:
            position = first_difference(run_a.reply.token_ids, run_b.reply.token_ids)
            if position is not None:
                return position
        return None

    def divergence(self) -> Divergence | None:
        """The first speculative run against the first baseline run: where they part, if they do."""
        speculative, baseline = self.finished_of("speculative"), self.finished_of("baseline")
        if self.temperature > 0 or not speculative or not baseline:
            return None
        spec_run, base_run = speculative[0], baseline[0]
        position = first_difference(spec_run.reply.token_ids, base_run.reply.token_ids)
        if position is None:
            return None
        spec_texts, base_texts, margins = token_texts(spec_run), token_texts(base_run), margins_of(base_run)
        return Divergence(
            position,
            spec_texts[position] if position < len(spec_texts) else "(end)",
            base_texts[position] if position < len(base_texts) else "(end)",
            margins[position] if margins is not None and position < len(margins) else None,
        )

    def median_run(self, path: str) -> TimedRun | None:
        """The run whose speed is the (lower) median of its path: the one to show in detail."""
        timed = [(speed, run) for run in self.finished_of(path) if (speed := run.tokens_per_s) is not None]
        if not timed:
            return None
        middle = statistics.median_low(speed for speed, _ in timed)
        return next(run for speed, run in timed if speed == middle)

    def overlapping(self) -> bool:
        """True if any two runs' [started, ended] intervals intersect (must never happen)."""
        # Sorted by start, any overlap shows between neighbours. Sharing an endpoint is not
        # overlap (one run ended as the next began): coarse clocks return equal readings.
        ordered = sorted(self.runs, key=lambda run: run.started)
        return any(later.started < earlier.ended for earlier, later in zip(ordered, ordered[1:]))

    def as_dict(self, engine: Engine, k: int | None, baseline: Engine | None = None) -> dict:
        return {
            "speculative": self._path_dict("speculative", engine, k),
            "baseline": self._path_dict("baseline", baseline or engine, 0),
            "tokens_per_s_median": {path: self.median_tokens_per_s(path) for path in PATHS},
            "auto_k": self.auto_k,
            "speedup": self.speedup,
            "identical": self.identical,
            "first_difference": self.difference,
            "tokens_per_forward": self.tokens_per_forward,
            "runs": min(len(self.finished_of(path)) for path in PATHS),
            "timeline": self.timeline(),
        }

    def _path_dict(self, path: str, engine: Engine, k: int | None) -> dict | None:
        """The lower-median run's reply in generate --json's shape (its wall speed is in its
        stats); the speedup pairs the rounds of the timeline, so no one run's speed is it."""
        run = self.median_run(path)
        return None if run is None else reply_json(run.reply, engine, k)

    def timeline(self) -> list[dict]:
        """Every run, times in seconds since the first run started (clock values are arbitrary)."""
        origin = min((run.started for run in self.runs), default=0.0)
        return [
            {
                "path": run.path,
                "index": run.index,
                "started": run.started - origin,
                "ended": run.ended - origin,
                "tokens": run.num_tokens,
                "wall_seconds": run.wall_seconds,
                "tokens_per_s": run.tokens_per_s,
                "decode_tokens_per_s": run.reply.decode_tokens_per_s,
                "finish_reason": run.finish_reason,
            }
            for run in self.runs
        ]


def timed_run(
    engine: Engine,
    messages: Sequence[Message],
    params: GenerationParams,
    path: str,
    index: int,
    k: int,
    control: Control,
    on_step: Callable[[str, Step], None] | None = None,
    clock: Clock = time.monotonic,
) -> TimedRun:
    """One reply of `path`, timed by run_reply."""
    report = None if on_step is None else (lambda step, _reply: on_step(path, step))
    return TimedRun(path, index, run_reply(engine, messages, params, control, report, clock), k)


def k_for(path: str, k: int) -> int:
    if path not in PATHS:
        raise ValueError(f"path must be one of {PATHS}, got {path!r}")
    return k if path == "speculative" else 0


def run_pair(
    engine: Engine,
    messages: Sequence[Message],
    params: GenerationParams,
    k: int,
    temperature: float,
    *,
    order: Sequence[str],
    baseline: Engine | None = None,
    on_step: Callable[[str, Step], None] | None = None,
    on_run: Callable[[TimedRun], object] | None = None,
    control_factory: ControlFactory | None = None,
    clock: Clock = time.monotonic,
    start_index: dict | None = None,
    auto: bool = False,
) -> list[TimedRun]:
    """Run the paths in `order` one after another (never overlapping), each with a fresh Control(k or 0, temperature); same params (so same seed) for both. on_step(path, step) for every Step, on_run(TimedRun) when a run ends. control_factory(path, k, temperature) -> Control lets a UI keep the Control to cancel it; if a run is cancelled (Done.finish_reason == 'cancelled') stop and return what ran.

    `baseline`: a second engine for the k = 0 path, for engines whose k is fixed when they
    start (vLLM: the baseline is an engine without a speculative_config)."""
    make_control = control_factory or speculative_control(auto)
    next_index = dict(start_index or {})
    runs: list[TimedRun] = []
    for path in order:
        path_k = k_for(path, k)
        control = make_control(path, path_k, temperature)
        index = next_index.get(path, 0)
        next_index[path] = index + 1
        path_engine = baseline if path == "baseline" and baseline is not None else engine
        run = timed_run(path_engine, messages, params, path, index, path_k, control, on_step, clock)
        runs.append(run)
        if on_run is not None:
            on_run(run)
        if run.cancelled:
            break
    return runs


def speculative_control(auto: bool) -> ControlFactory:
    """Controls as the chat makes them: adaptive k (`auto`) on the speculative path only."""
    return lambda path, k, temperature: Control(k, temperature, auto=auto and path == "speculative")


def alternating_order(round_index: int) -> tuple[str, str]:
    """("speculative","baseline") on even rounds, reversed on odd ones: neither path always runs first (cache warmth, thermal state)."""
    return PATHS if round_index % 2 == 0 else (PATHS[1], PATHS[0])


def warm_up(
    engine: Engine,
    messages: Sequence[Message],
    params: GenerationParams,
    k: int,
    temperature: float,
    control_factory: ControlFactory | None = None,
    baseline: Engine | None = None,
    auto: bool = False,
) -> bool:
    """A short, uncounted run of each path; False if it was cancelled.

    An engine keeps the prompt's KV cache between replies (the embedded engine does, as
    does vLLM's prefix cache), and the process's first forward pays one-off costs. Without
    this only the very first measured run would pay both. k + 2 tokens is the shortest
    reply with one drafting step, so the draft model warms up too.
    """
    short = replace(params, max_tokens=min(params.max_tokens, k + 2))
    ran = run_pair(engine, messages, short, k, temperature, order=PATHS, control_factory=control_factory,
                   baseline=baseline, auto=auto)
    return not any(run.cancelled for run in ran)


def compare(
    engine: Engine,
    messages: Sequence[Message],
    params: GenerationParams,
    k: int,
    temperature: float,
    runs: int,
    *,
    warmup: bool = False,
    auto: bool = False,
    **kwargs: Any,
) -> Comparison:
    """`runs` rounds of run_pair with alternating_order(round).

    kwargs go to run_pair (on_step, on_run, control_factory, clock, baseline). A cancelled run ends
    the comparison early; the Comparison then holds what ran, the cancelled run included.
    warmup=True runs `warm_up` first; its runs are not part of the Comparison.
    """
    if runs < 1:
        raise ValueError(f"runs must be >= 1, got {runs}")
    comparison = Comparison([], temperature, auto, engine.capabilities.greedy_identical)
    if warmup and not warm_up(engine, messages, params, k, temperature, kwargs.get("control_factory"),
                              kwargs.get("baseline"), auto):
        return comparison
    for round_index in range(runs):
        start_index = {path: len(comparison.of(path)) for path in PATHS}
        ran = run_pair(
            engine, messages, params, k, temperature,
            order=alternating_order(round_index), start_index=start_index, auto=auto, **kwargs,
        )
        comparison.runs.extend(ran)
        if any(run.cancelled for run in ran):
            break
    return comparison


@dataclass(frozen=True)
class SweepPoint:
    k: int
    tokens_per_s: float | None  # wall clock
    gamma: float | None  # draft acceptance rate; None at k = 0 (nothing drafted)
    tokens: int
    num_forwards: int


def sweep_k(
    engine: Engine,
    messages: Sequence[Message],
    params: GenerationParams,
    temperature: float,
    ks: Iterable[int] = range(0, 9),
    on_point: Callable[[SweepPoint], object] | None = None,
    clock: Clock = time.monotonic,
    should_stop: Callable[[], bool] = lambda: False,
    control_factory: ControlFactory | None = None,
) -> list[SweepPoint]:
    """One run per k (k=0 is the baseline), in order; on_point(point) after each.

    should_stop() is asked before each run; control_factory (as in run_pair) lets a UI
    cancel the run in flight, which ends the sweep without a point for that k.
    """
    make_control = control_factory or (lambda path, k, temperature: Control(k, temperature))
    points: list[SweepPoint] = []
    for k in ks:
        if should_stop():
            break
        path = "speculative" if k > 0 else "baseline"
        control = make_control(path, k, temperature)
        run = timed_run(engine, messages, params, path, len(points), k, control, clock=clock)
        if run.cancelled:
            break
        point = SweepPoint(
            k=k,
            tokens_per_s=run.tokens_per_s,
            gamma=run.reply.stats.gamma if k > 0 else None,
            tokens=run.num_tokens,
            num_forwards=run.num_forwards,
        )
        points.append(point)
        if on_point is not None:
            on_point(point)
    return points


def best_k(points: Iterable[SweepPoint]) -> SweepPoint | None:
    """The point with the highest wall-clock tokens/s."""
    timed = [(speed, point) for point in points if (speed := point.tokens_per_s) is not None]
    return max(timed, key=lambda pair: pair[0])[1] if timed else None
