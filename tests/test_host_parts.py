"""The engine host's collaborators on their own, without a host: the Loader (one load at a
time, in a thread, and what the loading line shows), what a change of the live settings does
to the engine that runs (host/live.py), and a switch's leaving (host/state.py)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from spectui.core.engine import Capabilities, EngineInfo
from spectui.core.events import Control, LiveSettings, LiveValues
from spectui.host.baseline import Baseline
from spectui.host.live import follow_change, reply_control
from spectui.host.loading import LoadFailed, Loaded, Loader
from spectui.host.messages import LoadProgress, fallback_text
from spectui.host.plan import EnginePlan
from spectui.host.state import HostState, Phase, leaving
from spectui.host.waits import Released, Uses

from fake_engines import FIXED_K, LIVE, PlanEngine, fake_info


class LoaderOwner:
    """The owner's thread, played by the test: it hands the loader what its thread sent."""

    def __init__(self, now: list[float]) -> None:
        self.arrived: list[object] = []
        self.woken = threading.Event()
        self.ready: list[tuple[object, float]] = []
        self.failed: list[str] = []
        self.told: list[LoadProgress] = []
        self.loader = Loader(self.arrive, lambda: now[0], lambda engine, seconds: self.ready.append((engine, seconds)),
                             self.failed.append, self.told.append)

    def arrive(self, item: object) -> None:
        self.arrived.append(item)
        self.woken.set()

    def take_until(self, kind: type) -> None:
        while not any(isinstance(item, kind) for item in self.arrived):
            assert self.woken.wait(30), "the load thread went quiet"
            self.woken.clear()
        for item in self.arrived:
            assert self.loader.take(item)
        self.arrived.clear()


def test_the_loader_shows_the_stage_and_its_seconds_then_hands_the_engine_over():
    now = [100.0]
    built, release = PlanEngine([None]), threading.Event()

    def build(progress):
        progress("convert", 1, 2)
        release.wait(30)
        return built

    owner = LoaderOwner(now)
    owner.loader.begin(build)
    owner.take_until(LoadProgress)
    now[0] += 7
    assert owner.loader.text == "convert 50% · 7 s" and owner.told == [LoadProgress("convert", 1, 2)]
    assert owner.loader.seconds is None and not owner.ready  # nothing loaded yet
    release.set()
    owner.take_until(Loaded)
    assert owner.ready == [(built, 7.0)] and owner.loader.seconds == 7.0 and owner.loader.detail == ""


def test_the_loader_closes_the_old_engine_before_the_build_and_says_a_failure_in_one_line():
    old = PlanEngine([None])
    closed_before_build = []

    def build(progress):
        closed_before_build.append(old.closed)
        raise OSError("weights not found: /nope")

    owner = LoaderOwner([0.0])
    owner.loader.begin(build, closed_first=(old,))
    owner.take_until(LoadFailed)
    assert closed_before_build == [True] and owner.failed == ["OSError: weights not found: /nope"] and not owner.ready


def test_the_loader_leaves_what_is_not_its_own():
    owner = LoaderOwner([0.0])
    uses = Uses(owner.arrive, lambda: None)
    assert not owner.loader.take(Released(uses.hold("spectui-reply")))


@dataclass
class FollowingHost:
    """What follow_change reads of the host and asks of it (FollowHost)."""

    info: EngineInfo | None
    k_restarts_engine: bool = False
    replying: bool = False
    wanted: list[int] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)

    @property
    def uses(self) -> Uses:
        uses = Uses(lambda released: None, lambda: None)
        if self.replying:
            uses.hold("spectui-reply").reply = True
        return uses

    def notice(self, text: str) -> None:
        self.notices.append(text)

    def want_k(self, k: int) -> None:
        self.wanted.append(k)


