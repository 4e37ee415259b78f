"""A GGUF file's metadata and tensor table, read directly, and its tensors by memory map.

gguf-py's GGUFReader makes a numpy view per element of every metadata array: the 151936
tokens and 151387 merges of a Qwen vocabulary cost it a minute on a busy 2-core CPU. This
reader walks the arrays it is not asked for and keeps their length, which takes well under a
second. The tokenizer is built by transformers from the file itself.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from spectui.core.errors import ModelError

if TYPE_CHECKING:
    import numpy as np

_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
_DEFAULT_ALIGNMENT = 32


@dataclass(frozen=True)
class GgufTensor:
    name: str
    shape: tuple[int, ...]  # torch order: rows first
    ggml_type: int
    offset: int  # from the start of the file
    nbytes: int


@dataclass(frozen=True)
class GgufFile:
    path: Path
    metadata: dict[str, Any]  # string arrays appear as their length
    tensors: tuple[GgufTensor, ...]

    @property
    def architecture(self) -> str:
        return str(self.metadata.get("general.architecture", ""))

    def raw(self, tensor: GgufTensor) -> "np.ndarray":
        """The tensor's bytes as stored, uint8 [rows..., bytes per row], memory-mapped."""
        import numpy as np

        data = np.memmap(self.path, dtype=np.uint8, mode="r", offset=tensor.offset, shape=(tensor.nbytes,))
        rows = tensor.shape[:-1] or ()
        return data.reshape(*rows, -1) if rows else data


def read_gguf(path: Path) -> GgufFile:
    """The file's metadata and tensor table; a ModelError in one line when it is not a whole GGUF
    (cut short: where its header says it ends and where it does)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(_header_bytes(handle))
        size = path.stat().st_size
    except OSError as error:
        raise ModelError(f"cannot read {path}: {error.strerror or error}") from None
    try:
        return _parse(path, data)
    except CutShort as error:
        raise ModelError(f"{path} is cut short: its header says the file holds {error.expected:,} bytes, "
                         f"it has {size:,}: download or copy it again") from None
    except (struct.error, UnicodeDecodeError, ValueError, IndexError, KeyError) as error:
        if isinstance(error, (struct.error, IndexError)) and len(data) == size:  # it ran out of file
            raise ModelError(f"{path} is cut short: its header runs past the end of the file ({size:,} bytes): "
                             "download or copy it again") from None
        raise ModelError(f"{path} is not a readable GGUF file (damaged or cut short)") from None


class CutShort(ValueError):
    """The tensors the header lists end past the end of the file."""

    def __init__(self, expected: int) -> None:
        super().__init__(f"the tensors end at byte {expected:,}")
        self.expected = expected


def _header_bytes(handle: BinaryIO) -> int:
    # The metadata of a large vocabulary is a few MB; read generously, then the parser checks.
    handle.seek(0, 2)
    size = handle.tell()
    handle.seek(0)
    return min(size, 64 * 1024 * 1024)


def _parse(path: Path, data: bytes) -> GgufFile:
    if data[:4] != b"GGUF":
        raise ValueError("no GGUF magic")
    version, tensor_count, metadata_count = struct.unpack_from("<IQQ", data, 4)
    if version not in (2, 3):
        raise ValueError(f"GGUF version {version}")
    position = 24
    metadata: dict[str, Any] = {}
    for _ in range(metadata_count):
        key, position = _string(data, position)
        (value_type,) = struct.unpack_from("<I", data, position)
        metadata[key], position = _value(data, position + 4, value_type)
    entries = []
    for _ in range(tensor_count):
        name, position = _string(data, position)
        (dims,) = struct.unpack_from("<I", data, position)
        shape = struct.unpack_from(f"<{dims}Q", data, position + 4)
        position += 4 + 8 * dims
        ggml_type, offset = struct.unpack_from("<IQ", data, position)
        position += 12
        entries.append((name, tuple(reversed(shape)), ggml_type, offset))
    alignment = int(metadata.get("general.alignment", _DEFAULT_ALIGNMENT))
    data_start = (position + alignment - 1) // alignment * alignment
    tensors = [GgufTensor(name, shape, ggml_type, data_start + offset, _byte_count(shape, ggml_type))
               for name, shape, ggml_type, offset in entries]
    end = max((tensor.offset + tensor.nbytes for tensor in tensors), default=data_start)
    if end > path.stat().st_size:
        raise CutShort(end)
    return GgufFile(path, metadata, tuple(tensors))


def _byte_count(shape: tuple[int, ...], ggml_type: int) -> int:
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    block_size, type_size = GGML_QUANT_SIZES[GGMLQuantizationType(ggml_type)]
    count = 1
    for dim in shape:
        count *= dim
    return count // block_size * type_size


def _string(data: bytes, position: int) -> tuple[str, int]:
    (length,) = struct.unpack_from("<Q", data, position)
    start = position + 8
    return data[start:start + length].decode("utf-8"), start + length


def _value(data: bytes, position: int, value_type: int) -> tuple[Any, int]:
    if value_type in _SCALARS:
        fmt = _SCALARS[value_type]
        return struct.unpack_from(fmt, data, position)[0], position + struct.calcsize(fmt)
    if value_type == _STRING:
        return _string(data, position)
    if value_type == _ARRAY:
        element_type, count = struct.unpack_from("<IQ", data, position)
        position += 12
        if element_type in _SCALARS:
            fmt = _SCALARS[element_type]
            width = struct.calcsize(fmt)
            values = list(struct.unpack_from(f"<{count}{fmt[1]}", data, position))
            return (values[0] if count == 1 else values), position + count * width
        if element_type == _STRING:
            for _ in range(count):  # walked, not kept: only its length is used here
                (length,) = struct.unpack_from("<Q", data, position)
                position += 8 + length
            return count, position
        raise ValueError(f"array of type {element_type}")
    raise ValueError(f"value of type {value_type}")


def config_dict(gguf: GgufFile) -> dict[str, Any] | None:
    """The transformers config of the file, as transformers' GGUF loader makes it, for the
    architectures it converts without special cases (the others: None; ask transformers)."""
    from transformers.integrations.ggml import GGUF_CONFIG_DEFAULTS_MAPPING, GGUF_CONFIG_MAPPING

    architecture = gguf.architecture
    if architecture in _SPECIAL_ARCHITECTURES or architecture not in GGUF_CONFIG_MAPPING:
        return None
    if architecture == "llama" and "mistral" in str(gguf.metadata.get("general.name", "")).lower():
        return None
    config: dict[str, Any] = {
        "tie_word_embeddings": all(tensor.name != "output.weight" for tensor in gguf.tensors)
    }
    for key, value in GGUF_CONFIG_DEFAULTS_MAPPING.get(architecture, {}).items():
        config.setdefault(key, value)
    for key, value in gguf.metadata.items():
        prefix, _, config_key = key.partition(".")
        renamed = GGUF_CONFIG_MAPPING.get(prefix, {}).get(config_key)
        if renamed is None or renamed == -1:
            continue
        config[renamed] = value
    if "vocab_size" not in config and "tokenizer.ggml.tokens" in gguf.metadata:
        config["vocab_size"] = gguf.metadata["tokenizer.ggml.tokens"]  # its length
    return config


# Architectures transformers' loader treats specially (renames, extra keys): left to it.
_SPECIAL_ARCHITECTURES = {"t5", "t5encoder", "stablelm", "qwen2moe", "qwen3moe", "gpt-oss", "gpt_oss",
                          "minimax-m2", "gemma3", "gemma4", "lfm2", "falcon", "bloom"}
