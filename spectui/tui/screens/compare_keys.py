"""What the compare view's keys do: k, temperature and the method (each starts a new
comparison, the runs in flight cancelled first), cancel and close. The compare view
(spectui.tui.screens.compare) builds the parts declared here, runs the work and shows it.
"""

from __future__ import annotations

from collections.abc import Callable

from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Static

from spectui.core.engine import Engine
from spectui.core.errors import one_line
from spectui.core.events import K_MAX, TEMPERATURE_MAX, TEMPERATURE_STEP
from spectui.measure.compare import Comparison
from spectui.tui.compare.pane import ComparePane
from spectui.tui.compare.work import CompareWork
from spectui.tui.keys import compare_bindings


class CompareKeys(Screen):
    """The keys' half of the compare view: the parts below are the view's (built in its __init__)."""

    BINDINGS = [*compare_bindings(), Binding("q", "close", "close", show=False)]
    engine: Engine
    base_engine: Engine
    method: str
    fixed_k: bool
    k: int
    auto: bool
    temperature: float
    promised: bool
    comparison: Comparison
    generation: int
    busy: bool
    rerun_when_idle: bool
    work: CompareWork
    panes: dict[str, ComparePane]
    sweep: Static
    refresh_result: Callable[[], None]
    refresh_head: Callable[[], None]
    action_rerun: Callable[[], None]

    def _settings_changed(self) -> None:
        """New k, T or method: forget the runs made with the old settings and run again,
        once the work in flight (cancelled) has stopped: runs must never overlap."""
        self.generation += 1
        self.comparison = Comparison([], self.temperature, self.auto, self.promised)
        self.sweep.remove_class("-shown")
        for path, pane in self.panes.items():
            pane.end_run("waiting for its turn")
        self.refresh_result()
        self.refresh_head()
        if self.busy:
            self._cancel()
            self.rerun_when_idle = True
        else:
            self.action_rerun()

    def _cancel(self) -> None:
        self.work.cancel()

    def stop_work(self) -> None:
        """Quitting: no new run starts, the one in flight ends after its step."""
        self.rerun_when_idle = False
        self._cancel()

    def action_k(self, delta: int) -> None:
        if self.fixed_k:
            self.notify(f"k = {self.k} is fixed while the {self.engine.info.name} engine runs: change it in the chat (it restarts the engine).")
            return
        new_k = min(max(self.k + delta, 1), K_MAX)
        if new_k == self.k:
            self.notify(f"k stays within 1..{K_MAX} here (the baseline is k = 0)")
            return
        self.k, self.auto = new_k, False  # a k chosen by hand ends adaptive k, as in the chat
        self._settings_changed()

    def action_temperature(self, direction: int) -> None:
        new_t = round(min(max(self.temperature + direction * TEMPERATURE_STEP, 0.0), TEMPERATURE_MAX), 2)
        if new_t == self.temperature:
            return
        self.temperature = new_t
        self._settings_changed()

    def action_swap_method(self) -> None:
        other = "ngram" if self.method == "draft" else "draft"
        if not self.base_engine.capabilities.method_switch:
            self.notify(f"The {self.engine.info.name} engine cannot change its method here.")
            return
        try:
            self.engine = self.base_engine.with_method(other)
        except Exception as error:
            self.notify(one_line(error), severity="warning")
            return
        self.method = other
        self._settings_changed()

    def action_cancel(self) -> None:
        if self.busy:
            self._cancel()
            self.notify("Cancelling after the step in flight.")
        else:
            self.action_close()

    def action_close(self) -> None:
        self._cancel()
        self.app.pop_screen()

    action_compare = action_close  # the key that opened the view closes it
