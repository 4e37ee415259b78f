"""The drafters a bench run compares on one loaded target, and what each costs to hold.

Memory is counted from the tensors each drafter holds (packed int8 at its packed size),
and measured as the process's resident memory before and after it loads (which the
allocator's reuse of freed pages can make smaller than the weights). A draft model also
grows a KV cache as the reply does; that part is counted from its config.
"""

from __future__ import annotations

import gc
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spectui.core.errors import UsageError
from spectui.models.fetch import ProgressFn
from spectui.models.registry import ModelPair
from spectui.settings.options import HEAD_METHODS

if TYPE_CHECKING:
    import torch


def heads_by_method(folders: list[Path], methods: list[str]) -> dict[str, Path]:
    """{medusa / eagle: its folder}, each head method asked for having exactly one."""
    from spectui.heads.store import read_config

    found: dict[str, Path] = {}
    for folder in folders:
        kind = read_config(folder)["kind"]
        if kind in found:
            raise UsageError(f"--heads {folder}: {found[kind]} already gives the {kind} heads")
        found[kind] = Path(folder)
    missing = [method for method in methods if method in HEAD_METHODS and method not in found]
    if missing:
        raise UsageError(f"--methods {missing[0]} needs --heads DIR with {missing[0]} heads (make them with spectui heads train)")
    unused = [kind for kind in found if kind not in methods]
    if unused:
        raise UsageError(f"--heads gives {unused[0]} heads but --methods does not run {unused[0]}")
    return found


def resident_bytes() -> int | None:
    from spectui.measure.metrics import read_memory

    reading = read_memory("cpu")  # this process's RSS
    return reading.used_bytes if reading is not None else None


def weights_bytes(module: torch.nn.Module) -> int:
    """Bytes of a module's own tensors, each counted once (a tied weight is one tensor),
    quantized ones at their packed size: what holding this drafter costs beside the target."""
    import torch

    seen: set[int] = set()
    total = 0

    def add(value: object) -> None:
        nonlocal total
        if isinstance(value, torch.Tensor):
            if value.data_ptr() not in seen:
                seen.add(value.data_ptr())
                total += value.numel() * value.element_size()
        elif isinstance(value, (tuple, list)):  # torch's packed int8 Linear keeps (weight, bias)
            for item in value:
                add(item)

    for value in module.state_dict().values():
        add(value)
    # What a state dict does not hold: spectui's int8 as fbgemm packed it (a byte per weight)
    # and a token embedding kept as the GGUF's blocks.
    from spectui.models.embedding import BlockEmbedding
    from spectui.models.quantize import int8_linear_class

    int8_linear = int8_linear_class()  # the class itself, not the module's lazy name: its sizes are ints
    for part in module.modules():
        if isinstance(part, int8_linear):
            total += part.out_features * part.in_features
        elif isinstance(part, BlockEmbedding):
            total += part.blocks.nbytes
    return total


def proposer_module(proposer: Any) -> torch.nn.Module:
    """The drafter's own weights: the draft model, or the medusa / eagle heads."""
    if hasattr(proposer, "draft"):
        return proposer.draft.model
    return getattr(proposer, "heads", None) or getattr(proposer, "drafter")


def kv_bytes_per_token(model: Any) -> int:
    """Keys and values one token adds to a model's cache, in the dtype it computes in."""
    config = model.config
    layers = int(config.num_hidden_layers)
    heads = int(getattr(config, "num_key_value_heads", None) or config.num_attention_heads)
    head_dim = int(getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads)
    # The cache holds what the attention computes in: what the embedding layer hands on, even
    # where the linear layers are int8 and the embedding itself is stored in GGUF blocks.
    import torch

    embedding = model.get_input_embeddings()
    # The index goes where the embedding is: a CPU index into a CUDA embedding stops the bench.
    with torch.no_grad():
        embedded = embedding(torch.zeros(1, 1, dtype=torch.long, device=device_of(embedding, model)))
    return 2 * layers * heads * head_dim * embedded.element_size()


def device_of(*modules: torch.nn.Module) -> torch.device:
    """The device of the first tensor any of the modules holds (CPU where none holds one: GGUF
    blocks kept outside torch)."""
    import itertools

    import torch

    for module in modules:
        for tensor in itertools.chain(module.parameters(), module.buffers()):
            return tensor.device
    return torch.device("cpu")


