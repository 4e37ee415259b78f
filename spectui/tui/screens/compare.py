"""Compare view: the same prompt, speculative and baseline (k = 0), side by side.

Runs go through spectui.measure.compare, one after the other on the one engine (never at the same
time: they would slow each other down), alternating which path goes first. Each pane shows
the latest run of its path as it streams; the result line shows medians over every run
with the current settings, so the speedup is computed from exactly the runs shown.
A change of k, temperature or method starts a new comparison: older runs used other
settings and would skew the medians.

An engine that fixes k when it starts (vLLM, a server) cannot run its own baseline: the
engine host then starts a second engine without speculation, once, and closes it with the
view. The view holds the chat's engine while it is open (a k restart waits for it).
What it runs and what came of it is its CompareSession (spectui.chat_session.comparing, no
Textual); this screen runs the work and shows it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.content import Content
from textual.message import Message as TextualMessage
from textual.widgets import Static

from spectui.chat_session.comparing import SWEEP_KS, CompareSession
from spectui.core.events import Control, GenerationParams, Message
from spectui.measure.compare import PATHS, SweepPoint, TimedRun, alternating_order, run_pair, sweep_k, warm_up
from spectui.tui.compare.baseline import BaselineSide
from spectui.tui.compare.pane import ComparePane
from spectui.tui.compare.stream import CompareStream
from spectui.tui.compare.work import CompareWork, WorkEnded
from spectui.tui.screens.compare_keys import CompareKeys
from spectui.tui.compare.text import head_text, pane_summary, result_text, sweep_lines
from spectui.tui.widgets.key_footer import KeyFooter

if TYPE_CHECKING:
    from spectui.host.host import EngineHost

class RunEnded(TextualMessage):
    def __init__(self, generation: int, run: TimedRun) -> None:
        super().__init__()
        self.generation = generation
        self.run = run


class SweepPointArrived(TextualMessage):
    def __init__(self, generation: int, point: SweepPoint) -> None:
        super().__init__()
        self.generation = generation
        self.point = point


# The view's layout, kept out of the class so the class reads as behaviour.
COMPARE_CSS = """
    CompareScreen { layout: vertical; }
    CompareScreen > #compare-head { height: auto; padding: 0 1; background: $panel; }
    CompareScreen > #panes { height: 1fr; }
    CompareScreen > #result { height: auto; padding: 0 1; text-style: bold; color: $success; }
    CompareScreen > #result.-problem { color: $error; }
    CompareScreen > #sweep { height: auto; padding: 0 1; display: none; }
    CompareScreen > #sweep.-shown { display: block; }