def test_a_new_k_rebuilds_an_engine_that_took_k_at_start_and_nothing_else():
    host = FollowingHost(fake_info("vllm", "draft", FIXED_K), k_restarts_engine=True, replying=True)
    follow_change(host, LiveValues(2, False, 0.0), LiveValues(3, False, 0.0))
    assert host.wanted == [3] and host.notices == []  # the restart waits for the reply: no note
    follow_change(host, LiveValues(3, False, 0.0), LiveValues(3, True, 0.0))
    assert host.wanted == [3]  # adaptive k alone is no new k


def test_a_change_a_running_reply_cannot_follow_is_said_to_wait_for_the_next_reply():
    fixed = FollowingHost(fake_info("vllm", "draft", Capabilities()), replying=True)
    follow_change(fixed, LiveValues(2, False, 0.0), LiveValues(3, False, 0.5))
    assert fixed.notices == [
        "The vllm engine cannot change k during a reply: k = 3 applies from the next reply.",
        "The vllm engine cannot change temperature during a reply: temperature = 0.50 applies from the next reply.",
    ]
    for host in (FollowingHost(fake_info("fake", "draft", LIVE), replying=True),  # it follows between steps
                 FollowingHost(fake_info("vllm", "draft", Capabilities()))):  # no reply runs
        follow_change(host, LiveValues(2, False, 0.0), LiveValues(3, False, 0.5))
        assert host.notices == [] and host.wanted == []


def test_a_reply_reads_the_live_settings_only_where_its_engine_follows_them():
    live = LiveSettings(2, False, 0.0)
    start = LiveValues(4, False, 0.3)  # a regenerated reply's own values
    reading = reply_control(PlanEngine([None], LIVE), live, start)
    fixed = reply_control(PlanEngine([None], Capabilities()), live, start)
    assert reading.snapshot() == fixed.snapshot() == (4, 0.3)
    live.update(k=5)
    assert reading.snapshot() == (5, 0.3) and fixed.snapshot() == (4, 0.3)
    assert isinstance(fixed, Control) and fixed.live is not live


def test_a_switch_keeps_a_cpu_engine_open_to_go_back_on_and_closes_one_that_holds_the_gpu():
    plan = EnginePlan(lambda progress: PlanEngine([None]))
    on_cpu = PlanEngine([None])
    fallback, closed_first, kept = leaving(on_cpu, plan, Baseline(None), 4)
    assert fallback is not None and fallback.engine is on_cpu and fallback.engine_k == 4
    assert closed_first == (None,) and kept == (on_cpu,)  # the baseline (none built) first, the engine after
    switching = HostState(Phase.READY).to(Phase.SWITCHING, switching_to="another", fallback=fallback)
    assert switching.kept_engine is on_cpu  # quitting during the switch closes it too

    on_gpu = PlanEngine([None], Capabilities(live_controls=True, exclusive_device=True))
    fallback, closed_first, kept = leaving(on_gpu, plan, Baseline(None), 4)
    assert fallback is not None and fallback.engine is None and closed_first == (None, on_gpu) and kept == ()
    assert HostState(Phase.READY).to(Phase.SWITCHING, fallback=fallback).kept_engine is None
    assert leaving(None, plan, Baseline(None), 4) == (None, (None, None), ())  # after a failed load: nothing ran


def test_a_failed_load_keeps_a_restarts_k_and_a_failed_switch_says_what_goes_on():
    assert HostState(Phase.READY).to(Phase.RESTARTING, k=5).load_failed("oom") == HostState(
        Phase.RESTART_FAILED, k=5, error="oom")
    assert HostState().load_failed("oom").phase is Phase.FAILED
    assert fallback_text("big", "oom", "small", goes_on=True) == (
        "Could not switch to big: oom", "Could not switch to big: oom · small goes on; the model screen can try another")
    assert fallback_text("big", "oom", "small", goes_on=False)[1] == "Could not switch to big: oom · loading small again"


def test_a_plan_builds_with_the_asked_k_only_where_a_new_k_is_a_rebuild():
    def build(progress):
        return PlanEngine([None])

    asked = []
    assert EnginePlan(build).build_at(5) is build  # k reaches the engine some other way
    assert EnginePlan(build, lambda k: asked.append(k) or build).build_at(5) is build and asked == [5]
