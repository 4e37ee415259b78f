"""A long prompt prefilled at llama.cpp's own speed, its cache then handed to the exact context.

The exact context (lib.LlamaModel, batch_invariant) keeps its values in bf16 and its keys in
f16, so that every decode row takes ggml's one-row attention whatever the batch width and the
cached length. Keys and values of two types also keep a prompt's batches off ggml's tiled
attention, the path llama.cpp's defaults (f16 keys and values) prefill with: an 837-token
prompt prefilled ~25 % slower there (benchmarks/reports/prefill.md). Here the prompt runs in a
second context on the same weights with llama.cpp's defaults; its cache is then read out,
its values rounded from f16 to bf16 as ggml rounds, and written into the exact context. Every
decode after that runs in the exact context, so T = 0 stays identical to plain decoding: plain
and speculative replies start from the same cache. What moves is the prefill's own rounding
(tiled attention, values through f16), as a change of ubatch would move it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from spectui.engines.ggml.lib import GGML_TYPE_BF16, decode_batches

if TYPE_CHECKING:
    import numpy

    from spectui.engines.ggml.lib import LlamaModel

# Fewer new tokens than this gain nothing: a batch shorter than ggml's attention tile does not
# take the tiled path, and the second context and the copy cost ~0.1 s.
FAST_PREFILL_MIN = 64
GGML_TYPE_F16 = 1
CELLS_STEP = 1024  # the second context's size, in steps of this many cells (llama.cpp pads to 256)


class StateLayoutError(Exception):
    """The cache's serialised state is not laid out as this module reads it (another libllama)."""


@dataclass(frozen=True)
class KvLayout:
    layers: int
    key_row: int  # bytes of one cell's keys in one layer
    value_row: int


def kv_layout(model: LlamaModel) -> KvLayout:
    """Each layer's key and value row in bytes, f16 or bf16 (two bytes a number)."""
    lib = model.lib
    heads, kv_heads = lib.llama_model_n_head(model.model), lib.llama_model_n_head_kv(model.model)
    width = lib.llama_model_n_embd(model.model) // max(1, heads) * kv_heads
    return KvLayout(lib.llama_model_n_layer(model.model), 2 * width, 2 * width)


