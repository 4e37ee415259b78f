"""What the compare view's keys do: k, temperature and the method (each starts a new
comparison, the runs in flight cancelled first), cancel and close. The state they change is
the view's CompareSession (spectui.chat_session.comparing); the compare view
(spectui.tui.screens.compare) builds the parts declared here, runs the work and shows it.
"""

from __future__ import annotations

from collections.abc import Callable

from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Static

from spectui.chat_session.comparing import CompareSession
from spectui.tui.compare.pane import ComparePane
from spectui.tui.compare.work import CompareWork
from spectui.tui.keys import compare_bindings


class CompareKeys(Screen):
    """The keys' half of the compare view: the parts below are the view's (built in its __init__)."""

    BINDINGS = [*compare_bindings(), Binding("q", "close", "close", show=False)]
    state: CompareSession
    work: CompareWork
    panes: dict[str, ComparePane]
    sweep: Static
    refresh_result: Callable[[], None]
    refresh_head: Callable[[], None]
    action_rerun: Callable[[], None]

    def _settings_changed(self) -> None:
        """New k, T or method: forget the runs made with the old settings and run again,
        once the work in flight (cancelled) has stopped: runs must never overlap."""
        in_flight = self.state.settings_changed()
        self.sweep.remove_class("-shown")
        for pane in self.panes.values():
            pane.end_run("waiting for its turn")
        self.refresh_result()
        self.refresh_head()
        if in_flight:
            self._cancel()
        else:
            self.action_rerun()

    def _cancel(self) -> None:
        self.work.cancel()

    def stop_work(self) -> None:
        """Quitting: no new run starts, the one in flight ends after its step."""
        self.state.rerun_when_idle = False
        self._cancel()

    def action_k(self, delta: int) -> None:
        why_not = self.state.step_k(delta)
        if why_not is not None:
            self.notify(why_not)
        else:
            self._settings_changed()

    def action_temperature(self, direction: int) -> None:
        if self.state.step_temperature(direction):
            self._settings_changed()

    def action_swap_method(self) -> None:
        why_not = self.state.cannot_swap_method()
        if why_not is not None:
            self.notify(why_not)
            return
        failed = self.state.swap_method()
        if failed is not None:
            self.notify(failed, severity="warning")
            return
        self._settings_changed()

    def action_cancel(self) -> None:
        if self.state.busy:
            self._cancel()
            self.notify("Cancelling after the step in flight.")
        else:
            self.action_close()

    def action_close(self) -> None:
        self._cancel()
        self.app.pop_screen()

    action_compare = action_close  # the key that opened the view closes it
