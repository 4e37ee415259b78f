"""An engine's Capabilities, read in one place.

Engines declare `info.capabilities` (spectui.core.engine.Capabilities). Until every engine
does, an undeclared one is read from what EngineInfo says (live_k, exact) and its name.
"""

from __future__ import annotations

from spectui.core.engine import Capabilities

FIXED_K_ENGINES = ("vllm", "server")  # k is fixed when they start


def capabilities_of(engine) -> Capabilities:
    info = engine.info
    declared = getattr(info, "capabilities", None)
    if isinstance(declared, Capabilities):
        return declared
    return Capabilities(
        live_controls=info.live_k,
        exact_provenance=info.exact,
        method_switch=callable(getattr(engine, "with_method", None)),
        restart_for_k=not info.live_k and info.name in FIXED_K_ENGINES,
        memory=callable(getattr(engine, "memory", None)),
        restarts_itself=callable(getattr(engine, "set_restart_progress", None)),
    )
