"""A model built from its folder's int8 store: no float32 weights are ever made.

The transformers model is created with empty weights, each Linear layer (or fused group)
becomes an Int8Linear packed straight from its stored int8 weights and scales, the token
embedding a BlockEmbedding over the memory-mapped GGUF blocks, and the few float tensors left
(norms, biases) are read in. Packing is the slow part (fbgemm reorders every weight); it
releases the GIL, so `run` may spread the layers over threads.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spectui.core.errors import ModelError
from spectui.models.convert import BLOCKS_SUFFIX, GGML_TYPE_KEY, INT8_FILE, SCALE_SUFFIX
from spectui.models.tensorfile import TensorFile

if TYPE_CHECKING:
    from torch import nn

    from spectui.models.quantize import RunGroups

Group = tuple[str, tuple[str, ...]]  # a parent module's name and the Linear layers installed as one

LayerProgress = Callable[[int, int], None]  # (layers packed, layers in all)

# transformers imports its classes lazily, and two threads importing at once can fail: models
# (and tokenizers) are made one at a time under this lock; only the packing runs side by side.
TRANSFORMERS_LOCK = threading.Lock()


def build_from_store(folder: Path, *, batch_invariant: bool, run: RunGroups | None = None,
                     on_layer: LayerProgress | None = None):
    """The model stored in `folder`, int8, in eval mode with gradients off.

    batch_invariant: attention one query row at a time (spectui.models.quantize), so a verify
    forward equals token-by-token decoding bit for bit: the target's mode. Off, attention is
    transformers' default (faster, for a draft).
    run(function, items): how the layers are packed (map, or a thread pool's map).
    """
    from spectui.models.quantize import install_int8, linear_groups, use_batch_invariant_attention

    weights = TensorFile(folder / INT8_FILE)
    model = _empty_model(folder)
    groups = linear_groups(model)
    done = [0]
    done_lock = threading.Lock()

    def weights_of(name: str):
        bias = f"{name}.bias"
        return (_tensor(weights, f"{name}.weight"), _tensor(weights, f"{name}.weight{SCALE_SUFFIX}"),
                _tensor(weights, bias) if bias in weights else None)

    def counted(function: Callable[[Group], None], items: list[Group]) -> Iterable[object]:
        def install(item: Group) -> None:
            function(item)
            with done_lock:
                done[0] += 1
                count = done[0]
            if on_layer is not None:
                on_layer(count, len(groups))
        return (run or map)(install, items)

    install_int8(model, groups, weights_of, run=counted, per_row=batch_invariant)  # a draft: per tensor
    _install_embedding(model, weights)
    _fill_the_rest(model, weights)
    model.eval()
    model.requires_grad_(False)
    if batch_invariant:
        with TRANSFORMERS_LOCK:
            use_batch_invariant_attention(model)
    return model


def _empty_model(folder: Path):
    import torch

    try:
        with TRANSFORMERS_LOCK:
            from accelerate import init_empty_weights
            from transformers import AutoConfig, AutoModelForCausalLM

            config = AutoConfig.from_pretrained(str(folder))
            with init_empty_weights():  # parameters on the meta device; buffers (rotary tables) real
                return AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    except Exception as error:
        raise ModelError(f"cannot build the model in {folder}: {_first_line(error)}") from None


def _install_embedding(model: Any, weights: TensorFile) -> None:
    import torch

    from spectui.models.embedding import BlockEmbedding

    embedding = model.get_input_embeddings()
    name = _module_name(model, embedding)
    blocks = f"{name}.weight{BLOCKS_SUFFIX}"
    if blocks in weights:
        ggml_type = int(weights.metadata[GGML_TYPE_KEY + blocks])
        model.set_input_embeddings(BlockEmbedding(weights.mapped(blocks), ggml_type, embedding.embedding_dim))
    else:
        embedding.weight = torch.nn.Parameter(_tensor(weights, f"{name}.weight"), requires_grad=False)


def _fill_the_rest(model: nn.Module, weights: TensorFile) -> None:
    """Read every parameter and buffer still on the meta device (norms, biases) from the store."""
    import torch

    for module_name, module in model.named_modules():
        for kind in ("_parameters", "_buffers"):
            for name, tensor in list(getattr(module, kind).items()):
                if tensor is None or tensor.device.type != "meta":
                    continue
                full = f"{module_name}.{name}" if module_name else name
                if full not in weights:
                    raise ModelError(f"{weights.path} has no tensor {full}")
                value = _tensor(weights, full)
                if tuple(value.shape) != tuple(tensor.shape):
                    raise ModelError(f"{weights.path}: {full} is {tuple(value.shape)}, the model wants {tuple(tensor.shape)}")
                getattr(module, kind)[name] = torch.nn.Parameter(value, requires_grad=False) \
                    if kind == "_parameters" else value


def _tensor(weights: TensorFile, name: str):
    import torch

    return torch.from_numpy(weights.read(name))


def _module_name(model: nn.Module, module: nn.Module) -> str:
    for name, candidate in model.named_modules():
        if candidate is module:
            return name
    raise ModelError("the model's input embedding is not one of its modules")


def _first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return (lines[0] if lines else type(error).__name__)[:200]
