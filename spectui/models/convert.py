"""GGUF -> a model folder in the cache, one tensor at a time.

The folder holds what the engine runs: `int8.safetensors` (each Linear layer's int8 weights and
per-channel scales as spectui.models.quantize makes them, the token embedding as the GGUF's own
blocks, the rest in float32), config.json, generation_config.json and a ready tokenizer. A later
start reads these and goes; nothing is dequantised or quantised again. For vLLM, `--dtype
float32` and head training, `convert_gguf_float32` writes a plain Hugging Face folder.

Tensors are dequantised exactly as transformers' GGUF loader does it (gguf-py's `dequantize`,
then the architecture's tensor processor), one at a time, so the converted values are the ones
`from_pretrained(gguf_file=...)` gives and peak memory is one tensor, not the model.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import shutil
import tempfile
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spectui.core.errors import ModelError
from spectui.models.cache import SOURCE_HASH_KEY, STORE_FORMAT, int8_scheme, is_converted  # noqa: F401 (is_converted: re-exported)
from spectui.models.fetch import ProgressFn, no_progress
from spectui.models.gguf_file import GgufFile, GgufTensor, config_dict, read_gguf
from spectui.models.registry import MARKER_FILE, read_marker

if TYPE_CHECKING:
    import numpy as np
    from spectui.models.tensorfile import TensorWriter
    import torch

INT8_FILE = "int8.safetensors"
FLOAT32_FILE = "model.safetensors"
SCALE_SUFFIX = "_scale"  # "X.weight" (int8) has its per-channel scales in "X.weight_scale"
BLOCKS_SUFFIX = "_blocks"  # "E.weight" kept as GGUF blocks is "E.weight_blocks"
GGML_TYPE_KEY = "ggml_type:"  # metadata "ggml_type:E.weight_blocks" -> the blocks' ggml type


def check_architecture(gguf: GgufFile) -> None:
    from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES

    supported = [name for name in GGUF_SUPPORTED_ARCHITECTURES if name not in ("general", "tokenizer")]
    if gguf.architecture not in supported:
        raise ModelError(
            f"{gguf.path.name} is a {gguf.architecture} model; transformers converts only {', '.join(supported)}"
        )


def convert_gguf(
    gguf_path: Path,
    out_dir: Path,
    *,
    alias: str | None = None,
    source_sha256: str | None = None,
    progress: ProgressFn | None = None,
) -> Path:
    """Convert `gguf_path` into the model folder `out_dir` (int8 weights), atomically."""
    report = progress or no_progress
    gguf = _read(gguf_path)

    def build(work: Path) -> dict:
        with quiet_transformers(report):
            tokenizer = _save_tokenizer(gguf, work, report)
            weights = GgufWeights(gguf)
            weights.save_configs(work)
            weights.write_int8(work / INT8_FILE, report)
        return {"weights": "int8", "int8": int8_scheme(),
                "has_chat_template": bool(getattr(tokenizer, "chat_template", None))}

    return build_folder(out_dir, build, _source_fields(gguf_path, alias, source_sha256), report)


def convert_gguf_float32(
    gguf_path: Path,
    out_dir: Path,
    model_folder: Path,
    *,
    alias: str | None = None,
    source_sha256: str | None = None,
    progress: ProgressFn | None = None,
) -> Path:
    """A plain Hugging Face folder (float32 model.safetensors) in `out_dir`, its config and
    tokenizer copied from the model's folder `model_folder`."""
    report = progress or no_progress
    gguf = _read(gguf_path)

    def build(work: Path) -> dict:
        marker = read_marker(model_folder)
        assert marker is not None, "the model's folder is one spectui wrote (its marker lists the files)"
        for name in marker["files"]:
            if name != INT8_FILE:
                shutil.copy2(model_folder / name, work / name)
        with quiet_transformers(report):
            GgufWeights(gguf).write_float32(work / FLOAT32_FILE, report)
        return {"weights": "float32"}

    return build_folder(out_dir, build, _source_fields(gguf_path, alias, source_sha256), report)


def _read(gguf_path: Path) -> GgufFile:
    gguf = read_gguf(gguf_path)
    check_architecture(gguf)
    return gguf


def _source_fields(gguf_path: Path, alias: str | None, source_sha256: str | None) -> dict:
    return {"alias": alias, "source_file": gguf_path.name, SOURCE_HASH_KEY: source_sha256}


