"""EngineHost: the chat's engine from load to close, outside any UI.

    host = EngineHost(plan_for(config, models), live_from_config(config))
    host.start()              # the load begins in a thread, before any UI exists
    host.listen(tell)         # tell(HostMessage), on the owner's thread
    host.attach(wake, set_timer)

Threads never touch the host's state: the loader and the work threads hand what happened
to `pump`, which the owner's thread runs once `wake()` asks it to (the app's loop; a test).
An engine that fixes k when it starts is rebuilt for a new k: key presses settle first
(`set_timer`), what holds the engine (a reply, the compare view) ends first, and the old
engine is closed before the new one loads (a GPU holds one). `swap(plan, what)` replaces
the engine with another one (model, draft, method, engine) the same way.

The host decides which engine runs and when the next one loads (its phases and their moves:
state.py); its collaborators do the rest: the Loader runs a load (loading.py), the live
module says what a key or a change of the live settings does to the engine (live.py),
Uses and Debounce say what a restart waits for (waits.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from spectui.core.engine import K, Capabilities, Engine, EngineInfo
from spectui.core.events import Control, LiveSettings, LiveValues
from spectui.host.baseline import Baseline
from spectui.host.live import LiveKeys, follow_change, reply_control
from spectui.host.loading import Loader, close_all
from spectui.host.memory import MemoryProbe, engine_memory
from spectui.host.messages import (
    EngineFailed, EngineReady, HostMail, HostMessage, LiveChanged, Notice, RestartPlanned, RestartStarted,
    SwapPlanned, failure_text, fallback_text, ready_note,
)
from spectui.host.plan import Build, EnginePlan
from spectui.host.state import Fallback, HostState, Phase, Swap, leaving
from spectui.host.waits import Debounce, Released, SetTimer, Uses
from spectui.measure.metrics import MemoryReading

RESTART_DEBOUNCE_S = 0.7  # F6 F6 F6 is one restart with k + 3, not three
ENGINE_LABELS = {"vllm": "vLLM"}


class EngineHost:
    def __init__(
        self,
        plan: EnginePlan,
        live: LiveSettings,
        *,
        clock: Callable[[], float] = time.monotonic,
        memory_probe: MemoryProbe | None = None,
        debounce_s: float = RESTART_DEBOUNCE_S,
        set_timer: SetTimer | None = None,
    ) -> None:
        self.plan, self.live, self.clock = plan, live, clock
        self.memory_probe = memory_probe
        self.engine: Engine | None = None
        self.info: EngineInfo | None = None  # the last ready engine's: shown while it restarts
        self.capabilities: Capabilities | None = None  # the last ready engine's
        self.state = HostState()  # its phase, what is being built, the next engine wanted
        self.engine_k = live.k  # the k the engine was built with
        self.keys = LiveKeys(self)
        self.mail = HostMail()
        self.loader = Loader(self.mail.arrive, clock, self._ready, self._failed, self.mail.tell)
        self.uses = Uses(self.mail.arrive, self.restart_if_wanted)
        self.baseline = Baseline(plan.build_baseline)
        self.debounce = Debounce(debounce_s, set_timer)
        self._started = False
        live.watch(lambda before, after: follow_change(self, before, after))
        live.watch(lambda _before, after: self.mail.tell(LiveChanged(after)))

    def start(self) -> None:
        """Begin loading the engine (once)."""
        if not self._started:
            self._started = True
            self._load(self.plan.build, self.state)

    def listen(self, listener: Callable[[HostMessage], object]) -> Callable[[], None]:
        return self.mail.listen(listener)

    def attach(self, wake: Callable[[], object], set_timer: SetTimer | None = None) -> None:
        """wake(), from any thread, must lead to pump() on the owner's thread; set_timer
        (delay, callback) runs callback there after delay, unless the host was given its own."""
        self.mail.wake = wake
        self.debounce.set_timer = self.debounce.set_timer or set_timer
        self.pump()

    def pump(self) -> None:
        """Apply what the threads handed over; on the owner's thread."""
        for arrived in self.mail.arrivals():
            if isinstance(arrived, Released):
                arrived.use.release()
            else:
                self.loader.take(arrived)

    def notice(self, text: str, severity: str = "information", timeout: float | None = None) -> None:
        self.mail.tell(Notice(text, severity, timeout))

    @property
    def label(self) -> str:
        return ENGINE_LABELS.get(self.info.name, self.info.name) if self.info is not None else "the engine"

    @property
    def loading_text(self) -> str:
        return self.loader.text

    @property
    def load_seconds(self) -> float | None:
        return self.loader.seconds

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

    def read_memory(self, engine_stats: Mapping[str, object] | None = None) -> MemoryReading | None:
        engine = self.engine
        return engine_memory(engine, self.capabilities if engine is not None else None, self.memory_probe, engine_stats or {})

    def _ready(self, engine: Engine, seconds: float) -> None:
        restarted_k, swapped_to = self.state.k, self.state.switching_to
        # The loader closed an engine it kept open (the fallback), once the new one was built.
        self.state = self.state.to(Phase.READY)
        self.engine, self.info, self.capabilities = engine, engine.info, engine.info.capabilities
        if restarted_k is not None:
            self.engine_k = restarted_k
        own_k = engine.fixed_k
        if self.k_fixed_elsewhere and own_k is not None:
            self.engine_k = own_k
            self.live.update(k=own_k)  # a server's k is its own: show that one
        note = ready_note(self.label, seconds, restarted_k, own_k, swapped_to)
        self.mail.tell(EngineReady(engine, seconds, note, swapped_to, engine.measured_verify_slope))
        if self.state.wanted_swap is not None:
            self.restart_if_wanted()  # chosen while it loaded
        elif self.k_restarts_engine and self.live.k != self.engine_k:
            self.want_k(self.live.k)  # pressed while it loaded

    def _failed(self, error: str) -> None:
        restarted_k, swapped_to, fallback = self.state.k, self.state.switching_to, self.state.fallback
        if swapped_to is not None and fallback is not None:
            self._fall_back(fallback, swapped_to, error)
            return
        self.state = self.state.load_failed(error)
        text, retry = failure_text(self.label, error, restarted_k, swapped_to)
        self.mail.tell(EngineFailed(error, f"{text} · {retry}" if retry else None))
        self.notice(text, "error", 10)
        if self.state.wanted_swap is not None:
            self.restart_if_wanted()  # chosen while it loaded

    def _fall_back(self, fallback: Fallback, swapped_to: str, error: str) -> None:
        """A switch failed: the engine before goes on if it stayed open, else it loads again."""
        text, note = fallback_text(swapped_to, error, fallback.what, goes_on=fallback.engine is not None)
        if fallback.engine is not None:
            self.engine, self.plan = fallback.engine, fallback.plan
            self.baseline = fallback.baseline or Baseline(fallback.plan.build_baseline)  # kept with its engine
            self.engine_k, self.state = fallback.engine_k, self.state.to(Phase.READY)
        else:
            self.state = self.state.to(Phase.FAILED, error=error).wanting(Swap(fallback.plan, fallback.what))
        self.mail.tell(EngineFailed(error, note, swap_failed=True))
        self.notice(text, "error", 10)
        self.restart_if_wanted()

    def want_k(self, k: int) -> None:
        """Restart the engine with k once the key presses settle (a wanted switch takes the live k)."""
        if self.state.wanted_swap is None:
            self.state = self.state.wanting(k)
        self.mail.tell(RestartPlanned(k))
        self.debounce.start(self.restart_if_wanted)  # a restart already settling starts over

    def restart_if_wanted(self) -> None:
        """Start the wanted restart if nothing holds the engine; called again when that ends."""
        if self.state.wanted_swap is not None:
            self._swap_if_free()
            return
        k = self.state.wanted_k
        if k is None or self.debounce.settling or self.state.loading:
            return  # nothing wanted, keys still settling, or a load in flight (ready looks again)
        if self.engine is not None and k == self.engine_k:
            self.state = self.state.wanting(None)
            self.mail.tell(RestartPlanned(None))
        elif not self.uses and self.plan.build_for_k is not None:  # a k restart is wanted only where it has one
            started = RestartStarted(k, f"Restarting {self.label} with k = {k}: the conversation stays…")
            self._load(self.plan.build_for_k(k), self.state.wanting(None).to(Phase.RESTARTING, k=k), started,
                       (self.engine,))

    def _load(self, build: Build, state: HostState, started: RestartStarted | None = None,
              closed_first: tuple[Engine | None, ...] = (), kept: tuple[Engine | None, ...] = ()) -> None:
        """Load an engine, the first (`started` None) or another in place of this one (`state`:
        what it builds), closing `closed_first` before it is built and `kept` after (a failed
        build goes back to it)."""
        self.engine, self.state = None, state
        if started is not None:
            self.mail.tell(started)
        self.loader.begin(build, closed_first, kept)

    def swap(self, plan: EnginePlan, what: str) -> None:
        """Replace the engine with `plan`'s (built with the live k), once nothing holds this
        one and a load in flight has ended; `what` names it in the notes."""
        self.drop_restart()  # the new engine takes the live k: no k restart of the old one
        self.state = self.state.wanting(Swap(plan, what))
        self.mail.tell(SwapPlanned(what))
        self.restart_if_wanted()

    def _swap_if_free(self) -> None:
        swap = self.state.wanted_swap
        if swap is None or self.uses or self.state.loading:
            return  # a reply or the compare view holds the engine, or a load is in flight: they look again
        plan, what = swap.plan, swap.what
        fallback, closed_first, kept = leaving(self.engine, self.plan, self.baseline, self.engine_k)
        self.plan, self.baseline, self.engine_k = plan, Baseline(plan.build_baseline), self.live.k
        switching = self.state.wanting(None).to(Phase.SWITCHING, switching_to=what, fallback=fallback)
        self._load(plan.build_at(self.live.k), switching, RestartStarted(None, f"Switching to {what}: the conversation stays…"),
                   closed_first, kept)

    def start_reply(self, name: str, run: Callable[[Engine, Control], None], values: LiveValues | None = None) -> Control:
        """run(engine, control) in a thread named `name`; the control starts from `values`
        (default: the live ones) and reads the live settings where the engine reads them
        between steps. Returns it, to cancel the reply."""
        engine, start = self.engine, values or self.live.values
        assert engine is not None, "a reply starts once the engine is ready"
        control = reply_control(engine, self.live, start)
        self.uses.start_work(name, lambda: run(engine, control), control.cancel, reply=True)
        return control

    def baseline_engine(self) -> Engine:
        """The compare view's k = 0 engine, where this one fixes k: built once, in the caller's thread."""
        assert self.info is not None, "the compare view opens once an engine was ready"
        return self.baseline.engine(self.info.name)

    def close_baseline(self) -> None:
        self.baseline.close_after(self.uses.threads())

    def drop_restart(self) -> None:
        """No restart from now on (quitting: what holds the engine lets go as it leaves)."""
        self.debounce.stop()
        self.state = self.state.wanting(None)

    def close(self, timeout: float = 15.0) -> bool:
        """Stop what holds the engine, wait for its threads (`timeout` in all), close the
        engines. False, with the engines left open, if a thread still runs."""
        self.drop_restart()
        if not self.uses.stop_and_wait(timeout):
            return False
        # A switch in flight keeps the engine before open: quitting closes it too.
        engines, self.engine = (self.engine, self.baseline.take(), self.state.kept_engine), None
        close_all(engines)  # quitting: nothing useful to do with a failing close
        return True
