"""The compare view's baseline where the engine fixes k: a second engine without speculation,
started on the first run and closed with the view."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from spectui.core.engine import Engine

if TYPE_CHECKING:
    from spectui.host.host import EngineHost


class BaselineSide:
    def __init__(self, host: EngineHost, fixed_k: bool) -> None:
        self.host = host
        self.fixed_k = fixed_k
        self.engine: Engine | None = None  # the second engine, once started

    def note(self, base_engine: Engine | None) -> str:
        """The head's words on where the baseline runs (nothing where the engine runs k = 0 itself)."""
        if not self.fixed_k:
            return ""
        if self.engine is None:
            return " · baseline: a second engine, started on the first run"
        from spectui.measure.metrics import format_bytes

        pool = pool_bytes(base_engine), pool_bytes(self.engine)
        split = f" · memory reserved {format_bytes(pool[0])} + {format_bytes(pool[1])}" if all(pool) else ""
        return f" · baseline: {self.engine.info.name} engine without speculation{split}"

    def ensure(self, call_from_thread: Callable, set_busy_with: Callable[[str], None], refresh_head: Callable[[], None]) -> Engine | None:
        """The baseline engine for a fixed k, built once in the work thread (it can take a
        minute); None where the engine runs k = 0 itself."""
        if not self.fixed_k or self.engine is not None:
            return self.engine
        call_from_thread(set_busy_with, "starting the baseline engine (k = 0)")
        self.engine = self.host.baseline_engine()
        call_from_thread(refresh_head)
        return self.engine

    def close(self) -> None:
        self.engine = None
        self.host.close_baseline()  # after the run in flight: closing it under a request breaks it


def pool_bytes(engine: Engine | None) -> int | None:
    """The memory an engine reserved up front (vLLM's KV pool), when it reads its own."""
    if engine is None or not engine.info.capabilities.memory:
        return None
    reading = engine.memory()
    return reading.pool_bytes if reading is not None else None
