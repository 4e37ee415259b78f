"""What a switch to another engine falls back on when the new one fails to load.

On the CPU the engine in use stays open while the new one loads: a failed load leaves the
chat on it, as it was. An engine that holds a GPU (its memory pool, a model in device
memory) is closed first, since one GPU rarely holds two; a failed load then loads it again.
"""

from __future__ import annotations

from dataclasses import dataclass

from spectui.core.engine import Engine, EngineInfo
from spectui.host.baseline import Baseline
from spectui.host.plan import EnginePlan


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