def build_folder(out_dir: Path, build: Callable[[Path], dict], fields: dict, progress: ProgressFn) -> Path:
    """Make `out_dir` with build(work folder) -> marker fields, atomically: the folder is built
    next to its final place and renamed into it, spectui.json (with every file's checksum)
    written last, so a crash leaves either nothing or a complete folder."""
    import torch
    import transformers

    import spectui.models.integrity as integrity

    out_dir.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}-", dir=out_dir.parent))
    work.chmod(0o755)  # mkdtemp makes it 0700; the final folder should look like any other
    try:
        marker = {"format": STORE_FORMAT, **fields, **build(work)}
        progress("checksum", 0, 1)
        files = sorted(path.name for path in work.iterdir() if path.is_file())
        marker.update({
            "files": integrity.record(work, files),
            "converted_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "transformers_version": transformers.__version__,
            "torch_version": torch.__version__,
        })
        (work / MARKER_FILE).write_text(json.dumps(marker, indent=2) + "\n")
        progress("checksum", 1, 1)
        if out_dir.exists():  # an old, damaged or incomplete folder: replaced by this one
            shutil.rmtree(out_dir)
        os.replace(work, out_dir)
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)
    return out_dir


def _save_tokenizer(gguf: GgufFile, work: Path, progress: ProgressFn):
    from transformers import AutoTokenizer

    progress("tokenizer", 0, 1)
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(gguf.path.parent), gguf_file=gguf.path.name)
    except Exception as error:  # transformers raises many types for a file it cannot read
        raise ModelError(f"cannot read a tokenizer from {gguf.path.name}: {_one_line(error)}") from None
    tokenizer.save_pretrained(work)
    progress("tokenizer", 1, 1)
    return tokenizer


class GgufWeights:
    """A GGUF's tensors under their transformers names, as float32, one at a time."""

    def __init__(self, gguf: GgufFile):
        import torch
        from transformers import CONFIG_MAPPING, AutoModelForCausalLM
        from transformers.modeling_gguf_pytorch_utils import (
            TENSOR_PROCESSORS,
            TensorProcessor,
            get_gguf_hf_weights_map,
            load_gguf_checkpoint,
        )

        self.gguf = gguf
        parsed = config_dict(gguf)
        if parsed is None:  # an architecture transformers' loader treats specially: ask it (slower)
            parsed = load_gguf_checkpoint(str(gguf.path), return_tensors=False)["config"]
        self.processor_config = parsed
        try:
            self.config = CONFIG_MAPPING[parsed["model_type"]].from_dict(dict(parsed))
            with torch.device("meta"):
                self.model = AutoModelForCausalLM.from_config(self.config)
        except Exception as error:
            raise ModelError(f"cannot convert {gguf.path.name}: {_one_line(error)}") from None
        self.processor = TENSOR_PROCESSORS.get(gguf.architecture, TensorProcessor)(config=parsed)
        self.name_map = get_gguf_hf_weights_map(self.model, self.processor)
        self.linear_weights = {f"{name}.weight" for name, module in self.model.named_modules()
                               if isinstance(module, torch.nn.Linear)}
        self.embedding_weight = _weight_name(self.model, self.model.get_input_embeddings())
        output = self.model.get_output_embeddings()
        self.tied_head = (_weight_name(self.model, output) if output is not None and self.config.tie_word_embeddings
                          else None)

    def save_configs(self, folder: Path) -> None:
        import torch
        from transformers import GenerationConfig

        self.config.architectures = [type(self.model).__name__]
        self.config.dtype = torch.float32
        self.config.save_pretrained(folder)
        GenerationConfig.from_model_config(self.config).save_pretrained(folder)

    def tensors(self, progress: ProgressFn) -> Iterator[tuple[str, "np.ndarray", GgufTensor | None]]:
        """(transformers name, float32 values, the GGUF tensor when the values are its plain
        dequantisation), in file order, as transformers' `load_gguf_checkpoint` makes them."""
        from gguf import GGMLQuantizationType, dequantize

        tensors = self.gguf.tensors
        parsed = {"config": self.processor_config, "tensors": {}}
        progress("convert", 0, len(tensors))
        for index, tensor in enumerate(tensors, start=1):
            values = _dequantized(self.gguf.raw(tensor), tensor, dequantize, GGMLQuantizationType(tensor.ggml_type))
            result = self.processor.process(weights=values, name=tensor.name,
                                            tensor_key_mapping=self.name_map, parsed_parameters=parsed)
            if result.name in self.name_map:
                plain = tensor if result.weights is values else None
                yield self.name_map[result.name], _float32(result.weights), plain
            for name, made in parsed["tensors"].items():  # processors that build tensors themselves
                yield name, _float32(made.numpy()), None
            parsed["tensors"].clear()
            progress("convert", index, len(tensors))

    def write_int8(self, path: Path, progress: ProgressFn) -> None:
        from spectui.models.tensorfile import TensorWriter

        with TensorWriter(path, 2 * len(self.gguf.tensors) + 8, {"format": "spectui-int8"}) as writer:
            for name, values, plain in self.tensors(progress):
                if name in self.linear_weights:
                    _write_int8(writer, name, values)
                elif name == self.embedding_weight and plain is not None:
                    writer.add(name + BLOCKS_SUFFIX, _as_bytes(self.gguf.raw(plain)))
                    writer.metadata[GGML_TYPE_KEY + name + BLOCKS_SUFFIX] = str(plain.ggml_type)
                else:
                    writer.add(name, values)
                if name == self.embedding_weight and self.tied_head is not None:
                    _write_int8(writer, self.tied_head, values)  # the head's own int8 copy

    def write_float32(self, path: Path, progress: ProgressFn) -> None:
        from spectui.models.tensorfile import TensorWriter

        with TensorWriter(path, len(self.gguf.tensors) + 8, {"format": "pt"}) as writer:
            for name, values, _plain in self.tensors(progress):
                writer.add(name, values)