"""


class CompareScreen(CompareKeys):
    DEFAULT_CSS = COMPARE_CSS

    def __init__(self, host: EngineHost, messages: list[Message], params: GenerationParams,
                 on_speedup: Callable[[float, str], None] | None = None) -> None:
        super().__init__()
        self.host = host
        self.on_speedup = on_speedup  # told the measured speedup as the view closes
        self.state = CompareSession(host, messages, params)
        self.baseline = BaselineSide(host, self.state.fixed_k)  # the second engine, for a fixed k
        self.work = CompareWork(host, self.post_message)
        self.head = Static("", id="compare-head")
        self.panes = {path: ComparePane(path) for path in PATHS}
        self.stream = CompareStream(self, self.panes)
        self.flush = self.stream.flush
        self.result = Static("", id="result")
        self.sweep = Static("", id="sweep")

    def compose(self) -> ComposeResult:
        yield self.head
        with Horizontal(id="panes"):
            yield self.panes["speculative"]
            yield self.panes["baseline"]
        yield self.result
        yield self.sweep
        yield KeyFooter(compact=True)

    def on_mount(self) -> None:
        self.hold = self.host.uses.hold("compare view", stop=self.stop_work)
        self.refresh_head()
        self.action_rerun()

    # what is shown

    def refresh_head(self) -> None:
        state = self.state
        status = f" · {state.busy_with}" if state.busy else ""
        self.head.update(Content(head_text(state.engine.info, state.messages, state.k_label, state.temperature,
                                           state.params.seed, status + self.baseline.note(state.base_engine))))

    def refresh_result(self) -> None:
        text, problem = result_text(self.state.comparison)
        self.result.update(Content(text))
        self.result.set_class(problem, "-problem")

    # work in a thread

    def _start(self, what: str, body: Callable[[int], None]) -> None:
        self.work.start(self.state.start(what), body)
        self.refresh_head()

    def _control_factory(self, start_index: dict[str, int]):
        numbers = dict(start_index)

        def make(path: str, k: int, temperature: float) -> Control:
            control = self._cancellable(path, k, temperature)
            numbers[path] = numbers.get(path, 0) + 1
            self.stream.run_started(path, self.state.k_label if path == "speculative" else "k = 0", numbers[path])
            return control

        return make

    def _cancellable(self, path: str, k: int, temperature: float) -> Control:
        return self.work.cancellable(k, temperature, self.state.auto and path == "speculative")

    def action_rerun(self) -> None:
        state = self.state
        if state.busy:
            self.notify("A run is in progress; Esc cancels it.")
            return
        self.sweep.remove_class("-shown")
        start_index = state.done_so_far()
        order = alternating_order(min(start_index.values()))
        engine, messages, params, k, temperature = state.engine, state.messages, state.params, state.k, state.temperature
        post = self.post_message

        def body(generation: int) -> None:
            baseline = self.baseline.ensure(self.app.call_from_thread, self._set_busy_with, self.refresh_head)
            # The first round of a comparison would otherwise pay one-off costs (caches,
            # first forward of a new k) that the later rounds do not.
            if not any(start_index.values()) and not warm_up(
                engine, messages, params, k, temperature, self._cancellable, baseline=baseline
            ):
                return
            run_pair(
                engine, messages, params, k, temperature, order=order, baseline=baseline,
                on_step=self.stream.on_step,
                on_run=lambda run: post(RunEnded(generation, run)),
                control_factory=self._control_factory(start_index),
                start_index=start_index,
            )

        self._start(f"running {' then '.join(order)}", body)

    def _set_busy_with(self, what: str) -> None:
        self.state.busy_with = what
        self.refresh_head()

    def on_unmount(self) -> None:
        speedup = self.state.comparison.speedup
        if self.on_speedup is not None and speedup is not None:
            self.on_speedup(speedup, self.state.k_label)
        self.stop_work()
        self.baseline.close()
        self.hold.release()

    def action_sweep(self) -> None:
        state = self.state
        if state.fixed_k:
            self.notify("A k sweep needs an engine that changes k between steps (embedded); this one restarts for each k.")
            return
        if state.busy:
            self.notify("A run is in progress; Esc cancels it.")
            return
        state.sweep_started()
        self.sweep.add_class("-shown")
        self.sweep.update(Content("sweeping k = 0..8, one run each…"))
        engine, messages, params, temperature = state.engine, state.messages, state.params, state.temperature
        post = self.post_message

        def body(generation: int) -> None:
            if not warm_up(engine, messages, params, max(SWEEP_KS), temperature, self._cancellable):
                return
            sweep_k(
                engine, messages, params, temperature, ks=SWEEP_KS,
                on_point=lambda point: post(SweepPointArrived(generation, point)),
                should_stop=self.work.stop_requested.is_set, control_factory=self._cancellable,
            )

        self._start("sweeping k", body)

    def on_run_ended(self, message: RunEnded) -> None:
        if message.generation != self.state.generation:
            return
        self.flush()
        run = message.run
        self.state.run_ended(message.generation, run)
        self.panes[run.path].end_run(pane_summary(run.path, run, self.state.comparison))
        self.refresh_result()

    def on_sweep_point_arrived(self, message: SweepPointArrived) -> None:
        state = self.state
        if not state.sweep_point(message.generation, message.point):
            return
        footer = [f"… {state.sweep_left} more k to run"] if state.sweep_left else []
        self.sweep.update(Content("\n".join(["tokens/s by k (one run each)", *sweep_lines(state.sweep_points), *footer])))

    def on_work_ended(self, message: WorkEnded) -> None:
        self.flush()
        self.work.control = None
        failed, rerun = self.state.work_ended(message.generation, message.error)
        if failed:
            self.notify(f"The engine failed: {failed}", severity="error", timeout=8)
        self.refresh_head()
        if rerun:
            self.action_rerun()
