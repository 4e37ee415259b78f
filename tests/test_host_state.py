"""The host's state as one value: the phases, the moves the table allows, and the refused ones."""

from __future__ import annotations

import pytest

from spectui.host.plan import EnginePlan
from spectui.host.state import MOVES, HostState, IllegalMove, Phase, Swap


def test_a_load_ends_ready_or_failed_and_nothing_else():
    state = HostState()
    assert state.phase is Phase.LOADING and state.loading and not state.failed
    assert state.to(Phase.READY).ready
    failed = state.to(Phase.FAILED, error="OSError: no weights")
    assert failed.failed and failed.error == "OSError: no weights"
    with pytest.raises(IllegalMove, match="from loading to restarting"):
        state.to(Phase.RESTARTING, k=3)  # a restart never starts while a load is in flight


@pytest.mark.parametrize("loading", [Phase.LOADING, Phase.RESTARTING, Phase.SWITCHING])
def test_no_second_load_starts_while_one_is_in_flight(loading):
    for start in (Phase.RESTARTING, Phase.SWITCHING):
        assert start not in MOVES[loading]


def test_a_restart_carries_its_k_into_its_failure_and_a_k_key_may_try_again():
    restarting = HostState(Phase.READY).to(Phase.RESTARTING, k=4)
    assert restarting.loading and restarting.k == 4
    failed = restarting.to(Phase.RESTART_FAILED, k=4, error="out of memory")
    assert failed.failed and failed.k == 4
    assert failed.to(Phase.RESTARTING, k=5).k == 5
    with pytest.raises(IllegalMove):
        failed.to(Phase.READY)  # no engine comes up without a load


def test_the_wanted_engine_is_one_value_kept_across_moves():
    swap = Swap(EnginePlan(lambda progress: None), "smollm2-135m (ngram) · embedded")
    state = HostState(Phase.READY).wanting(3)
    assert (state.wanted_k, state.wanted_swap) == (3, None)
    state = state.wanting(swap)  # another engine replaces a k restart: it takes the live k
    assert (state.wanted_k, state.wanted_swap) == (None, swap)
    switching = state.to(Phase.SWITCHING, switching_to=swap.what)
    assert switching.wanted is swap and switching.switching_to == swap.what and switching.k is None


def test_every_phase_has_its_moves_in_the_table():
    assert set(MOVES) == set(Phase)


def test_the_host_refuses_a_second_engine_arriving_for_one_load():
    from spectui.host.host import EngineHost
    from spectui.host.loading import Loaded
    from spectui.core.events import LiveSettings

    from fake_engines import PlanEngine

    engine = PlanEngine([None])
    host = EngineHost(EnginePlan(lambda progress: engine), LiveSettings(2, False, 0.0))
    host.mail.arrive(Loaded(engine, 1.0))  # as the loader thread hands it over
    host.pump()
    assert host.state.ready and host.engine is engine
    host.mail.arrive(Loaded(PlanEngine([None]), 1.0))  # no load was in flight: a bug, said loudly
    with pytest.raises(IllegalMove, match="from ready to ready"):
        host.pump()