QUANTIZE_ROWS = 8192  # rows quantised at a time: a 151936-row head's temporaries stay small


def _dequantized(raw: np.ndarray, tensor: GgufTensor, dequantize: Callable[[np.ndarray, Any], np.ndarray],
                 ggml_type: Any) -> np.ndarray:
    """float32 values of a GGUF tensor, a slice of rows at a time for a tall one: gguf-py
    holds every row group's output before joining them (twice the tensor), and its arithmetic
    is per block, so slicing changes no bit."""
    import numpy as np

    if len(tensor.shape) < 2 or tensor.shape[0] <= QUANTIZE_ROWS:
        return dequantize(raw, ggml_type).reshape(tensor.shape)
    values = np.empty(tensor.shape, dtype=np.float32)
    for start in range(0, tensor.shape[0], QUANTIZE_ROWS):
        rows = slice(start, start + QUANTIZE_ROWS)
        values[rows] = dequantize(raw[rows], ggml_type).reshape(values[rows].shape)
    return values


def _write_int8(writer: TensorWriter, name: str, values: np.ndarray) -> None:
    """Per-channel int8 of `values`, a slice of rows at a time (the quantisation is row by
    row, so slicing changes no bit)."""
    import torch

    from spectui.models.quantize import quantize_weight_per_channel

    weight = torch.from_numpy(values)
    weight_int8 = torch.empty(weight.shape, dtype=torch.int8)
    weight_scale = torch.empty(weight.shape[0], dtype=torch.float32)
    for start in range(0, weight.shape[0], QUANTIZE_ROWS):
        rows = slice(start, start + QUANTIZE_ROWS)
        weight_int8[rows], weight_scale[rows] = quantize_weight_per_channel(weight[rows])
    writer.add(name, weight_int8.numpy())
    writer.add(name + SCALE_SUFFIX, weight_scale.numpy())


def _weight_name(model: torch.nn.Module, module: torch.nn.Module) -> str | None:
    for name, candidate in model.named_modules():
        if candidate is module:
            return f"{name}.weight"
    return None


def _float32(values: np.ndarray) -> np.ndarray:
    import numpy as np

    array = np.asarray(values, dtype=np.float32)
    return array if array.flags.writeable and array.flags.c_contiguous else np.array(array, order="C")


def _as_bytes(raw: np.ndarray) -> np.ndarray:
    """A tensor's GGUF bytes as uint8 [rows, bytes per row] (what BlockEmbedding reads)."""
    import numpy as np

    return np.ascontiguousarray(raw).view(np.uint8).reshape(raw.shape[0], -1)


def _one_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return (text[0] if text else type(error).__name__)[:300]


@contextlib.contextmanager
def quiet_transformers(progress: ProgressFn) -> Iterator[None]:
    """Silence transformers' bars and warnings on stderr while converting (they would tear a TUI)."""
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    bars_were_on = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars_were_on:
            hf_logging.enable_progress_bar()

