"""Which engine the chat runs and where: the policy, as plain functions of the ChatConfig.

The embedded engine runs in a process of its own (SPECTUI_ENGINE_PROCESS=0 keeps it in a
thread of the app's); an engine that fixes k when it starts (vLLM) is rebuilt for a new k;
the compare view's baseline (k = 0) is a second engine where the chat's cannot run k = 0.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from spectui.core.engine import Engine, Progress
from spectui.models.registry import ModelPair

if TYPE_CHECKING:  # the settings load where an engine is built, not when the chat starts
    from spectui.settings.config import ChatConfig
    from spectui.settings.options import EngineOptions

Build = Callable[[Progress], Engine]  # runs in a thread

# Engines rebuilt with a new k when k is fixed at start (a server's k is the server's).
RESTARTS_FOR_K = ("auto", "embedded", "vllm")


@dataclass(frozen=True)
class EnginePlan:
    build: Build
    build_for_k: Callable[[int], Build] | None = None  # None: a new k cannot come from a rebuild
    build_baseline: Build | None = None  # the compare view's k = 0 engine, where k is fixed

    def build_at(self, k: int) -> Build:
        """What builds the engine to run k: a rebuild with k where it fixes k at start, else its build."""
        return self.build_for_k(k) if self.build_for_k is not None else self.build


def plan_for(config: ChatConfig, models: ModelPair | None) -> EnginePlan:
    """The plan for the chat's config and the models it names, resolved where the config was
    read (None for an engine that names no models of spectui's: a server, the demo)."""
    return EnginePlan(engine_factory_for(config, models), engine_factory_for_k(config, models),
                      baseline_factory_for(config, models))


def engine_factory_for(config: ChatConfig, models: ModelPair | None) -> Build:
    """build(progress) -> Engine for the configured engine."""
    if config.engine == "scripted":
        from spectui.engines.scripted import scripted_engine_factory

        return scripted_engine_factory(step_delay=0.03)

    def build(progress: Progress) -> Engine:
        from spectui.engines.factory import build_engine, chosen_engine
        from spectui.settings.config import engine_options

        options = engine_options(config)
        if chosen_engine(options) == "embedded" and engine_in_process():
            from functools import partial

            from spectui.engines.process import ProcessEngine

            return ProcessEngine(partial(build_engine, options, models), progress)
        return build_engine(options, models, progress)

    return build


def engine_in_process() -> bool:
    """The embedded engine runs in a process of its own unless SPECTUI_ENGINE_PROCESS=0
    (a thread of the app's process: for comparing the two, and for debuggers)."""
    return os.environ.get("SPECTUI_ENGINE_PROCESS", "1") != "0"


def engine_factory_for_k(config: ChatConfig, models: ModelPair | None) -> Callable[[int], Build] | None:
    """k -> build, for engines that take k when they start (vLLM); None where a new k
    cannot come from a rebuild."""
    if config.engine not in RESTARTS_FOR_K:
        return None
    return lambda k: engine_factory_for(replace(config, k=k), models)


def baseline_share(gpu_memory_utilization: float) -> float:
    """The GPU share left for a second vLLM engine beside the chat's (the compare view's
    baseline): what the first did not reserve, keeping 5% for everything else."""
    return round(max(0.05, min(gpu_memory_utilization, 0.95 - gpu_memory_utilization)), 2)


def baseline_factory_for(config: ChatConfig, models: ModelPair | None) -> Build | None:
    """build for the compare view's baseline (k = 0) where the chat's engine fixes k at
    start: a --baseline-server, or a second vLLM engine without a speculative_config."""
    if config.baseline_server:
        return engine_factory_for(replace(config, engine="server", server=config.baseline_server, k=0, speculative_config=None),
                                  None)
    if config.engine in ("auto", "vllm"):
        return engine_factory_for(replace(
            config, k=0, speculative_config=None, gpu_memory_utilization=baseline_share(config.gpu_memory_utilization)
        ), models)
    return None


# Engines whose choices can be checked before the engine loads (a server names its own model).
CHECKS_MODEL_NAMES = ("auto", "embedded", "vllm")


def check_engine_choice(config: ChatConfig, models: ModelPair | None) -> None:
    """What can be refused before an engine loads is refused here, as one line (a
    spectui.core.errors exception), not as a failed load: `spectui chat` checks its options
    with it, the model screen what the user chose. The names were resolved (and an unknown
    one refused) where they were read."""
    if config.engine not in CHECKS_MODEL_NAMES:
        return
    assert models is not None, "the models of a local engine are resolved where its options are read"
    from spectui.settings.config import engine_options
    from spectui.settings.options import EMBEDDED_METHODS

    if config.heads is not None:
        from spectui.engines.torch_backend.build import heads_folder

        heads_folder(engine_options(config))  # there, and of the method asked for
    check_draft_named(engine_options(config), models)
    if config.engine == "auto" and config.method not in EMBEDDED_METHODS + ("auto",) and config.heads is None:
        from spectui.engines.factory import chosen_engine

        if chosen_engine(engine_options(config)) == "embedded":
            from spectui.core.errors import UsageError

            raise UsageError(
                f"--method {config.method} needs vLLM, and auto picked the embedded engine here "
                "(no vLLM or no GPU): use --engine vllm, or --method draft / ngram"
            )


def settled_config(config: ChatConfig) -> ChatConfig:
    """The chat's config with --method auto made concrete (engines/factory.py settled_method):
    the live k starts as auto where auto picks suffix, so the bar and keys say what runs."""
    if config.method != "auto" or config.engine == "scripted":
        return config
    from spectui.engines.factory import settled_method
    from spectui.settings.config import engine_options

    options = settled_method(engine_options(config))
    return replace(config, method=options.method, k="auto" if options.auto_k else config.k)


def check_draft_named(options: EngineOptions, models: ModelPair) -> None:
    """The draft method needs a draft: named, or the target's preset one (k = 0 drafts nothing)."""
    if options.method != "draft" or not (options.k or options.auto_k):
        return
    models.draft_model()  # raises the one-line UsageError
