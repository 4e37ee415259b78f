"""The engine host without any UI: load, state, k restarts, live settings, the baseline, closing.

The test plays the host's owner thread (`Owner`): it pumps what the loader and work threads
hand over when they wake it, and fires the debounce timers itself. Nothing waits on time.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import pytest

from spectui.core.engine import Capabilities
from spectui.core.errors import UsageError
from spectui.core.events import K_MAX, Control, Done, GenerationParams, LiveSettings, LiveValues, Step
from spectui.host.host import EngineHost
from spectui.host.messages import (
    EngineFailed, EngineReady, LiveChanged, LoadProgress, Notice, RestartPlanned, RestartStarted, SwapPlanned,
)
from spectui.host.plan import EnginePlan
from spectui.host.state import Phase

from fake_engines import FIXED_K, FixedKEngine, FixedKFactory, ManualTimers, PlanEngine, factory_for


LIVE_ON_A_GPU = Capabilities(live_controls=True, exclusive_device=True)  # closed before another engine loads


class Owner:
    """The thread that owns the host, played by the test."""

    def __init__(self, host: EngineHost) -> None:
        self.host = host
        self.messages: list = []
        self.woken = threading.Event()
        self.timers = ManualTimers()
        host.listen(self.messages.append)
        host.attach(self.woken.set, self.timers)

    def until(self, condition, timeout: float = 30.0) -> None:
        """Pump whenever a thread hands something over, until condition() holds."""
        while True:
            self.host.pump()
            if condition():
                return
            assert self.woken.wait(timeout), "the host's threads went quiet"
            self.woken.clear()

    def of(self, kind) -> list:
        return [m for m in self.messages if isinstance(m, kind)]

    def notices(self) -> list[str]:
        return [m.text for m in self.of(Notice)]


def make_host(build, k: int = 2, *, build_for_k=None, build_baseline=None, clock=None, auto=False) -> EngineHost:
    options = {"clock": clock} if clock is not None else {}
    return EngineHost(EnginePlan(build, build_for_k, build_baseline), LiveSettings(k, auto, 0.0), **options)


def fixed_k_host(factory: FixedKFactory, k: int = 2, **options) -> tuple[EngineHost, Owner]:
    host = make_host(factory.for_k(k), k, build_for_k=factory.for_k, **options)
    host.start()
    owner = Owner(host)
    owner.until(lambda: host.state.ready)
    return host, owner


def drain(engine, control) -> list:
    return list(engine.stream([{"role": "user", "content": "hi"}], GenerationParams(), control))


# --- loading --------------------------------------------------------------------------


def test_the_load_starts_before_anyone_listens_and_nothing_is_lost():
    now = [50.0]
    loaded = threading.Event()
    engine = PlanEngine([None])

    def build(progress):
        progress("weights", 1, 4)
        progress("weights", 2, 4)
        loaded.set()
        return engine

    host = make_host(build, clock=lambda: now[0])
    host.start()
    assert loaded.wait(30)  # built while no UI existed
    now[0] += 3
    owner = Owner(host)  # the UI arrives: attach pumps what waited
    assert [m.text for m in owner.of(LoadProgress)] == ["weights 25%", "weights 50%"]
    [ready] = owner.of(EngineReady)
    assert ready.engine is engine and ready.restart_note is None
    assert (host.state.phase, host.engine, host.info) == (Phase.READY, engine, engine.info)
    host.start()  # once only
    assert owner.of(EngineReady) == [ready]


def test_the_loading_text_counts_seconds_and_a_failure_says_why():
    now = [10.0]
    release = threading.Event()

    def build(progress):
        progress("convert", 0, 0)
        release.wait(30)
        raise OSError("weights not found: /nope")

    host = make_host(build, clock=lambda: now[0])
    host.start()
    owner = Owner(host)
    owner.until(lambda: owner.of(LoadProgress))
    now[0] += 12
    assert host.state.loading and host.loading_text == "convert · 12 s"
    release.set()
    owner.until(lambda: host.state.failed)
    assert owner.of(EngineFailed) == [EngineFailed("OSError: weights not found: /nope")]
    assert owner.notices() == ["Could not load the engine: OSError: weights not found: /nope"]
    assert host.engine is None and host.state.phase is not Phase.RESTART_FAILED


# --- k restarts -----------------------------------------------------------------------


def test_k_presses_settle_into_one_restart_with_the_last_k_after_the_old_engine_closed():
    factory = FixedKFactory([None, 2])
    host, owner = fixed_k_host(factory)
    first = host.engine
    closed_before_build = []
    build_5 = factory.for_k(5)
    host.plan = EnginePlan(host.plan.build, lambda k: lambda p: closed_before_build.append(first.closed) or build_5(p))
    for _ in range(3):
        host.keys.step_k(+1)
    assert host.live.k == 5 and host.state.wanted_k == 5 and factory.built_k == [2]
    assert len(owner.timers.pending) == 1  # every press restarted the settling
    assert [m.k for m in owner.of(RestartPlanned)] == [3, 4, 5]
    owner.timers.fire()
    assert host.state.loading and host.state.phase is Phase.RESTARTING and host.state.k == 5 and host.engine is None
    assert owner.of(RestartStarted) == [RestartStarted(5, "Restarting vLLM with k = 5: the conversation stays…")]
    owner.until(lambda: host.state.ready)
    assert factory.built_k == [2, 5] and closed_before_build == [True]
    assert host.engine is factory.engines[-1] and host.engine_k == 5
    assert owner.of(EngineReady)[-1].restart_note.startswith("vLLM restarted with k = 5 in ")
    assert host.state.wanted_k is None and not owner.timers.pending  # no second restart


def test_a_restart_waits_for_the_reply_holding_the_engine():
    factory = FixedKFactory([None, 2, 2], gated=True)
    host, owner = fixed_k_host(factory)
    engine = host.engine
    done = []
    host.start_reply("spectui-reply-test", lambda engine, control: done.extend(drain(engine, control)))
    host.keys.step_k(+1)
    owner.timers.fire()
    assert host.state.ready and host.state.wanted_k == 3 and not engine.closed  # the reply holds it
    engine.release(2)
    owner.until(lambda: host.state.ready and host.engine_k == 3)
    assert isinstance(done[-1], Done) and done[-1].finish_reason == "stop"
    assert engine.closed and factory.built_k == [2, 3]


def test_a_restart_waits_for_the_compare_view_and_the_same_k_drops_the_wish():
    factory = FixedKFactory([None])
    host, owner = fixed_k_host(factory)
    view = host.uses.hold("compare view")
    host.keys.step_k(+1)
    owner.timers.fire()
    assert host.state.wanted_k == 3 and factory.built_k == [2]
    host.keys.step_k(-1)  # back to the k it runs: nothing to restart for
    owner.timers.fire()
    view.release()
    assert host.state.wanted_k is None and factory.built_k == [2] and owner.of(RestartPlanned)[-1] == RestartPlanned(None)


def test_k_pressed_while_the_engine_loads_restarts_it_once_ready():
    factory = FixedKFactory([None])
    factory.hold()
    host = make_host(factory.for_k(2), 2, build_for_k=factory.for_k)
    host.start()
    owner = Owner(host)
    host.keys.step_k(+2)  # the engine's kind is not known yet: nothing to restart
    assert host.live.k == 4 and not owner.of(RestartPlanned)
    factory.release()
    owner.until(lambda: host.state.ready)
    assert owner.of(RestartPlanned) == [RestartPlanned(4)]
    owner.timers.fire()
    owner.until(lambda: host.state.ready and host.engine_k == 4)
    assert factory.built_k == [2, 4]


def test_a_failed_restart_is_said_once_and_a_k_press_tries_again():
    factory = FixedKFactory([None])
    host, owner = fixed_k_host(factory)
    factory.failures.append("CUDA out of memory")
    host.keys.step_k(+1)
    owner.timers.fire()
    owner.until(lambda: host.state.failed)
    [failed] = owner.of(EngineFailed)
    assert failed.restart_note == ("Could not restart vLLM with k = 3: RuntimeError: CUDA out of memory"
                                   " · press a k key to try again")
    assert host.state.phase is Phase.RESTART_FAILED and host.engine is None
    host.keys.step_k(+1)
    owner.timers.fire()
    owner.until(lambda: host.state.ready)
    assert factory.built_k == [2, 3, 4] and host.engine_k == 4 and host.state.phase is not Phase.RESTART_FAILED


def test_a_server_keeps_its_own_k():
    server = FixedKEngine([None], k=6)
    host = make_host(factory_for(server), 2)  # no rebuild: the server's k is the server's
    host.start()
    owner = Owner(host)
    owner.until(lambda: host.state.ready)
    assert (host.live.k, host.engine_k) == (6, 6) and host.k_fixed_elsewhere
    host.keys.step_k(+1)
    assert host.live.k == 6
    assert "fixed k when it started" in owner.notices()[-1]


# --- live settings --------------------------------------------------------------------


def test_a_running_reply_follows_the_live_settings_and_stops_following_when_it_ends():
    engine = PlanEngine([None, 2, 2, 2], gated=True)
    host = make_host(factory_for(engine), 2, auto=True)
    host.start()
    owner = Owner(host)
    owner.until(lambda: host.state.ready)
    controls = []
    host.start_reply("spectui-reply-test", lambda engine, control: controls.append(control) or drain(engine, control))
    owner.until(lambda: len(engine.steps) == 1)
    host.keys.step_k(+1)  # a k by hand ends adaptive k
    host.keys.step_temperature(+1)
    control = controls[0]
    assert control.live is host.live  # the reply reads the one holder the keys change: no copy to keep in step
    assert (control.k, control.auto, control.temperature) == (3, False, 0.1)
    engine.release(3)
    owner.until(lambda: not host.uses)
    assert [s.k for s in engine.steps] == [2, 3, 3, 3] and [s.temperature for s in engine.steps[1:]] == [0.1] * 3
    host.keys.step_k(+1)
    assert host.live.k == 4 and len(engine.steps) == 4  # the ended reply took no step at k = 4
    assert owner.of(LiveChanged)[-1] == LiveChanged(LiveValues(4, False, 0.1))
    assert not owner.notices()


def test_an_engine_without_live_controls_is_told_its_changes_wait_for_the_next_reply():
    engine = PlanEngine([None, 1, 1], Capabilities(), gated=True, name="vllm")
    host = make_host(factory_for(engine), 2)
    host.start()
    owner = Owner(host)
    owner.until(lambda: host.state.ready)
    controls = []
    host.start_reply("spectui-reply-test", lambda engine, control: controls.append(control) or drain(engine, control))
    host.keys.step_temperature(+1)
    host.keys.step_k(+1)
    assert controls[0].snapshot() == (2, 0.0)  # the running reply keeps what it started with
    assert owner.notices() == [
        "The vllm engine cannot change temperature during a reply: temperature = 0.10 applies from the next reply.",
        "The vllm engine cannot change k during a reply: k = 3 applies from the next reply.",
    ]
    assert (host.live.k, host.live.temperature) == (3, 0.1)  # what the next reply starts with
    engine.release(2)
    owner.until(lambda: not host.uses)


def test_keys_stay_within_their_ranges():
    host = make_host(factory_for(PlanEngine([None])), K_MAX)
    owner = Owner(host)
    host.keys.step_k(+1)
    assert host.live.k == K_MAX and owner.notices() == [f"k stays within 0..{K_MAX}"]
    for _ in range(30):
        host.keys.step_temperature(+1)
    assert host.live.temperature == 2.0
    with pytest.raises(ValueError):
        host.live.update(k=K_MAX + 1)


@dataclass(frozen=True)
class Theory:
    best_k: int
    alpha: float = 0.9
    best_speedup: float = 2.5
    speedup: float = 1.5


def test_adaptive_k_toggles_on_a_live_engine_and_is_recommended_for_a_fixed_k_one():
    live_host = make_host(factory_for(PlanEngine([None])), 4)
    live_host.start()
    owner = Owner(live_host)
    owner.until(lambda: live_host.state.ready)
    live_host.keys.toggle_auto(None)
    assert live_host.live.auto and owner.notices() == ["Adaptive k: on, from the next step"]

    factory = FixedKFactory([None])
    host, owner = fixed_k_host(factory)
    host.keys.toggle_auto(None)
    assert "after a reply with drafts" in owner.notices()[-1] and not host.live.auto
    host.keys.toggle_auto(Theory(best_k=6))
    assert owner.notices()[-1].startswith("Recommended k = 6 for α 0.90") and host.live.k == 2
    host.keys.toggle_auto(Theory(best_k=6))  # the second press takes it
    assert host.live.k == 6 and host.state.wanted_k == 6


# --- the compare view's baseline, and the end ---------------------------------------------


def test_the_baseline_is_built_once_and_closed_after_the_work_using_it():
    factory = FixedKFactory([None, None])
    host, owner = fixed_k_host(factory, build_baseline=factory.for_k(0))
    baseline = host.baseline_engine()
    assert host.baseline_engine() is baseline and factory.built_k == [2, 0]
    release = threading.Event()
    host.uses.start_work("spectui-compare", lambda: release.wait(30))
    host.close_baseline()
    assert not baseline.closed  # a run still uses it
    release.set()
    for thread in threading.enumerate():
        if thread.name == "spectui-baseline-close":
            thread.join(30)
    assert baseline.closed and not host.engine.closed


def test_no_baseline_for_a_fixed_k_engine_is_a_usage_error():
    host, owner = fixed_k_host(FixedKFactory([None]))
    with pytest.raises(UsageError, match="no baseline engine is configured"):
        host.baseline_engine()


def test_closing_stops_what_runs_then_closes_the_engines():
    engine = PlanEngine([None, 1, 1, 1], gated=True)
    host = make_host(factory_for(engine), 2, build_baseline=lambda progress: PlanEngine([None]))
    host.start()
    owner = Owner(host)
    owner.until(lambda: host.state.ready)
    ended = []
    control = host.start_reply("spectui-reply-test", lambda engine, control: ended.extend(drain(engine, control)))
    baseline = host.baseline.engine("fake")
    owner.until(lambda: len(engine.steps) == 1)
    engine.release()  # the reply reads the cancel before its next step
    assert host.close(timeout=30)
    assert control.cancelled and ended[-1] == Done("cancelled")
    assert engine.closed and baseline.closed and host.engine is None


def test_closing_leaves_the_engine_open_while_a_thread_will_not_stop():
    engine = PlanEngine([None])
    host = make_host(factory_for(engine))
    host.start()
    owner = Owner(host)
    owner.until(lambda: host.state.ready)
    release = threading.Event()
    host.uses.start_work("spectui-compare", lambda: release.wait(30))  # deaf to stop
    assert not host.close(timeout=0.05)
    assert not engine.closed  # a forward pass may still run on it
    release.set()
    owner.until(lambda: not host.uses)
    assert host.close(timeout=30) and engine.closed


def test_a_declared_capability_wins_over_what_the_info_says():
    engine = FixedKEngine([None], k=3)
    assert engine.info.capabilities == FIXED_K
    host = make_host(factory_for(engine), 3, build_for_k=lambda k: factory_for(FixedKEngine([None], k=k)))
    host.start()
    owner = Owner(host)
    owner.until(lambda: host.state.ready)
    assert host.k_restarts_engine and not host.k_fixed_elsewhere


def test_steps_from_the_fakes_carry_their_pieces():
    engine = PlanEngine([None, 2], gated=False)
    steps = [e for e in drain(engine, Control(2)) if isinstance(e, Step)]
    assert all("".join(step.pieces) == step.text for step in steps)


def test_quitting_drops_a_wanted_restart_before_the_views_let_the_engine_go():
    factory = FixedKFactory([None])
    host, owner = fixed_k_host(factory)
    view = host.uses.hold("compare view")
    host.keys.step_k(+1)
    owner.timers.fire()
    assert host.state.wanted_k == 3
    host.drop_restart()
    view.release()  # the view closes as the app quits
    assert host.state.ready and factory.built_k == [2] and not host.engine.closed


# --- another engine (the model screen) -----------------------------------------------------


class Builds:
    """A plan's builds, recorded: the k each was asked for, and whether the old engines were
    closed by then; `failures` are raised by the next builds."""

    def __init__(self, old_engines=()) -> None:
        self.old_engines = list(old_engines)
        self.built: list[tuple[int | None, list[bool]]] = []
        self.engines: list[PlanEngine] = []
        self.failures: list[str] = []

    def plan(self) -> EnginePlan:
        return EnginePlan(self.build(None), lambda k: self.build(k))

    def build(self, k):
        def build(progress):
            self.built.append((k, [engine.closed for engine in self.old_engines]))
            if self.failures:
                raise RuntimeError(self.failures.pop(0))
            self.engines.append(PlanEngine([None, 1], name="embedded"))
            return self.engines[-1]

        return build


def test_a_swap_waits_for_the_reply_then_closes_the_old_engines_and_builds_with_the_live_k():
    old = PlanEngine([None, 1, 1], LIVE_ON_A_GPU, gated=True)
    old_baseline = PlanEngine([None])
    host = make_host(factory_for(old), 3, build_baseline=factory_for(old_baseline))
    host.start()
    owner = Owner(host)
    owner.until(lambda: host.state.ready)
    assert host.baseline_engine() is old_baseline
    host.start_reply("spectui-reply-test", lambda engine, control: drain(engine, control))
    builds = Builds([old, old_baseline])
    host.swap(builds.plan(), "smollm2-135m (ngram) · embedded")
    assert owner.of(SwapPlanned) == [SwapPlanned("smollm2-135m (ngram) · embedded")]
    assert host.engine is old and host.state.wanted_swap is not None and builds.built == []  # the reply holds it
    old.release(2)
    owner.until(lambda: host.state.ready and host.engine is not old)
    assert builds.built == [(3, [True, True])]  # both old engines closed before the build
    assert host.engine is builds.engines[0] and host.plan.build_for_k is not None and host.engine_k == 3
    assert owner.of(RestartStarted)[-1] == RestartStarted(None, "Switching to smollm2-135m (ngram) · embedded: "
                                                                "the conversation stays…")
    ready = owner.of(EngineReady)[-1]
    assert ready.restart_note.startswith("Switched to smollm2-135m (ngram) · embedded in ")
    assert ready.restart_note.endswith("s; the conversation goes on.")


def test_a_swap_chosen_while_the_engine_loads_follows_the_load():
    release = threading.Event()
    first = PlanEngine([None], LIVE_ON_A_GPU)

    def slow(progress):
        release.wait(30)
        return first

    host = make_host(slow, 2)
    host.start()
    owner = Owner(host)
    builds = Builds([first])
    host.swap(builds.plan(), "another")
    assert builds.built == [] and host.state.loading
    release.set()
    owner.until(lambda: builds.engines and host.engine is builds.engines[0])
    assert builds.built == [(2, [True])]


def test_a_failed_swap_leaves_the_engine_before_running_and_another_can_follow():
    old = PlanEngine([None, 1])
    host = make_host(factory_for(old), 2)
    host.start()
    owner = Owner(host)
    owner.until(lambda: host.state.ready)
    builds = Builds([old])
    builds.failures.append("no weights for that one")
    host.swap(builds.plan(), "broken")
    owner.until(lambda: owner.of(EngineFailed))
    assert builds.built == [(2, [False])]  # the old engine stayed open while the new one loaded
    failed = owner.of(EngineFailed)[-1]
    assert failed.swap_failed and failed.restart_note == (
        "Could not switch to broken: RuntimeError: no weights for that one "
        "· fake-target (draft) · fake goes on; the model screen can try another")
    assert host.state.ready and host.engine is old and not old.closed
    assert len(drain(host.engine, Control.reading(host.live))) == 3  # it still replies
    host.swap(builds.plan(), "working")
    owner.until(lambda: host.state.ready and host.engine is not old)
    assert host.engine is builds.engines[0] and old.closed  # closed once the new one was built
    assert owner.of(EngineReady)[-1].swapped_to == "working"


def test_a_failed_swap_from_an_engine_that_holds_the_gpu_loads_that_engine_again():
    old = PlanEngine([None], LIVE_ON_A_GPU)
    rebuilt = PlanEngine([None], LIVE_ON_A_GPU)
    host = make_host(factory_for(old), 2, build_for_k=lambda k: factory_for(rebuilt))
    host.start()
    owner = Owner(host)
    owner.until(lambda: host.state.ready)
    builds = Builds([old])
    builds.failures.append("CUDA out of memory")
    host.swap(builds.plan(), "too big")
    owner.until(lambda: host.engine is rebuilt)
    assert builds.built == [(2, [True])]  # closed first: one GPU holds one engine
    failed = owner.of(EngineFailed)[-1]
    assert failed.swap_failed and failed.restart_note.endswith("· loading fake-target (draft) · fake again")
    assert host.state.ready


def test_a_reply_can_start_from_other_values_than_the_live_ones():
    engine = PlanEngine([None, 1, 1], gated=True)
    host = make_host(factory_for(engine), 4)
    host.start()
    owner = Owner(host)
    owner.until(lambda: host.state.ready)
    controls = []
    host.start_reply("spectui-reply-test", lambda engine, control: controls.append(control) or drain(engine, control),
                     LiveValues(2, False, 0.5))
    engine.release(2)
    owner.until(lambda: not host.uses)
    assert [(s.k, s.temperature) for s in engine.steps] == [(2, 0.5)] * 3
    assert host.live.values == LiveValues(4, False, 0.0)


def test_a_key_press_during_a_regenerated_reply_changes_that_setting_only():
    engine = PlanEngine([None, 1, 1, 1], gated=True)
    host = make_host(factory_for(engine), 4)
    host.start()
    owner = Owner(host)
    owner.until(lambda: host.state.ready)
    host.start_reply("spectui-reply-test", lambda engine, control: drain(engine, control), LiveValues(2, False, 0.5))
    owner.until(lambda: len(engine.steps) == 1)
    host.keys.step_k(+1)  # the live k 4 becomes 5; the reply's temperature stays the one it was made with
    host.keys.step_k(-1)  # and back: the reply takes the live k, as the bar shows it
    engine.release(3)
    owner.until(lambda: not host.uses)
    assert [(s.k, s.temperature) for s in engine.steps] == [(2, 0.5), (4, 0.5), (4, 0.5), (4, 0.5)]
