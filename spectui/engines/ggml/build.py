"""Which kernels the embedded engine computes with, and building it on ggml from the GGUFs.

ggml (llama.cpp's CPU kernels through libllama) is the CPU default for every model that has a
GGUF: it maps the file as it is (no conversion, no packing) and decodes twice as fast as
torch's int8 here (benchmarks/ggml-backend.md). torch stays for CUDA/MPS, explicit dtypes,
Medusa/EAGLE heads and models without a GGUF.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass

from spectui.core.engine import Progress
from spectui.core.errors import ModelError, UsageError
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
    from spectui.models.gguf_local import has_gguf

    if options.device.startswith(("cuda", "mps")):
        return f"--device {options.device} runs on torch"
    if options.dtype != "auto":
        return f"--dtype {options.dtype} runs on torch"
    if options.method in ("medusa", "eagle"):
        return f"{options.method} heads run on torch"
    runs = [models.target]
    if options.method == "draft" and models.has_draft:
        runs.append(models.draft_model())
    for model in runs:
        if not has_gguf(model):
            return f"{model.name} has no GGUF"
    if options.device == "auto":
        from spectui.engines.vllm.build import cuda_present

        if cuda_present():
            return "a CUDA device is present"
    from spectui.engines.ggml.lib import library_problem

    return library_problem()


def build_ggml_engine(options: EngineOptions, models: ModelPair, progress: Progress | None = None):
    from spectui.engines.speculative.plain import plain_stand_in
    from spectui.engines.ggml.load import load_ggml_engine
    from spectui.models.fetch import for_model, no_progress
    from spectui.models.gguf_local import loading_marker, local_gguf, tokenizer_folder
    from spectui.models.tokenizer_json import JsonTokenizer

    report = progress or no_progress
    target_name = models.target.name
    options = plain_stand_in(options, models)
    target_gguf = local_gguf(models.target, report)
    target_tokenizer = tokenizer_folder(models.target, target_gguf, report)
    draft_name = draft_gguf = None
    if options.method == "draft":
        draft = models.draft_model()
        draft_name = draft.name
        draft_gguf = local_gguf(draft, report)
        check_same_tokens(target_name, target_tokenizer, draft_name, tokenizer_folder(draft, draft_gguf, report))
    for_model(report, target_name)("load", 0, 1)
    with loading_marker(models.target), loading_marker(models.draft_model()) if draft_gguf else nullcontext():
        engine = load_ggml_engine(
            target_gguf, JsonTokenizer(target_tokenizer), options.method, draft_gguf,
            target_name=target_name, draft_name=draft_name,
            lookup=(options.lookup_min, options.lookup_max), history_drafting=options.history_drafting,
        )
    for_model(report, target_name)("load", 1, 1)
    return engine


def check_same_tokens(target: str, target_folder, draft: str, draft_folder) -> None:
    """Refuse a draft whose token ids mean other tokens than the target's (before weights load)."""
    from spectui.models.load import token_ids, vocab_conflicts

    moved, renamed = vocab_conflicts(token_ids(target_folder), token_ids(draft_folder))
    if moved or renamed:
        raise ModelError(f"draft {draft} does not share the target's vocabulary: {moved} of {target}'s tokens have "
                         f"other ids and {renamed} ids name other tokens: pick a draft of the same model family")
