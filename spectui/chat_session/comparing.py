"""The compare view's state without Textual: what it runs (the engine, its method, k, adaptive
k, T), the runs so far (a Comparison) and the k sweep's points, whether work is under way, and
what a key does to them. A change of k, T or method starts a new comparison (a new
`generation`: results of the old one that still arrive are dropped), and never while a run is
in flight: the view cancels it and runs again once it stopped (`rerun_when_idle`).
The compare view (spectui.tui.screens.compare) shows it and runs the work.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spectui.core.engine import AUTO, K
from spectui.core.errors import one_line
from spectui.core.events import K_MAX, TEMPERATURE_MAX, TEMPERATURE_STEP, GenerationParams, Message
from spectui.measure.compare import PATHS, Comparison, SweepPoint, TimedRun

if TYPE_CHECKING:
    from spectui.host.host import EngineHost

SWEEP_KS = range(0, 9)


class CompareSession:
    """host: the chat's engine host, whose ready engine the view compares; messages: the prompt;
    params: fixed for every run. engine: the one that runs (base_engine's, or another method's)."""

    def __init__(self, host: EngineHost, messages: list[Message], params: GenerationParams) -> None:
        engine = host.engine
        assert engine is not None, "the chat opens the compare view on a ready engine (chat_dialogs.open_compare)"
        self.host, self.messages, self.params = host, messages, params
        self.base_engine = self.engine = engine
        self.method = engine.info.method
        self.fixed_k = not engine.capabilities.live(K)
        # the speculative side drafts, or there is nothing to compare; a fixed k is the engine's
        self.k = (engine.fixed_k or host.live.k) if self.fixed_k else max(1, host.live.k)
        # compare runs what the chat runs: adaptive k, where the bar says "k auto", from k
        self.auto = host.live.auto and engine.capabilities.live(AUTO)
        self.temperature = host.live.temperature
        self.promised = engine.capabilities.greedy_identical
        self.comparison = Comparison([], self.temperature, self.auto, self.promised)
        self.sweep_points: list[SweepPoint] = []
        self.generation = 0  # bumped whenever settings change: stale results are dropped
        self.busy, self.busy_with = False, ""
        self.rerun_when_idle = False

    @property
    def k_label(self) -> str:
        if self.host.k_from_engine and self.engine.fixed_k is None:
            return "k not reported by the server"  # it runs its own k and does not say which
        return f"k auto (from {self.k})" if self.auto else f"k = {self.k}"

    def start(self, what: str) -> int:
        """Work begins (`what` the head says); returns the generation its results belong to."""
        self.busy, self.busy_with = True, what
        return self.generation

    def done_so_far(self) -> dict[str, int]:
        """The runs of each path in this comparison: the next round numbers on from them."""
        return {path: len(self.comparison.of(path)) for path in PATHS}

    # what the keys change

    def settings_changed(self) -> bool:
        """New k, T or method: the runs made with the old settings are forgotten. True when work
        is in flight, to be cancelled first: the new runs start once it stopped."""
        self.generation += 1
        self.comparison = Comparison([], self.temperature, self.auto, self.promised)
        if self.busy:
            self.rerun_when_idle = True
        return self.busy

    def step_k(self, delta: int) -> str | None:
        """k by `delta`, within 1..K_MAX (a k chosen by hand ends adaptive k, as in the chat);
        the line that says why not, or None when k changed."""
        if self.fixed_k:
            return f"k = {self.k} is fixed while the {self.engine.info.name} engine runs: change it in the chat (it restarts the engine)."
        new_k = min(max(self.k + delta, 1), K_MAX)
        if new_k == self.k:
            return f"k stays within 1..{K_MAX} here (the baseline is k = 0)"
        self.k, self.auto = new_k, False
        return None

    def step_temperature(self, direction: int) -> bool:
        """T a step up or down within 0..TEMPERATURE_MAX; False when it stays."""
        new_t = round(min(max(self.temperature + direction * TEMPERATURE_STEP, 0.0), TEMPERATURE_MAX), 2)
        changed, self.temperature = new_t != self.temperature, new_t
        return changed

    def cannot_swap_method(self) -> str | None:
        """Why this engine cannot change its method here, if it cannot."""
        if not self.base_engine.capabilities.method_switch:
            return f"The {self.engine.info.name} engine cannot change its method here."
        return None

    def swap_method(self) -> str | None:
        """The other of draft and ngram (cannot_swap_method found none); the engine's failure
        to build it in one line, or None when it changed."""
        other = "ngram" if self.method == "draft" else "draft"
        try:
            self.engine = self.base_engine.with_method(other)
        except Exception as error:
            return one_line(error)
        self.method = other
        return None

    # what the work hands back

    def run_ended(self, generation: int, run: TimedRun) -> bool:
        """A run of `generation` ended; False when it belonged to an older comparison."""
        if generation != self.generation:
            return False
        self.comparison.runs.append(run)
        return True

    def sweep_started(self) -> None:
        self.sweep_points = []

    def sweep_point(self, generation: int, point: SweepPoint) -> bool:
        if generation != self.generation:
            return False
        self.sweep_points.append(point)
        return True

    @property
    def sweep_left(self) -> int:
        return len(SWEEP_KS) - len(self.sweep_points)

    def work_ended(self, generation: int, error: str | None) -> tuple[str | None, bool]:
        """The work stopped: the failure to show (only this comparison's), and whether to run
        again now (the settings changed while it ran)."""
        self.busy, self.busy_with = False, ""
        rerun, self.rerun_when_idle = self.rerun_when_idle, False
        return (error if generation == self.generation else None), rerun

