"""GGUF -> a Hugging Face folder (safetensors, config, tokenizer, chat template) in the cache.

Converting once makes every later start a plain `from_pretrained` of a local folder. On a busy
2-core CPU a conversion took 1 min (SmolLM2-135M), 4 min (Qwen2.5-Coder-0.5B) and 5.5 min
(1.5B), most of it transformers parsing the GGUF metadata (151936 tokens, three times: for
the tokenizer, the config and the weights); loading the converted folder takes seconds.

The weights are stored in float32: GGUF blocks dequantize (in float32) to values that
bfloat16 would round again, so float32 keeps the converted model identical to loading the
GGUF itself. It costs disk (1.5B: 7.1 GB), and loading in another dtype is one cast.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import shutil
import tempfile
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path

from spectui.core.errors import ModelError
from spectui.models.fetch import ProgressFn, no_progress
from spectui.models.registry import MARKER_FILE, read_marker

STORAGE_DTYPE = "float32"


def is_converted(folder: Path, source_sha256: str | None = None) -> bool:
    """True when `folder` holds a complete conversion (of the file with this hash, when given)."""
    marker = read_marker(folder)
    if marker is None:
        return False
    return source_sha256 is None or marker.get("source_sha256") == source_sha256


def gguf_architecture(gguf_path: Path) -> str | None:
    """general.architecture from the file's header; None when the header cannot be read
    (the conversion then says what is wrong with the file)."""
    try:
        from gguf import GGUFReader

        field = GGUFReader(str(gguf_path)).get_field("general.architecture")
        return field.contents() if field is not None else None
    except Exception:
        return None


def check_architecture(gguf_path: Path) -> None:
    from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES

    architecture = gguf_architecture(gguf_path)
    supported = [name for name in GGUF_SUPPORTED_ARCHITECTURES if name not in ("general", "tokenizer")]
    if architecture is not None and architecture not in supported:
        raise ModelError(
            f"{gguf_path.name} is a {architecture} model; transformers converts only {', '.join(supported)}"
        )


def convert_gguf(
    gguf_path: Path,
    out_dir: Path,
    *,
    alias: str | None = None,
    source_sha256: str | None = None,
    progress: ProgressFn | None = None,
) -> Path:
    """Convert `gguf_path` into the folder `out_dir`, atomically; returns `out_dir`.

    The folder is built next to its final place and renamed into it, and spectui.json is
    written last, so a crash leaves either nothing or a complete conversion.
    """
    report = progress or no_progress
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    check_architecture(gguf_path)

    out_dir.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}-", dir=out_dir.parent))
    work.chmod(0o755)  # mkdtemp makes it 0700; the final folder should look like any other
    folder, filename = str(gguf_path.parent), gguf_path.name
    try:
        with quiet_transformers(report):
            report("tokenizer", 0, 1)
            try:
                tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=filename)
            except Exception as error:  # transformers raises many types for a file it cannot read
                raise ModelError(f"cannot read a tokenizer from {gguf_path.name}: {_one_line(error)}") from None
            report("tokenizer", 1, 1)
            report("convert", 0, 0)
            try:
                model = AutoModelForCausalLM.from_pretrained(
                    folder, gguf_file=filename, dtype=torch.float32, **_dequantize_kwargs()
                )
            except Exception as error:
                raise ModelError(f"cannot convert {gguf_path.name}: {_one_line(error)}") from None
            _drop_quantizer(model)
            report("save", 0, 1)
            model.save_pretrained(work)
            tokenizer.save_pretrained(work)
            del model
        marker = {
            "alias": alias,
            "source_file": gguf_path.name,
            "source_sha256": source_sha256,
            "storage_dtype": STORAGE_DTYPE,
            "has_chat_template": bool(getattr(tokenizer, "chat_template", None)),
            "converted_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "transformers_version": transformers.__version__,
            "torch_version": torch.__version__,
        }
        (work / MARKER_FILE).write_text(json.dumps(marker, indent=2) + "\n")
        if out_dir.exists():  # an old or incomplete conversion: replaced by this one
            shutil.rmtree(out_dir)
        os.replace(work, out_dir)
        report("save", 1, 1)
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)
    return out_dir


def _dequantize_kwargs() -> dict:
    # transformers 5.x keeps GGUF blocks packed when it has kernels for them; a packed model
    # cannot be saved as safetensors, so ask for plain weights.
    try:
        from transformers import GgufConfig
    except ImportError:  # older transformers always dequantize
        return {}
    return {"quantization_config": GgufConfig(dequantize=True)}


def _drop_quantizer(model) -> None:
    """Forget the GGUF quantizer so save_pretrained writes plain safetensors."""
    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is not None:
        quantizer.remove_quantization_config(model)
    elif getattr(model.config, "quantization_config", None) is not None:
        del model.config.quantization_config
        model.is_quantized = False


def _one_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return (text[0] if text else type(error).__name__)[:300]


# Modules whose `tqdm` draws bars while a GGUF loads; rerouted to the progress callback.
_TQDM_MODULES = ("transformers.modeling_gguf_pytorch_utils", "transformers.core_model_loading")


@contextlib.contextmanager
def quiet_transformers(progress: ProgressFn) -> Iterator[None]:
    """Silence transformers' bars and warnings on stderr (they would tear a TUI) and report
    the per-tensor dequantization as the "convert" stage instead."""
    import importlib

    from transformers.utils import logging as hf_logging

    def reporting_tqdm(iterable: Iterable | None = None, *args, desc: str | None = None, **kwargs):
        if iterable is None:  # not used this way by the GGUF loader; stay a silent no-op
            return _SilentBar()
        items = list(iterable) if not hasattr(iterable, "__len__") else iterable
        total = len(items)  # type: ignore[arg-type]
        stage = "convert" if desc and "GGUF" in desc else None

        def generate():
            for index, item in enumerate(items, start=1):
                yield item
                if stage:
                    progress(stage, index, total)

        return generate()

    patched = []
    for name in _TQDM_MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(module, "tqdm"):
            patched.append((module, module.tqdm))
            module.tqdm = reporting_tqdm
    verbosity = hf_logging.get_verbosity()
    bars_were_on = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()  # save_pretrained's "Writing model shards" and friends
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars_were_on:
            hf_logging.enable_progress_bar()
        for module, original in patched:
            module.tqdm = original


class _SilentBar:
    def update(self, *args, **kwargs) -> None: ...

    def close(self) -> None: ...

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None: ...