def add_ggml_drafters(engine: Any, models: ModelPair, methods: list[str], progress: ProgressFn | None = None,
                      vocab_how: str = "auto") -> dict[str, dict]:
    """add_drafters for an engine on ggml: the draft model's GGUF mapped by llama.cpp (another
    tokenizer: TLI or SLEM as vocab_how says, its overlap beside its name)."""
    from spectui.engines.speculative.methods import drafter
    from spectui.engines.speculative.suffix import SuffixProposer
    from spectui.engines.ggml.backend import ggml_draft_proposer
    from spectui.engines.ggml.lib import LlamaModel
    from spectui.models.gguf_local import gguf_models
    from spectui.engines.speculative.cross_vocab import encoder_of
    from spectui.models.tokenizer_json import JsonTokenizer
    from spectui.models.vocab_map import draft_vocab

    costs: dict[str, dict] = {"ngram": {"name": "prompt lookup", "weights_bytes": 0, "resident_bytes": 0}}
    for method in methods:
        if drafter(method) == "heads":
            raise UsageError(f"{method} heads run on torch: add --backend torch")
        if method == "suffix":  # this conversation only: a case's earlier rounds are no user's history
            engine.add_proposer(method, SuffixProposer(use_history=False), None)
            costs[method] = {"name": "suffix decoding (conversation)", "weights_bytes": 0, "resident_bytes": 0}
        elif method == "draft":
            files = gguf_models(models, with_draft=True, progress=progress)
            draft = files.draft
            assert draft is not None, "with_draft: the draft, or a UsageError"
            vocab = draft_vocab(files.target.name, files.target.tokenizer, draft.name, draft.tokenizer)
            encode = None if vocab.identical else encoder_of(JsonTokenizer(draft.tokenizer))
            name, gguf = draft.name, draft.gguf
            before = resident_bytes()
            proposer = ggml_draft_proposer(LlamaModel(gguf), engine.target.model.vocab_size, vocab, encode,
                                           encoder_of(engine.tokenizer), vocab_how)
            after = resident_bytes()
            engine.add_proposer(method, proposer, name)
            # the bench's drafter table says the pair's overlap and which rule drafts
            shown = f"{name} (draft vocabulary: {proposer.vocab_words})" if proposer.vocab_words else name
            costs[method] = {"name": shown, "weights_bytes": gguf.stat().st_size,
                             "resident_bytes": after - before if before is not None and after is not None else None}
    return costs


def add_drafters(engine: Any, models: ModelPair, methods: list[str], heads: dict[str, Path],
                 progress: ProgressFn | None = None) -> dict[str, dict]:
    """Load each method's drafter beside the engine's target; {method: what it costs}."""
    from spectui.engines.torch_backend.build import load_draft_proposer, load_heads_proposer
    from spectui.engines.torch_backend.static_kv import on_the_targets_path
    from spectui.engines.speculative.suffix import SuffixProposer
    from spectui.heads.store import read_config

    costs: dict[str, dict] = {"ngram": {"name": "prompt lookup", "weights_bytes": 0, "resident_bytes": 0}}
    target_name = engine.info.target
    for method in methods:
        if method == "ngram":
            continue
        if method == "suffix":  # this conversation only: a case's earlier rounds are no user's history
            engine.add_proposer(method, SuffixProposer(use_history=False), None)
            costs[method] = {"name": "suffix decoding (conversation)", "weights_bytes": 0, "resident_bytes": 0}
            continue
        draft = models.draft_model() if method == "draft" else None
        name = draft.name if draft is not None else str(heads[method])
        gc.collect()
        before = resident_bytes()
        if draft is not None:
            proposer = load_draft_proposer(draft, models.target, engine.target.model, engine.info.dtype,
                                           engine.info.device, progress)
        else:
            proposer = load_heads_proposer(method, name, engine.target.model, target_name)
        gc.collect()
        after = resident_bytes()
        cost = {"name": name, "weights_bytes": weights_bytes(proposer_module(proposer)),
                "resident_bytes": after - before if before is not None and after is not None else None}
        if method == "draft":
            cost["kv_bytes_per_token"] = kv_bytes_per_token(proposer_module(proposer))  # the draft model
        else:
            config = read_config(name)
            cost["file_bytes"] = sum(path.stat().st_size for path in Path(name).iterdir() if path.is_file())
            cost["training"] = config.get("training", {})
        engine.add_proposer(method, on_the_targets_path(engine, proposer), name)
        costs[method] = cost
    return costs
