"""EngineHost: the chat's engine from load to close, outside any UI.

    host = EngineHost(plan_for(config, models), LiveSettings.from_config(config))
    host.start()              # the load begins in a thread, before any UI exists
    host.listen(tell)         # tell(HostMessage), on the owner's thread
    host.attach(wake, set_timer)

Threads never touch the host's state: the loader and the work threads hand what happened
to `pump`, which the owner's thread runs once `wake()` asks it to (the app's loop; a test).
An engine that fixes k when it starts is rebuilt for a new k: key presses settle first
(`set_timer`), what holds the engine (a reply, the compare view) ends first, and the old
engine is closed before the new one loads (a GPU holds one). `swap(plan, what)` replaces
the engine with another one (model, draft, method, engine) the same way.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Callable

from spectui.core.engine import K, Capabilities, Engine, EngineInfo
from spectui.core.events import Control
from spectui.host.baseline import Baseline
from spectui.host.live import LiveSettings, LiveValues
from spectui.host.live_keys import LiveKeys
from spectui.host.loading import LoadFailed, Loaded, load
from spectui.host.memory import engine_memory
from spectui.host.messages import (
    EngineFailed, EngineReady, HostMessage, LiveChanged, LoadProgress, Notice, RestartPlanned, RestartStarted,
    SwapPlanned,
)
from spectui.host.plan import EnginePlan
from spectui.host.switch import Fallback, fallback_for
from spectui.host.uses import Released, Use, Uses, start_thread

RESTART_DEBOUNCE_S = 0.7  # F6 F6 F6 is one restart with k + 3, not three
ENGINE_LABELS = {"vllm": "vLLM"}
SetTimer = Callable[[float, Callable[[], None]], object]  # returns a timer with stop()


class EngineHost:
    def __init__(
        self,
        plan: EnginePlan,
        live: LiveSettings,
        *,
        clock: Callable[[], float] = time.monotonic,
        memory_probe=None,
        debounce_s: float = RESTART_DEBOUNCE_S,
        set_timer: SetTimer | None = None,
    ) -> None:
        self.plan, self.live, self.clock = plan, live, clock
        self.memory_probe = memory_probe
        self.debounce_s = debounce_s
        self.engine: Engine | None = None
        self.info: EngineInfo | None = None  # the last ready engine's: shown while it restarts
        self.capabilities: Capabilities | None = None  # the last ready engine's
        self.status = "loading"  # loading, ready, failed
        self.error = ""
        self.loading_detail = ""
        self.loading_since: float | None = None
        self.load_seconds: float | None = None
        self.engine_k = live.k  # the k the engine was built with
        self.wanted_k: int | None = None  # a k waiting for its restart
        self.restarting_k: int | None = None  # the k a restart in flight builds with
        self.wanted_swap: tuple[EnginePlan, str] | None = None  # another engine waiting to replace this one
        self.swapping_to: str | None = None  # what a swap in flight builds
        self.fallback: Fallback | None = None  # what a swap in flight falls back on if it fails
        self.restart_failed = False
        self.keys = LiveKeys(self)
        self.uses = Uses(self._arrive, self.restart_if_wanted)
        self.baseline = Baseline(plan.build_baseline)
        self._listeners: list[Callable[[HostMessage], None]] = []
        self._arrivals: queue.SimpleQueue = queue.SimpleQueue()
        self._wake: Callable[[], None] | None = None
        self._set_timer = set_timer
        self._timer = None
        self._started = False
        live.watch(self._live_changed)

    # wiring

    def start(self) -> None:
        """Begin loading the engine (once)."""
        if not self._started:
            self._started = True
            self.loading_since = self.clock()
            start_thread(lambda: load(self.plan.build, self._arrive, self.clock), "spectui-load")

    def listen(self, listener: Callable[[HostMessage], None]) -> Callable[[], None]:
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def attach(self, wake: Callable[[], None], set_timer: SetTimer | None = None) -> None:
        """wake(), from any thread, must lead to pump() on the owner's thread; set_timer
        (delay, callback) runs callback there after delay, unless the host was given its own."""
        self._wake = wake
        self._set_timer = self._set_timer or set_timer
        self.pump()

    def pump(self) -> None:
        """Apply what the threads handed over; on the owner's thread."""
        while True:
            try:
                arrived = self._arrivals.get_nowait()
            except queue.Empty:
                return
            if isinstance(arrived, LoadProgress):
                self.loading_detail = arrived.text
                self._tell(arrived)
            elif isinstance(arrived, Loaded):
                self._ready(arrived.engine, arrived.seconds)
            elif isinstance(arrived, LoadFailed):
                self._failed(arrived.error)
            elif isinstance(arrived, Released):
                arrived.use.release()

    def _arrive(self, item) -> None:
        self._arrivals.put(item)
        wake = self._wake
        if wake is not None:
            wake()

    def _tell(self, message: HostMessage) -> None:
        for listener in list(self._listeners):
            listener(message)

    def notice(self, text: str, severity: str = "information", timeout: float | None = None) -> None:
        self._tell(Notice(text, severity, timeout))

    # state

    @property
    def label(self) -> str:
        return ENGINE_LABELS.get(self.info.name, self.info.name) if self.info is not None else "the engine"

    @property
    def loading_text(self) -> str:
        """The load's stage and its seconds so far: some stages have no percentage to move."""
        if self.loading_since is None:
            return self.loading_detail
        elapsed = f"{self.clock() - self.loading_since:.0f} s"
        return f"{self.loading_detail} · {elapsed}" if self.loading_detail else elapsed

    @property
    def k_restarts_engine(self) -> bool:
        """A k change rebuilds the engine (it took k when it started) rather than reaching it."""
        return self.plan.build_for_k is not None and self.capabilities is not None and self.capabilities.restart_for_k

    @property
    def k_fixed_elsewhere(self) -> bool:
        """k was fixed when the engine started and no rebuild here can change it (a server's)."""
        return self.capabilities is not None and self.capabilities.restart_for_k and self.plan.build_for_k is None

    @property
    def k_from_engine(self) -> bool:
        """k is the engine's own (a server's): no key or request sets it, the bar shows what it reports."""
        return self.capabilities is not None and not self.capabilities.honours(K)

    @property
    def reported_k(self) -> int | None:
        """The k an engine that sets its own k says it runs (None: not said)."""
        return self.engine.fixed_k if self.engine is not None else None

    def read_memory(self, engine_stats: dict | None = None):
        engine = self.engine
        return engine_memory(engine, self.capabilities if engine is not None else None, self.memory_probe, engine_stats or {})

    # loading

    def _ready(self, engine, seconds: float) -> None:
        restarted_k, self.restarting_k = self.restarting_k, None
        swapped_to, self.swapping_to = self.swapping_to, None
        self.fallback = None  # the loader closed an engine it kept open, once the new one was built
        self.engine, self.info, self.capabilities = engine, engine.info, engine.info.capabilities
        self.status, self.restart_failed, self.load_seconds, self.loading_detail = "ready", False, seconds, ""
        if restarted_k is not None:
            self.engine_k = restarted_k
        own_k = engine.fixed_k
        if self.k_fixed_elsewhere and own_k is not None:
            self.engine_k = own_k
            self.live.update(k=own_k)  # a server's k is its own: show that one
        note = None
        if restarted_k is not None:
            pinned = f" (it runs k = {own_k}, as its speculative config says)" if own_k not in (None, restarted_k) else ""
            note = f"{self.label} restarted with k = {restarted_k} in {seconds:.1f} s{pinned}; the conversation goes on."
        elif swapped_to is not None:
            note = f"Switched to {swapped_to} in {seconds:.1f} s; the conversation goes on."
        self._tell(EngineReady(engine, seconds, note, swapped_to))
        if self.wanted_swap is not None:
            self.restart_if_wanted()  # chosen while it loaded
        elif self.k_restarts_engine and self.live.k != self.engine_k:
            self._want_k(self.live.k)  # pressed while it loaded

    def _failed(self, error: str) -> None:
        restarted_k, self.restarting_k = self.restarting_k, None
        swapped_to, self.swapping_to = self.swapping_to, None
        fallback, self.fallback = self.fallback, None
        if swapped_to is not None and fallback is not None:
            self._fall_back(fallback, swapped_to, error)
            return
        self.status, self.error, self.restart_failed = "failed", error, restarted_k is not None
        if swapped_to is not None:
            text, retry = f"Could not switch to {swapped_to}: {error}", "the model screen can try another"
        elif restarted_k is not None:
            text, retry = f"Could not restart {self.label} with k = {restarted_k}: {error}", "press a k key to try again"
        else:
            text, retry = f"Could not load the engine: {error}", None
        self._tell(EngineFailed(error, f"{text} · {retry}" if retry else None))
        self.notice(text, "error", 10)
        if self.wanted_swap is not None:
            self.restart_if_wanted()  # chosen while it loaded

    def _fall_back(self, fallback: Fallback, swapped_to: str, error: str) -> None:
        """A switch failed: the engine before goes on if it stayed open, else it loads again."""
        text = f"Could not switch to {swapped_to}: {error}"
        if fallback.engine is not None:
            self.engine, self.plan, self.baseline = fallback.engine, fallback.plan, fallback.baseline
            self.engine_k, self.status, self.error = fallback.engine_k, "ready", ""
            note = f"{text} · {fallback.what} goes on; the model screen can try another"
        else:
            self.status, self.error = "failed", error
            self.wanted_swap = (fallback.plan, fallback.what)
            note = f"{text} · loading {fallback.what} again"
        self._tell(EngineFailed(error, note, swap_failed=True))
        self.notice(text, "error", 10)
        self.restart_if_wanted()

    # k restarts

    def _live_changed(self, before: LiveValues, after: LiveValues) -> None:
        for name in ("k", "temperature"):
            value = getattr(after, name)
            if value == getattr(before, name):
                continue
            if name == "k" and self.k_restarts_engine:
                self._want_k(value)
            elif self.uses.replying and self.capabilities is not None and not self.capabilities.live(name):
                shown = f"{value:.2f}" if name == "temperature" else value
                self.notice(f"The {self.info.name} engine cannot change {name} during a reply: "
                            f"{name} = {shown} applies from the next reply.")
        self._tell(LiveChanged(after))

    def _want_k(self, k: int) -> None:
        """Restart the engine with k once the key presses settle."""
        self.wanted_k = k
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        self._tell(RestartPlanned(k))
        if self._set_timer is None:
            self.restart_if_wanted()
        else:
            self._timer = self._set_timer(self.debounce_s, self._debounce_elapsed)

    def _debounce_elapsed(self) -> None:
        self._timer = None
        self.restart_if_wanted()

    def restart_if_wanted(self) -> None:
        """Start the wanted restart if nothing holds the engine; called again when that ends."""
        if self.wanted_swap is not None:
            self._swap_if_free()
            return
        k = self.wanted_k
        if k is None or self._timer is not None or self.status == "loading":
            return  # nothing wanted, keys still settling, or a load in flight (ready looks again)
        if self.engine is not None and k == self.engine_k:
            self.wanted_k = None
            self._tell(RestartPlanned(None))
        elif not self.uses:
            self.wanted_k = None
            old_engine, self.engine = self.engine, None
            self.status, self.restarting_k, self.loading_detail = "loading", k, ""
            self.loading_since = self.clock()
            self._tell(RestartStarted(k, f"Restarting {self.label} with k = {k}: the conversation stays…"))
            build = self.plan.build_for_k(k)
            start_thread(lambda: load(build, self._arrive, self.clock, (old_engine,)), "spectui-load")

    # another engine

    def swap(self, plan: EnginePlan, what: str) -> None:
        """Replace the engine with `plan`'s (built with the live k), once nothing holds this
        one and a load in flight has ended; `what` names it in the notes."""
        self.drop_restart()  # the new engine takes the live k: no k restart of the old one
        self.wanted_swap = (plan, what)
        self._tell(SwapPlanned(what))
        self.restart_if_wanted()

    def _swap_if_free(self) -> None:
        if self.uses or self.status == "loading":
            return  # a reply or the compare view holds the engine, or a load is in flight: they look again
        (plan, what), self.wanted_swap = self.wanted_swap, None
        self.fallback = fallback_for(self.engine, self.plan, self.baseline, self.engine_k)
        # The compare view's baseline is built again when asked for: it never waits for the switch.
        kept = (self.engine,) if self.fallback is not None and self.fallback.engine is not None else ()
        closed_first = (self.baseline.take(),) + (() if kept else (self.engine,))
        self.engine, self.plan, self.baseline = None, plan, Baseline(plan.build_baseline)
        self.status, self.swapping_to, self.loading_detail = "loading", what, ""
        self.loading_since, self.engine_k = self.clock(), self.live.k
        self._tell(RestartStarted(None, f"Switching to {what}: the conversation stays…"))
        build = plan.build_for_k(self.live.k) if plan.build_for_k is not None else plan.build
        start_thread(lambda: load(build, self._arrive, self.clock, closed_first, kept), "spectui-load")

    # replies and the compare view

    def start_reply(self, name: str, run: Callable[[object, Control], None], values: LiveValues | None = None) -> Control:
        """run(engine, control) in a thread named `name`; the control starts from `values`
        (default: the live ones) and follows the live settings' changes when the engine reads
        them between steps. Returns it, to cancel the reply."""
        engine, control = self.engine, self.live.control(values)
        use = self.uses.start_work(name, lambda: run(engine, control), control.cancel, reply=True)
        if self.capabilities.live_controls:  # any of them: the live ones are followed
            use.after.append(self.live.follow(control))
        return control

    def hold(self, name: str, stop: Callable[[], None] | None = None) -> Use:
        return self.uses.hold(name, stop)

    def start_work(self, name: str, body: Callable[[], None], stop: Callable[[], None] | None = None) -> Use:
        return self.uses.start_work(name, body, stop)

    def baseline_engine(self):
        """The compare view's k = 0 engine, where this one fixes k: built once, in the caller's thread."""
        return self.baseline.engine(self.info.name)

    def close_baseline(self) -> None:
        self.baseline.close_after(self.uses.threads())

    def drop_restart(self) -> None:
        """No restart from now on (quitting: what holds the engine lets go as it leaves)."""
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        self.wanted_k, self.wanted_swap = None, None

    def close(self, timeout: float = 15.0) -> bool:
        """Stop what holds the engine, wait for its threads (`timeout` in all), close the
        engines. False, with the engines left open, if a thread still runs."""
        self.drop_restart()
        if not self.uses.stop_and_wait(timeout):
            return False
        engines, self.engine = (self.engine, self.baseline.take()), None
        fallback, self.fallback = self.fallback, None
        if fallback is not None and fallback.engine is not None:  # quitting while a switch loads
            engines += (fallback.engine,)
        for engine in engines:
            if engine is not None:
                try:
                    engine.close()
                except Exception:
                    pass  # quitting: nothing useful to do with a failing close
        return True
