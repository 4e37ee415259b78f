"""safetensors files written one tensor at a time and read one tensor at a time.

The writer reserves room for the header, streams each tensor's bytes as it is made (a model
is converted without holding it in memory) and fills the header in last. The reader hands out
a tensor as a fresh array read from the file (its pages are not left mapped into the process)
or, for a table read a few rows at a time, as a memory map of that tensor alone. The files are
standard safetensors: an 8-byte header length, a JSON header padded with spaces, the tensors'
bytes back to back.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path
from typing import TYPE_CHECKING

from spectui.core import json_text
from spectui.core.errors import ModelError

if TYPE_CHECKING:
    import numpy as np

# safetensors dtype names and their numpy types (by name: numpy is imported when used)
_NUMPY_TYPES = {"F32": "float32", "F16": "float16", "I8": "int8", "U8": "uint8", "I32": "int32", "I64": "int64"}
_HEADER_BYTES_PER_TENSOR = 256  # room reserved per tensor: name, dtype, shape and offsets fit easily
_MAX_HEADER_BYTES = 100 * 1024 * 1024  # the safetensors library's own limit


def _dtype_name(array: "np.ndarray") -> str:
    for name, numpy_name in _NUMPY_TYPES.items():
        if array.dtype.name == numpy_name:
            return name
    raise ValueError(f"no safetensors dtype for numpy {array.dtype}")


class TensorWriter:
    """Write tensors to `path` one by one; `close` writes the header. At most `max_tensors`."""

    def __init__(self, path: Path, max_tensors: int, metadata: dict[str, str] | None = None):
        self.path = path
        self.metadata = dict(metadata or {})
        self.entries: dict[str, dict] = {}
        self._reserved = _round_up(4096 + _HEADER_BYTES_PER_TENSOR * max_tensors + _json_size(self.metadata), 8)
        self._offset = 0
        self._file = open(path, "wb")
        self._file.seek(8 + self._reserved)

    def add(self, name: str, array: "np.ndarray") -> None:
        import numpy as np

        if name in self.entries:
            raise ValueError(f"tensor {name} written twice")
        data = np.ascontiguousarray(array)
        size = data.nbytes
        self.entries[name] = {
            "dtype": _dtype_name(data),
            "shape": list(data.shape),
            "data_offsets": [self._offset, self._offset + size],
        }
        self._file.write(data.data.cast("B"))
        self._offset += size

    def close(self) -> None:
        header = dict(self.entries)
        if self.metadata:
            header["__metadata__"] = self.metadata
        text = json.dumps(header, separators=(",", ":")).encode()
        if len(text) > self._reserved:
            self._file.close()
            raise ValueError(f"{len(self.entries)} tensors need a {len(text)}-byte header, {self._reserved} reserved")
        self._file.seek(0)
        self._file.write(struct.pack("<Q", self._reserved))
        self._file.write(text + b" " * (self._reserved - len(text)))
        self._file.close()

    def __enter__(self) -> "TensorWriter":
        return self

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        if kind is None:
            self.close()
        else:
            self._file.close()


class TensorFile:
    """The tensors of a safetensors file, read on demand."""

    def __init__(self, path: Path):
        self.path = path
        self.header, self.metadata, self.data_start = read_header(path)
        size = path.stat().st_size
        for name, entry in self.header.items():
            begin, end = entry["data_offsets"]
            if not 0 <= begin <= end <= size - self.data_start:
                raise ModelError(f"{path.name}: tensor {name} lies outside the file (cut short?)")

    def names(self) -> list[str]:
        return list(self.header)

    def __contains__(self, name: str) -> bool:
        return name in self.header

    def shape(self, name: str) -> tuple[int, ...]:
        return tuple(self.header[name]["shape"])

    def read(self, name: str) -> "np.ndarray":
        """A fresh, writable array holding the tensor (read with pread, not mapped)."""
        import numpy as np

        entry = self.header[name]
        begin, end = entry["data_offsets"]
        out = np.empty(entry["shape"], dtype=_NUMPY_TYPES[entry["dtype"]])
        view = out.reshape(-1).view(np.uint8).data
        with open(self.path, "rb", buffering=0) as handle:
            done = 0
            while done < end - begin:
                count = os.preadv(handle.fileno(), [view[done:]], self.data_start + begin + done)
                if count <= 0:
                    raise ModelError(f"{self.path.name}: cut short inside tensor {name}")
                done += count
        return out

    def mapped(self, name: str) -> "np.ndarray":
        """The tensor as a read-only memory map of its own bytes: pages are read when touched."""
        import numpy as np

        entry = self.header[name]
        begin, end = entry["data_offsets"]
        return np.memmap(self.path, dtype=_NUMPY_TYPES[entry["dtype"]], mode="r",
                         offset=self.data_start + begin, shape=tuple(entry["shape"]))


def read_header(path: Path) -> tuple[dict, dict, int]:
    """(tensor entries, metadata, offset of the first tensor byte) of a safetensors file."""
    try:
        with open(path, "rb") as handle:
            prefix = handle.read(8)
            if len(prefix) < 8:
                raise ModelError(f"{path.name} is not a safetensors file (cut short)")
            (length,) = struct.unpack("<Q", prefix)
            if length > _MAX_HEADER_BYTES:
                raise ModelError(f"{path.name} is not a safetensors file (header of {length} bytes)")
            text = handle.read(length)
    except OSError as error:
        raise ModelError(f"cannot read {path}: {error.strerror or error}") from None
    try:
        header = json_text.loads(text)
    except ValueError:
        raise ModelError(f"{path.name} is not a safetensors file (unreadable header)") from None
    if not isinstance(header, dict):
        raise ModelError(f"{path.name} is not a safetensors file (unreadable header)")
    metadata = header.pop("__metadata__", None) or {}
    return header, metadata, 8 + length


def _json_size(metadata: dict[str, str]) -> int:
    return len(json.dumps(metadata).encode())


def _round_up(value: int, multiple: int) -> int:
    return (value + multiple - 1) // multiple * multiple
