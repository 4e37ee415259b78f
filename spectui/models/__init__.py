"""Models: names and aliases, weights from the package index, GGUF conversion, loading.

Importing this package is cheap (no torch, no transformers): those load inside the functions
that need them.
"""

from spectui.models.fetch import ProgressFn, no_progress, rich_progress
from spectui.models.load import (
    DTYPES,
    LoadRequest,
    VocabCheck,
    check_same_vocab,
    ensure_local,
    load_model,
    load_models,
    load_tokenizer,
    model_folder,
    resolve_dtype,
)
from spectui.models.registry import (
    DEFAULT_DRAFT,
    DEFAULT_TARGET,
    MODELS,
    ModelPair,
    ModelSpec,
    ResolvedModel,
    cache_dir,
    get_spec,
    list_models,
    resolve,
    resolve_pair,
)

__all__ = [
    "DEFAULT_DRAFT",
    "DEFAULT_TARGET",
    "DTYPES",
    "LoadRequest",
    "MODELS",
    "ModelPair",
    "ModelSpec",
    "ProgressFn",
    "ResolvedModel",
    "VocabCheck",
    "cache_dir",
    "check_same_vocab",
    "ensure_local",
    "get_spec",
    "list_models",
    "load_model",
    "load_models",
    "load_tokenizer",
    "model_folder",
    "no_progress",
    "resolve",
    "resolve_dtype",
    "resolve_pair",
    "rich_progress",
]
