"""Where the host's engine is in its life, as one value: its phase, what is being built,
why it failed, and the next engine wanted.

The legal moves between phases are in one table (MOVES): a load ends in ready or failed,
a restart or a switch starts from an engine that is up or that failed, never while
another load is in flight. A move the table does not list raises: it would be a bug.

A switch's fallback: on the CPU the engine in use stays open while the new one loads, and a
failed load leaves the chat on it, as it was. An engine that holds a GPU (its memory pool, a
model in device memory) is closed first, since one GPU rarely holds two; a failed load then
loads it again.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum

from spectui.core.engine import Engine, EngineInfo
from spectui.host.baseline import Baseline
from spectui.host.plan import EnginePlan


class Phase(Enum):
    LOADING = "loading"  # the first load
    READY = "ready"
    FAILED = "failed"  # the first load, or a switch with nothing to go back on
    RESTARTING = "restarting"  # a k restart in flight
    RESTART_FAILED = "restart failed"  # a k key tries it again
    SWITCHING = "switching"  # another engine (model, draft, method) in flight


LOADS = frozenset({Phase.LOADING, Phase.RESTARTING, Phase.SWITCHING})
FAILURES = frozenset({Phase.FAILED, Phase.RESTART_FAILED})
STARTS = frozenset({Phase.RESTARTING, Phase.SWITCHING})  # what an engine that is up or failed may do

MOVES: dict[Phase, frozenset[Phase]] = {
    Phase.LOADING: frozenset({Phase.READY, Phase.FAILED}),
    Phase.READY: STARTS,
    Phase.FAILED: STARTS,
    Phase.RESTART_FAILED: STARTS,
    Phase.RESTARTING: frozenset({Phase.READY, Phase.RESTART_FAILED}),
    # A failed switch: the engine before goes on (ready) or is loaded again (failed, then switching).
    Phase.SWITCHING: frozenset({Phase.READY, Phase.FAILED}),
}


@dataclass
class Fallback:
    plan: EnginePlan
    what: str  # the engine in words, for the notes: "smollm2-135m (ngram) · embedded"
    engine_k: int
    engine: Engine | None = None  # open while the new one loads (None: closed, to be loaded again)
    baseline: Baseline | None = None


def keeps_open(engine: Engine | None) -> bool:
    """The engine may stay open while another loads: it holds no device memory pool."""
    if engine is None:
        return False
    capabilities = engine.info.capabilities
    return not capabilities.exclusive_device and not engine.info.device.startswith(("cuda", "mps", "xpu"))


def described(info: EngineInfo) -> str:
    """An engine in the model screen's words, from what it says of itself."""
    method = f" ({info.method})" if info.method and info.method != "none" else ""
    return f"{info.target}{method} · {info.name}"


def fallback_for(engine: Engine | None, plan: EnginePlan, baseline: Baseline, engine_k: int) -> Fallback | None:
    """What a switch from `engine` goes back to: nothing after a failed load (nothing ran)."""
    if engine is None:
        return None
    kept = keeps_open(engine)
    return Fallback(plan, described(engine.info), engine_k, engine if kept else None, baseline if kept else None)


def leaving(engine: Engine | None, plan: EnginePlan, baseline: Baseline, engine_k: int
            ) -> tuple[Fallback | None, tuple[Engine | None, ...], tuple[Engine | None, ...]]:
    """A switch away from `engine`: what a failed one goes back on, what closes before the new
    engine is built, and what stays open until it is. The compare view's baseline always
    closes first: it is built again when asked for, and never waits for the switch."""
    fallback = fallback_for(engine, plan, baseline, engine_k)
    kept = (engine,) if fallback is not None and fallback.engine is not None else ()
    return fallback, (baseline.take(),) + (() if kept else (engine,)), kept


class IllegalMove(RuntimeError):
    """A phase change MOVES does not list."""


@dataclass(frozen=True)
class Swap:
    """Another engine wanted in place of this one: `what` names it in the notes."""

    plan: EnginePlan
    what: str


Wanted = int | Swap  # the next engine: this one rebuilt with a k, or another one


@dataclass(frozen=True)
class HostState:
    phase: Phase = Phase.LOADING
    k: int | None = None  # RESTARTING, RESTART_FAILED: the k of the restart
    switching_to: str | None = None  # SWITCHING: the engine it builds, in words
    fallback: Fallback | None = None  # SWITCHING: what a failed switch goes back on
    error: str = ""  # FAILED, RESTART_FAILED: why
    wanted: Wanted | None = None  # waits for key presses to settle and for what holds the engine

    def to(self, phase: Phase, *, k: int | None = None, switching_to: str | None = None,
           fallback: Fallback | None = None, error: str = "") -> HostState:
        """The state after a move to `phase`, with its own details; the wish is kept."""
        if phase not in MOVES[self.phase]:
            raise IllegalMove(f"the engine host cannot go from {self.phase.value} to {phase.value}")
        return HostState(phase, k, switching_to, fallback, error, self.wanted)

    def wanting(self, wanted: Wanted | None) -> HostState:
        return replace(self, wanted=wanted)

    def load_failed(self, error: str) -> HostState:
        """A failed restart keeps its k (a k key tries it again); any other failed load is failed."""
        return self.to(Phase.RESTART_FAILED if self.phase is Phase.RESTARTING else Phase.FAILED, k=self.k, error=error)

    @property
    def kept_engine(self) -> Engine | None:
        """The engine a switch in flight keeps open to go back on (None: none)."""
        return self.fallback.engine if self.fallback is not None else None

    @property
    def loading(self) -> bool:
        """A load is in flight: the first, a restart's or a switch's."""
        return self.phase in LOADS

    @property
    def failed(self) -> bool:
        return self.phase in FAILURES

    @property
    def ready(self) -> bool:
        return self.phase is Phase.READY

    @property
    def wanted_k(self) -> int | None:
        return self.wanted if isinstance(self.wanted, int) else None

    @property
    def wanted_swap(self) -> Swap | None:
        return self.wanted if isinstance(self.wanted, Swap) else None