class FastPrefill:
    """A second context on the exact context's weights, at llama.cpp's defaults (f16 keys and
    values, its own choice of flash attention), for one prompt's prefill. Sized to the prompt
    (`cells`, rounded up) and grown as it needs: a context of the model's whole length cost
    ~25x the time to make (its cache zeroed, ~235 MB on the 1.5B) for every long prompt."""

    def __init__(self, model: LlamaModel, cells: int) -> None:
        self.lib, self.ffi = model.lib, model.ffi
        self.cells = min(model.context_length, -(-max(1, cells) // CELLS_STEP) * CELLS_STEP)
        params = self.lib.llama_context_default_params()
        params.n_ctx = self.cells
        params.n_batch = model.batch
        params.n_ubatch = model.batch
        params.n_threads = model.threads
        params.n_threads_batch = model.threads
        self.context = self.lib.llama_init_from_model(model.model, params)
        if self.context == self.ffi.NULL:
            raise MemoryError("llama.cpp could not make a second context for the prefill")
        self.batch = model.batch
        self.cached = 0

    def grown(self, model: LlamaModel, cells: int) -> FastPrefill:
        """A context of at least `cells` holding this one's cache (moved as it is: the same
        types), this one freed. StateLayoutError where llama.cpp does not take the move."""
        bigger = FastPrefill(model, max(cells, 2 * self.cells))
        try:
            state = read_state(self.lib, self.ffi, self.context)
            data: Any = state  # numpy's array has the buffer protocol; cffi's stub does not say
            source: Any = self.ffi.from_buffer("uint8_t[]", data)
            if self.lib.llama_state_seq_set_data(bigger.context, source, len(state), 0) != len(state):
                raise StateLayoutError("llama.cpp did not take the prefill's cache into a larger context")
        except BaseException:
            bigger.close()
            raise
        finally:
            self.close()
        bigger.cached = self.cached
        return bigger

    def decode(self, tokens: list[int], stop: Callable[[], bool] | None = None) -> None:
        """Append tokens; Interrupted (lib) when stop() said so, the whole calls kept."""
        from spectui.engines.ggml.lib import Interrupted

        if not tokens:
            return
        asked = self.ffi.callback("bool(void *)", lambda data: bool(stop())) if stop is not None else None
        if asked is not None:
            self.lib.llama_set_abort_callback(self.context, asked, self.ffi.NULL)
        try:
            # No logits row: a prefill call's only use is the cache (each row read the whole
            # output matrix, ~190 MB on the 1.5B, once per 64-token chunk).
            decode_batches(self.lib, self.context, tokens, self.cached, self.batch, len(tokens))
        except Interrupted as interrupted:
            self.cached = interrupted.cached
            raise
        finally:
            if asked is not None:
                self.lib.llama_set_abort_callback(self.context, self.ffi.NULL, self.ffi.NULL)
        self.cached += len(tokens)

    def land(self, model: LlamaModel) -> None:
        """Write this cache into the exact context's (emptied first), values in bf16, and free
        this context. StateLayoutError where the state does not read as expected: the exact
        context is then left empty."""
        try:
            state = read_state(self.lib, self.ffi, self.context)
        finally:
            self.close()
        values_to_bf16(state, kv_layout(model), self.cached)
        write_state(model, state, self.cached)

    def close(self) -> None:
        if self.context is not None:
            self.lib.llama_free(self.context)
            self.context = None


def read_state(lib: Any, ffi: Any, context: Any) -> numpy.ndarray:
    """Sequence 0's serialised cache (llama_state_seq_get_data), written straight into numpy's
    memory: no zeroed cffi buffer, no copy of it."""
    import numpy

    size = lib.llama_state_seq_get_size(context, 0)
    state = numpy.empty(size, dtype=numpy.uint8)
    target: Any = state  # numpy's array has the buffer protocol; cffi's stub does not say
    written = lib.llama_state_seq_get_data(context, ffi.from_buffer("uint8_t[]", target), size, 0)
    return state[:written]


def write_state(model: LlamaModel, state: numpy.ndarray, cells: int) -> None:
    """The converted state into the exact context, emptied first; StateLayoutError (and the
    context left empty) where llama.cpp does not take all of it."""
    model.clear()
    data: Any = state  # numpy's array has the buffer protocol; cffi's stub does not say
    source: Any = model.ffi.from_buffer("uint8_t[]", data)
    if model.lib.llama_state_seq_set_data(model.context, source, len(state), 0) != len(state):
        model.clear()
        raise StateLayoutError("llama.cpp did not take the converted cache")
    model.cached = cells


def values_to_bf16(state: numpy.ndarray, layout: KvLayout, cells: int) -> None:
    """Rewrite one sequence's serialised cache (llama_state_seq_get_data) in place: every
    layer's values from f16 to bf16, their type fields with them; the keys stay f16. The state
    ends with the cache's rows: per layer the keys (i32 type, u64 row bytes, the cells' rows),
    then per layer the values alike (untransposed: flash attention's layout). What comes before
    them (cell positions, flags) is left as it is, so it is read from the end."""
    import numpy

    keys, values = (layout.layers * (12 + cells * row) for row in (layout.key_row, layout.value_row))
    at = len(state) - keys - values
    if at < 0:
        raise StateLayoutError(f"a state of {len(state)} bytes is too short for {cells} cells")
    for kind, row, new_type in ((GGML_TYPE_F16, layout.key_row, GGML_TYPE_F16),
                                (GGML_TYPE_F16, layout.value_row, GGML_TYPE_BF16)):
        for _ in range(layout.layers):
            found_type = int(state[at:at + 4].view(numpy.int32)[0])
            found_row = int(state[at + 4:at + 12].view(numpy.uint64)[0])
            if found_type != kind or found_row != row:
                raise StateLayoutError(f"a layer of type {found_type}, rows of {found_row} bytes; "
                                       f"expected type {kind}, {row} bytes")
            data = state[at + 12:at + 12 + cells * row]
            if new_type != kind:
                data[:] = f16_to_bf16(data.view(numpy.float16)).view(numpy.uint8)
                state[at:at + 4] = numpy.array([new_type], dtype=numpy.int32).view(numpy.uint8)
            at += 12 + cells * row


def f16_to_bf16(values: numpy.ndarray) -> numpy.ndarray:
    """bf16 bit patterns (uint16) of f16 values, rounded to nearest even as ggml rounds
    (ggml_compute_fp32_to_bf16: NaNs stay quiet NaNs)."""
    import numpy

    bits = values.astype(numpy.float32).view(numpy.uint32)
    rounded = (bits + (0x7FFF + ((bits >> 16) & 1))) >> 16
    quiet_nan = (bits >> 16) | 64
    return numpy.where((bits & 0x7FFFFFFF) > 0x7F800000, quiet_nan, rounded).astype(numpy.uint16)
