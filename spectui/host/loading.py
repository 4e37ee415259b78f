"""An engine's load: the loader thread's body (build, reporting progress, and say how it
went), and the Loader that starts one at a time and keeps what the loading line shows."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from spectui.core.engine import Engine
from spectui.core.errors import one_line
from spectui.host.messages import LoadProgress
from spectui.host.plan import Build, Progress
from spectui.host.waits import start_thread


@dataclass(frozen=True)
class Loaded:
    engine: Engine
    seconds: float


@dataclass(frozen=True)
class LoadFailed:
    error: str


def throttled(progress: Callable[[str, int, int], object]) -> Progress:
    """progress, called at most once per percent per stage: loading must not flood the UI."""
    last: dict[str, float] = {}

    def throttled_progress(stage: str, done: int, total: int) -> None:
        fraction = done / total if total else 0.0
        if stage not in last or fraction - last[stage] >= 0.01 or done == total:
            last[stage] = fraction
            progress(stage, done, total)

    return throttled_progress


def load(
    build: Build,
    arrive: Callable[[object], None],
    clock: Callable[[], float] = time.monotonic,
    old_engines: Sequence[Engine | None] = (),
    replaced: Sequence[Engine | None] = (),
) -> None:
    """Close `old_engines` first (one GPU cannot hold both), build, close `replaced` (kept
    open in case the build failed), then arrive(Loaded or LoadFailed), with LoadProgress on the way."""
    close_all(old_engines)
    started = clock()
    try:
        engine = build(throttled(lambda stage, done, total: arrive(LoadProgress(stage, done, total))))
    except BaseException as error:  # anything, even SystemExit from a library: show it, stay up
        arrive(LoadFailed(one_line(error)))
        return
    seconds = clock() - started
    close_all(replaced)
    arrive(Loaded(engine, seconds))


def close_all(engines: Sequence[Engine | None]) -> None:
    for engine in engines:
        if engine is None:
            continue
        try:
            engine.close()
        except Exception:
            pass  # a close that fails leaves an engine already dead: the new build's outcome is what counts


def loading_text(detail: str, since: float | None, now: float) -> str:
    """The load's stage and its seconds so far: some stages have no percentage to move."""
    if since is None:
        return detail
    elapsed = f"{now - since:.0f} s"
    return f"{detail} · {elapsed}" if detail else elapsed


class Loader:
    """Loads an engine in a thread, one at a time, and takes what that thread hands over on
    the owner's thread: the stage and the seconds so far (the loading line), the seconds the
    last load took, and its outcome, given to ready(engine, seconds) or failed(error)."""

    def __init__(self, arrive: Callable[[object], None], clock: Callable[[], float], ready: Callable[[Engine, float], None],
                 failed: Callable[[str], None], progress: Callable[[LoadProgress], None]) -> None:
        self._arrive, self._clock = arrive, clock
        self._ready, self._failed, self._progress = ready, failed, progress
        self.detail = ""  # the stage the build reported last
        self.since: float | None = None
        self.seconds: float | None = None  # the last load's

    def begin(self, build: Build, closed_first: Sequence[Engine | None] = (), kept: Sequence[Engine | None] = ()) -> None:
        """Close `closed_first`, build, then close `kept` (see load)."""
        self.detail, self.since = "", self._clock()
        start_thread(lambda: load(build, self._arrive, self._clock, closed_first, kept), "spectui-load")

    @property
    def text(self) -> str:
        return loading_text(self.detail, self.since, self._clock())

    def take(self, arrived: object) -> bool:
        """Apply what the loader thread handed over; False: not the loader's."""
        if isinstance(arrived, LoadProgress):
            self.detail = arrived.text
            self._progress(arrived)
        elif isinstance(arrived, Loaded):
            self.seconds, self.detail = arrived.seconds, ""
            self._ready(arrived.engine, arrived.seconds)
        elif isinstance(arrived, LoadFailed):
            self._failed(arrived.error)
        else:
            return False
        return True
