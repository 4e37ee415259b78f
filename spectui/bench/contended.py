"""`spectui bench --contended`: every case beside one busy process, as on a machine where
something else is running, with the thread policy spectui's engine process uses
(spectui.engines.threads): threads fitted to the free cores before each reply, for spectui
and its anchors alike. Stdlib only.
"""

from __future__ import annotations

import atexit
import os
import subprocess
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from spectui.core.engine import Engine

T = TypeVar("T")

# Busy until closed, or until this process is gone (checked now and then, not every turn).
BUSY_LOOP = "import os\nparent = {parent}\nwhile os.getppid() == parent:\n    for _ in range(200_000): pass"


class BusyNeighbour:
    """One process that keeps a core busy until closed."""

    def __init__(self) -> None:
        self.process = subprocess.Popen([sys.executable, "-c", BUSY_LOOP.format(parent=os.getpid())])
        atexit.register(self.close)  # a run that fails while loading still ends it

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def start_contention(contended: bool) -> BusyNeighbour | None:
    return BusyNeighbour() if contended else None


def contend(runners: dict, engines: list, neighbour: BusyNeighbour | None) -> dict:
    """The runners fitting their threads to the free cores before each reply (torch's, for
    spectui and transformers; llama.cpp's own); the neighbour is closed with the engines."""
    if neighbour is None:
        return runners
    from spectui.bench.anchors.llamacpp import LlamaCppRunner

    engines.append(neighbour)
    for engine in engines:
        if isinstance(engine, LlamaCppRunner):
            engine.fit_to_free_cores = True
    from spectui.core.engine import Engine

    spectui_engines = [engine for engine in engines if isinstance(engine, Engine)]
    return {name: fitted(runner, spectui_engines) for name, runner in runners.items()}


def fitted(runner: Callable[..., T], spectui_engines: list[Engine]) -> Callable[..., T]:
    def run(*args: object, **kwargs: object) -> T:
        from spectui.engines import threads

        count = threads.fit_threads()
        for engine in spectui_engines:  # a ggml engine's own threads (torch's are fitted above)
            engine.use_threads(count)
        return runner(*args, **kwargs)

    return run
