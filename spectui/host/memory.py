"""The memory the panel shows: the engine's own reading when it has one, else the probe's,
with the draft's share when the engine says it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

from spectui.core.engine import Capabilities, Engine
from spectui.measure.metrics import MemoryReading, read_memory

MemoryProbe = Callable[[str], MemoryReading | None]  # device -> a reading of its memory


def engine_memory(engine: Engine | None, capabilities: Capabilities | None, probe: MemoryProbe | None,
                  engine_stats: Mapping[str, object]) -> MemoryReading | None:
    """engine None: the probe's reading of this process. The draft's share comes from an
    int attribute `draft_bytes` or a "draft_bytes" entry in the last Done.engine_stats."""
    reading = None
    if engine is not None and capabilities is not None and capabilities.memory:
        try:
            reading = engine.memory()  # vLLM: its pool, its engine processes
        except Exception:  # a panel number is not worth an error: the generic probe answers
            reading = None
    if reading is None:
        reading = (probe or read_memory)(engine.info.device if engine is not None else "cpu")
    if reading is None or engine is None:
        return reading
    draft_bytes = getattr(engine, "draft_bytes", None)
    if not isinstance(draft_bytes, int):
        draft_bytes = engine_stats.get("draft_bytes")
    return replace(reading, draft_bytes=draft_bytes) if isinstance(draft_bytes, int) else reading
