"""Which kernels the embedded engine computes with, and building it on ggml from the GGUFs.

ggml (llama.cpp's CPU kernels through libllama) is the CPU default for every model that has a
GGUF: it maps the file as it is (no conversion, no packing) and decodes twice as fast as
torch's int8 here (benchmarks/ggml-backend.md). torch stays for CUDA/MPS, explicit dtypes,
Medusa/EAGLE heads and models without a GGUF.
"""

from __future__ import annotations

from dataclasses import dataclass

from spectui.core.engine import Engine, Progress
from spectui.core.errors import UsageError
from spectui.models.registry import ModelPair
from spectui.settings.options import EngineOptions


@dataclass(frozen=True)
class BackendChoice:
    name: str  # "ggml" or "torch"
    why: str = ""  # why auto did not pick ggml, in a few words; "" when it did or was told


def chosen_backend(options: EngineOptions, models: ModelPair) -> BackendChoice:
    """--backend auto: ggml on a CPU when libllama loads and the models have GGUFs, else torch."""
    if options.backend == "torch":
        return BackendChoice("torch")
    problem = ggml_problem(options, models)
    if options.backend == "ggml":
        if problem:
            raise UsageError(f"--backend ggml: {problem}")
        return BackendChoice("ggml")
    return BackendChoice("torch", problem) if problem else BackendChoice("ggml")


def ggml_problem(options: EngineOptions, models: ModelPair) -> str | None:
    """Why these options and models cannot run on ggml, or None."""
    from spectui.engines.speculative.methods import drafter
    from spectui.models.gguf_local import missing_gguf

    if options.device.startswith(("cuda", "mps")):
        return f"--device {options.device} runs on torch"
    if options.dtype != "auto":
        return f"--dtype {options.dtype} runs on torch"
    if drafter(options.method) == "heads":
        return f"{options.method} heads run on torch"
    missing = missing_gguf(models, with_draft=drafter(options.method) == "draft model")
    if missing:
        return missing
    if options.device == "auto":
        from spectui.engines.vllm.build import cuda_present

        if cuda_present():
            return "a CUDA device is present"
    from spectui.engines.ggml.lib import library_problem

    return library_problem()


def build_ggml_engine(options: EngineOptions, models: ModelPair, progress: Progress | None = None) -> Engine:
    from spectui.engines.speculative.methods import drafter
    from spectui.engines.speculative.plain import plain_stand_in
    from spectui.engines.ggml.load import load_ggml_engine
    from spectui.models.gguf_local import gguf_models
    from spectui.engines.speculative.cross_vocab import encoder_of
    from spectui.models.tokenizer_json import JsonTokenizer
    from spectui.models.vocab_map import draft_vocab

    report = progress or no_progress
    options = plain_stand_in(options, models)
    files = gguf_models(models, with_draft=drafter(options.method) == "draft model", progress=report)  # each model asked once
    target, draft = files.target, files.draft
    # Before weights load: the pair's shared tokens (one tokenizer, or TLI's intersection).
    vocab = draft_vocab(target.name, target.tokenizer, draft.name, draft.tokenizer) if draft is not None else None
    encode = encoder_of(JsonTokenizer(draft.tokenizer)) if draft is not None and vocab is not None and not vocab.identical else None
    report(f"{target.name} load", 0, 1)
    with files.loading():
        engine = load_ggml_engine(
            target.gguf, JsonTokenizer(target.tokenizer), options.method, draft.gguf if draft else None,
            target_name=target.name, draft_name=draft.name if draft else None,
            lookup=(options.lookup_min, options.lookup_max), history_drafting=options.history_drafting,
            vocab=vocab, draft_encode=encode, vocab_how=options.vocab,
        )
    report(f"{target.name} load", 1, 1)
    return engine


def no_progress(stage: str, done: int, total: int) -> None:
    pass
