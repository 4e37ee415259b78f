"""Build spectui's loop on the torch backend from CLI options and the models they named: check,
load, wire the proposer."""

from __future__ import annotations

from spectui.settings.options import EngineOptions
from typing import TYPE_CHECKING, Any

from spectui.core.engine import EngineInfo, Kernels, Progress
from spectui.core.errors import UsageError
from spectui.models.registry import ModelPair, ResolvedModel

if TYPE_CHECKING:
    from transformers import PreTrainedModel

    from spectui.engines.speculative.engine import SpeculativeEngine
    from spectui.engines.speculative.cross_vocab import Encode
    from spectui.models.vocab_map import VocabMap


def resolve_device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise UsageError(f"--device {device}: no CUDA device is available here")
    return device


def build_embedded_engine(options: EngineOptions, models: ModelPair, progress: Progress | None = None,
                          why_torch: str = "", static: bool | None = None):
    """static: the static KV cache and CUDA graphs on or off (None: static_kv_wanted decides)."""
    from spectui.engines.speculative.cross_vocab import encoder_of
    from spectui.engines.speculative.plain import plain_stand_in
    from spectui.engines.speculative.methods import drafter, token_proposer
    from spectui.engines.torch_backend.backend import torch_engine, torch_vocab_proposer
    from spectui.engines.torch_backend.static_kv import static_kv_wanted
    from spectui.models.load import LoadRequest, load_model, load_models, resolve_dtype

    target = models.target
    device = resolve_device(options.device)
    target_dtype = resolve_dtype(options.dtype, device)
    draft_name = proposer = None  # every method below sets the proposer
    options = plain_stand_in(options, models)
    if drafter(options.method) == "draft model":
        draft = models.draft_model()
        draft_name = draft.name
        vocab, encode = checked_draft_vocab(target, draft, progress)  # before any weights load; may fetch both
        # Side by side: the two models' layers are packed in one pool of threads.
        (target_model, tokenizer), (draft_model, _) = load_models(
            [LoadRequest(target, target_dtype),
             LoadRequest(draft, draft_dtype(target_dtype, device), tokenizer=False)],
            device, progress)
        proposer = torch_vocab_proposer(draft_model, logit_width(target_model), vocab, encode,
                                        encoder_of(tokenizer), options.vocab)
    else:
        if drafter(options.method) == "heads":
            draft_name = heads_folder(options)  # checked before the target's weights load
        target_model, tokenizer = load_model(target, target_dtype, device, progress)
    if drafter(options.method) == "tokens":
        proposer = token_proposer(options.method, tokenizer, (options.lookup_min, options.lookup_max),
                                  options.history_drafting)
    elif drafter(options.method) == "heads":
        assert draft_name is not None
        proposer = load_heads_proposer(options.method, draft_name, target_model, target.name, options.tree_width)
    info = EngineInfo(
        name="embedded",
        target=target.name,
        draft=draft_name,
        method=options.method,
        dtype=target_dtype,
        device=device,
        backend=f"torch {target_dtype}: {why_torch}" if why_torch else "",
        kernels=torch_kernels(),
        draft_vocab=proposer.vocab_words if proposer is not None else "",
    )
    engine = torch_engine(target_model, tokenizer, proposer, info)
    if static_kv_wanted(device) if static is None else static:  # CUDA: static caches and graphs, warmed here
        warm_static_caches(engine, options.k, options.auto_k, progress)
    return engine


def warm_static_caches(engine: SpeculativeEngine, k: int, auto: bool, progress: Progress | None) -> None:
    """Static caches and their graphs, captured now; the load log says what captured (or why
    none did: the first failure and its cause), as engine.info's kernels do."""
    from spectui.engines.torch_backend.static_kv import use_static_caches
    from spectui.models.fetch import note

    switched = use_static_caches(engine, k, auto)
    graphs = engine.info.kernels.graphs if engine.info.kernels is not None else None
    if switched:
        note(progress, f"static KV cache ({' and '.join(switched)}); CUDA graphs: {graphs}")


def checked_draft_vocab(target: ResolvedModel, draft: ResolvedModel, progress: Progress | None = None) -> tuple[VocabMap, Encode | None]:
    """The pair's vocabulary map and, for a draft with another tokenizer (TLI), that tokenizer's
    encode; one tokenizer is checked as before (each model's logits cover its ids)."""
    from spectui.engines.speculative.cross_vocab import encoder_of
    from spectui.models.load import check_same_vocab, load_tokenizer, pair_folders
    from spectui.models.vocab_map import draft_vocab

    folders = pair_folders(target, draft, progress)
    vocab = draft_vocab(target.name, folders[0], draft.name, folders[1])
    if vocab.identical:
        check_same_vocab(target, draft, progress, folders)
        return vocab, None
    return vocab, encoder_of(load_tokenizer(draft, progress))


def torch_kernels() -> Kernels:
    import torch

    return Kernels("torch", torch.get_num_threads(), "torch", torch.__version__)


def load_draft_proposer(draft: ResolvedModel, target: ResolvedModel, target_model: PreTrainedModel, target_dtype: str,
                        device: str, progress: Progress | None = None):
    """A draft model's drafter, its weights loaded beside the target's (another tokenizer: TLI)."""
    from spectui.engines.torch_backend.backend import torch_vocab_proposer
    from spectui.models.load import load_model

    vocab, encode = checked_draft_vocab(target, draft, progress)
    draft_model, _ = load_model(draft, draft_dtype(target_dtype, device), device, progress)
    return torch_vocab_proposer(draft_model, logit_width(target_model), vocab, encode)


def load_heads_proposer(method: str, heads_dir: str, target_model: Any, target_name: str, tree_width: int = 1):
    """medusa / eagle heads from a folder of `spectui heads train`'s, checked against the target."""
    from pathlib import Path

    from spectui.engines.torch_backend.head_proposers import head_proposer
    from spectui.heads.store import load_heads

    heads, _ = load_heads(Path(heads_dir), target_model, target_name, kind=method)
    return head_proposer(heads, method, target_model, tree_width)


def heads_folder(options: EngineOptions) -> str:
    """The --heads folder, checked before the target's weights load."""
    from spectui.heads.store import read_config

    if options.heads is None:
        raise UsageError(f"--method {options.method} on the embedded engine needs --heads DIR (make one with spectui heads train)")
    config = read_config(options.heads)
    if config["kind"] != options.method:
        raise UsageError(f"{options.heads} holds {config['kind']} heads: pass --method {config['kind']}")
    return options.heads


def draft_dtype(target_dtype: str, device: str) -> str:
    """The draft may round differently from the target: that changes acceptance, not output.

    On CPU the fastest form wins (int8 with activations quantised per tensor and transformers'
    attention: not batch-invariant); elsewhere the draft follows the target.
    """
    if device == "cpu" and target_dtype in ("int8", "float32"):
        return "int8-dynamic"
    return target_dtype


def logit_width(model: PreTrainedModel) -> int:
    return model.config.vocab_size
