"""One place that turns options into an engine: embedded, vLLM in-process, or a vLLM server."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from spectui.core.engine import Progress
from spectui.models.registry import ModelPair
from spectui.settings.options import EngineOptions

if TYPE_CHECKING:
    from spectui.engines.ggml.build import BackendChoice
    from spectui.engines.speculative.methods import Drafter


def chosen_engine(options: EngineOptions) -> str:
    """`auto` is vLLM where it is installed and a GPU is present, the embedded engine elsewhere."""
    if options.engine != "auto":
        return options.engine
    if options.heads is not None:
        return "embedded"  # heads from `spectui heads train` run on the embedded engine only
    from spectui.engines.vllm.build import cuda_present, vllm_installed

    return "vllm" if vllm_installed() and options.device != "cpu" and cuda_present() else "embedded"


def settled_method(options: EngineOptions) -> EngineOptions:
    """--method auto made concrete: suffix with adaptive k where the embedded engine runs on a
    CPU (a verify costs ~3 plain steps there, so a draft model loses and suffix wins:
    benchmarks/reports/bench-ggml-conversations.md), draft where a GPU runs the target or --draft names one."""
    if options.method != "auto":
        return options
    if options.draft is None and chosen_engine(options) == "embedded" and not _on_gpu(options.device):
        return replace(options, method="suffix", auto_k=options.auto_k or options.k > 0)
    return replace(options, method="draft")


@dataclass(frozen=True)
class EngineChoice:
    """What runs for a configuration: the engine, the method (auto made concrete), and for the
    embedded engine its backend (why auto did not pick ggml, if it did not) and what drafts."""

    options: EngineOptions  # with the method settled
    engine: str  # embedded, vllm, server
    backend: BackendChoice | None = None  # the embedded engine's only
    drafter: Drafter | None = None  # the embedded engine's only


def engine_choice(options: EngineOptions, models: ModelPair | None) -> EngineChoice:
    """The one decision of what runs: every entry point (generate, compare, bench, the chat's
    plan) asks this, and _build builds what it says. models: resolved, None for a server."""
    options = settled_method(options)
    name = chosen_engine(options)
    if name != "embedded":
        return EngineChoice(options, name)
    assert models is not None, "the embedded engine runs models resolved where its options were read"
    from spectui.core.errors import UsageError
    from spectui.engines.ggml.build import chosen_backend
    from spectui.engines.speculative.methods import drafter

    try:
        drafts_with = drafter(options.method)
    except ValueError as error:  # a vLLM method: one line, before anything loads
        raise UsageError(str(error)) from None
    return EngineChoice(options, name, chosen_backend(options, models), drafts_with)


def _on_gpu(device: str) -> bool:
    if device == "auto":
        from spectui.engines.vllm.build import cuda_present

        return cuda_present()
    return device != "cpu"


def names_models_here(engine: str) -> bool:
    """Does this engine run models spectui names (and so resolves)? A server names its own,
    the scripted demo none."""
    return engine not in ("server", "scripted")


def models_to_run(engine: str, model: str | None, draft: str | None) -> ModelPair | None:
    """The model names a command read, resolved: called once, where it reads its options
    (everything below takes the result). None for an engine that names its own."""
    from spectui.models.registry import resolve_pair

    return resolve_pair(model, draft) if names_models_here(engine) else None


def build_engine(options: EngineOptions, models: ModelPair | None, progress: Progress | None = None):
    """The engine the options choose, running `models` (resolved where the options were read;
    None only for a server, which names its own)."""
    from spectui.core.errors import LOAD_ADVICE, VLLM_LOAD_ADVICE, is_out_of_memory, out_of_memory

    try:
        return _build(options, models, progress)
    except BaseException as error:
        if is_out_of_memory(error):
            advice = VLLM_LOAD_ADVICE if chosen_engine(options) == "vllm" else LOAD_ADVICE
            raise out_of_memory(error, "loading the models", advice) from None
        raise


def _build(options: EngineOptions, models: ModelPair | None, progress: Progress | None):
    choice = engine_choice(options, models)
    options, name = choice.options, choice.engine
    if name == "server":
        from spectui.engines.server.engine import build_server_engine

        return build_server_engine(options, progress=progress)
    assert models is not None, f"the {name} engine runs models resolved where its options were read"
    if name == "vllm":
        from spectui.engines.vllm.build import build_vllm_engine

        return build_vllm_engine(options, models, progress=progress)
    from spectui.engines.torch_backend.build import build_embedded_engine
    from spectui.engines.ggml.build import build_ggml_engine

    assert choice.backend is not None, "engine_choice picks the embedded engine's backend"
    if choice.backend.name == "ggml":
        return build_ggml_engine(options, models, progress=progress)
    return build_embedded_engine(options, models, progress=progress, why_torch=choice.backend.why)
