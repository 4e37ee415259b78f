"""One place that turns options into an engine: embedded, vLLM in-process, or a vLLM server."""

from __future__ import annotations

from spectui.settings.options import EngineOptions


def chosen_engine(options: EngineOptions) -> str:
    """`auto` is vLLM where it is installed and a GPU is present, the embedded engine elsewhere."""
    if options.engine != "auto":
        return options.engine
    if options.heads is not None:
        return "embedded"  # heads from `spectui heads train` run on the embedded engine only
    from spectui.engines.vllm.build import cuda_present, vllm_installed

    return "vllm" if vllm_installed() and options.device != "cpu" and cuda_present() else "embedded"


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
