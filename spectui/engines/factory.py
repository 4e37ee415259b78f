"""One place that turns options into an engine: embedded, vLLM in-process, or a vLLM server."""

from __future__ import annotations

from dataclasses import replace

from spectui.settings.options import EngineOptions


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
    benchmarks/bench-ggml-conversations.md), draft where a GPU runs the target or --draft names one."""
    if options.method != "auto":
        return options
    if options.draft is None and chosen_engine(options) == "embedded" and not _on_gpu(options.device):
        return replace(options, method="suffix", auto_k=options.auto_k or options.k > 0)
    return replace(options, method="draft")


def _on_gpu(device: str) -> bool:
    if device == "auto":
        from spectui.engines.vllm.build import cuda_present

        return cuda_present()
    return device != "cpu"


def build_engine(options: EngineOptions, progress=None):
    from spectui.core.errors import LOAD_ADVICE, VLLM_LOAD_ADVICE, is_out_of_memory, out_of_memory

    try:
        return _build(options, progress)
    except BaseException as error:
        if is_out_of_memory(error):
            advice = VLLM_LOAD_ADVICE if chosen_engine(options) == "vllm" else LOAD_ADVICE
            raise out_of_memory(error, "loading the models", advice) from None
        raise


def _build(options: EngineOptions, progress):
    options = settled_method(options)
    name = chosen_engine(options)
    if name == "vllm":
        from spectui.engines.vllm.build import build_vllm_engine

        return build_vllm_engine(options, progress=progress)
    if name == "server":
        from spectui.engines.server.engine import build_server_engine

        return build_server_engine(options, progress=progress)
    from spectui.engines.embedded.build import build_embedded_engine
    from spectui.engines.llamacpp.build import build_ggml_engine, chosen_backend

    backend = chosen_backend(options)
    if backend.name == "ggml":
        return build_ggml_engine(options, progress=progress)
    return build_embedded_engine(options, progress=progress, why_torch=backend.why)
