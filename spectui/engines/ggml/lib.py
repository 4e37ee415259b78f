"""libllama through `llama-cpp-py-sync`'s CFFI declarations: a model with its KV cache,
decoded a batch at a time, rolled back by position. The bench's llama.cpp anchor and the
llama.cpp engine both drive it.

Only the low-level API: one sequence, logits for the rows asked for, `llama_memory_seq_rm`
to drop positions (rejected drafts). Nothing here samples: callers read the logits.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spectui.core.errors import UsageError

INSTALL_HINT = "llama.cpp needs the llama-cpp-py-sync package: pip install 'spectui[llamacpp]'"
FLASH_ATTENTION_ON = 1  # llama_flash_attn_type
GGML_TYPE_BF16 = 30
DEFAULT_CONTEXT = 8192  # the longest conversation workload's prompt and reply fit with room
DEFAULT_BATCH = 512
ABORTED = 2  # llama_decode's answer when the abort callback said stop


class Interrupted(Exception):
    """A decode stopped by its caller; `cached`: the positions the cache still holds."""

    def __init__(self, cached: int) -> None:
        super().__init__(f"decode interrupted with {cached} positions cached")
        self.cached = cached

_loaded = None
_lock = threading.Lock()


def package_dir() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("llama_cpp_py_sync")
    if spec is None or spec.origin is None:
        raise UsageError(INSTALL_HINT)
    return Path(spec.origin).parent


def library():
    """(ffi, lib), loaded once per process with llama.cpp's log silenced (it writes to stderr
    from C, past any of Python's streams)."""
    global _loaded
    with _lock:
        if _loaded is None:
            from llama_cpp_py_sync import __version__
            from llama_cpp_py_sync._cffi_bindings import ffi

            from spectui.engines.ggml.compat import loadable_library_dir
            from spectui.models.registry import cache_dir

            folder = loadable_library_dir(package_dir(), cache_dir() / "llamacpp" / f"lib-{__version__}")
            lib: Any = ffi.dlopen(str(folder / "libllama.so"))  # its functions come from the CFFI declarations
            quiet = ffi.callback("void(enum ggml_log_level, const char *, void *)", lambda *args: None)
            lib.llama_log_set(quiet, ffi.NULL)
            lib.llama_backend_init()
            _loaded = (ffi, lib, quiet)  # the callback must outlive every call into the library
        return _loaded[0], _loaded[1]


def library_problem() -> str | None:
    """Why libllama cannot run here, in one line, or None when it loads."""
    from spectui.core.errors import one_line

    try:
        library()
    except UsageError as error:
        return str(error)
    except Exception as error:  # ImportError, OSError from the loader, ElfPatchError, cffi's errors
        return f"libllama could not load: {one_line(error)}"
    return None


def default_threads() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


class LlamaModel:
    """One GGUF model and one context (one sequence) on the CPU.

    batch_invariant: each row's attention is computed the same way whatever the batch width and
    the cached length (docs/ggml.md, "Lossless at T = 0"). llama.cpp's default splits a single
    row's attention over the threads once 512 cells are cached (flash decoding) and sums the
    pieces in another order than a batch of rows: past ~256 cached tokens no verify row equalled
    plain decoding. A value cache in bf16 (the keys stay f16) keeps every row on the one-row
    path. The bench's llama.cpp anchor runs llama.cpp's defaults (False)."""

    def __init__(self, path: Path | str, context: int = DEFAULT_CONTEXT, threads: int | None = None,
                 batch: int = DEFAULT_BATCH, batch_invariant: bool = True) -> None:
        import numpy

        self._numpy = numpy
        self.path = Path(path)
        if not self.path.is_file():
            raise UsageError(f"no GGUF file at {self.path}")
        self.ffi, self.lib = library()
        self.threads = threads or default_threads()
        self.batch = batch
        started = time.perf_counter()
        model_params = self.lib.llama_model_default_params()
        model_params.n_gpu_layers = 0
        self.model = self.lib.llama_model_load_from_file(str(self.path).encode(), model_params)
        if self.model == self.ffi.NULL:
            raise UsageError(f"llama.cpp could not load {self.path.name}")
        context_params = self.lib.llama_context_default_params()
        context_params.n_ctx = context
        context_params.n_batch = batch
        context_params.n_ubatch = batch
        context_params.n_threads = self.threads
        context_params.n_threads_batch = self.threads
        if batch_invariant:
            context_params.flash_attn_type = FLASH_ATTENTION_ON
            context_params.type_v = GGML_TYPE_BF16
        self.batch_invariant = batch_invariant
        self.context = self.lib.llama_init_from_model(self.model, context_params)
        if self.context == self.ffi.NULL:
            self.lib.llama_model_free(self.model)
            raise UsageError(f"llama.cpp could not make a {context}-token context for {self.path.name}")
        self.load_seconds = time.perf_counter() - started
        self.context_length = context
        self.vocab = self.lib.llama_model_get_vocab(self.model)
        self.vocab_size = self.lib.llama_vocab_n_tokens(self.vocab)
        self.memory = self.lib.llama_get_memory(self.context)
        self.cached = 0  # positions the KV cache holds
        self.weight_type = weight_type(self.ffi, self.lib, self.model)
        release_mapped_pages(self.path)

    def decode(self, tokens: list[int], rows: int, stop: Callable[[], bool] | None = None):
        """Append tokens at the cache's end; the logits of the last `rows` of them, [rows, V]
        (a prompt longer than a batch goes in several calls; only the last gives rows).
        stop: asked between the graph's nodes; when it says True the decode ends within
        milliseconds, the cache keeps what whole calls had run, and Interrupted is raised."""
        numpy = self._numpy
        if self.cached + len(tokens) > self.context_length:
            raise UsageError(f"{self.cached + len(tokens)} tokens do not fit llama.cpp's {self.context_length}-token context")
        if stop is None:
            self._decode_chunks(tokens, rows)
        else:
            asked = self.ffi.callback("bool(void *)", lambda data: bool(stop()))
            self.lib.llama_set_abort_callback(self.context, asked, self.ffi.NULL)
            try:
                self._decode_chunks(tokens, rows)
            finally:
                self.lib.llama_set_abort_callback(self.context, self.ffi.NULL, self.ffi.NULL)
        last_chunk = len(tokens) - (len(tokens) - 1) // self.batch * self.batch
        if rows > last_chunk:
            raise ValueError(f"{rows} rows asked of a last batch of {last_chunk} tokens")
        width = self.vocab_size
        out = numpy.empty((rows, width), dtype=numpy.float32)
        for row in range(rows):
            pointer = self.lib.llama_get_logits_ith(self.context, last_chunk - rows + row)
            row_bytes: Any = self.ffi.buffer(pointer, width * 4)  # has the buffer protocol; cffi's stub does not say
            out[row] = numpy.frombuffer(row_bytes, dtype=numpy.float32)
        return out

    def decode_argmax(self, tokens: list[int], width: int | None = None) -> list[int]:
        """decode(tokens, len(tokens))'s argmax per row over the first `width` logits (None: all),
        read where llama.cpp keeps them: decode copies each [V] row out, a tenth of a batch's CPU
        for a 151,936-token vocabulary. tokens: one batch at most."""
        if len(tokens) > self.batch:
            raise ValueError(f"{len(tokens)} tokens in one batch of {self.batch}")
        if self.cached + len(tokens) > self.context_length:
            raise UsageError(f"{self.cached + len(tokens)} tokens do not fit llama.cpp's {self.context_length}-token context")
        self._decode_chunks(tokens, len(tokens))
        pointer = self.lib.llama_get_logits(self.context)  # every output row, in the batch's order
        block: Any = self.ffi.buffer(pointer, len(tokens) * self.vocab_size * 4)
        logits = self._numpy.frombuffer(block, dtype=self._numpy.float32).reshape(len(tokens), self.vocab_size)
        return logits[:, :width].argmax(axis=1).tolist()

    def save_state(self) -> tuple[Any, int]:
        """The cache serialised (llama_state_seq_get_data) and its positions, for load_state: a
        prefix decoded once, restored later instead of decoded again."""
        numpy = self._numpy
        size = self.lib.llama_state_seq_get_size(self.context, 0)
        state = numpy.empty(size, dtype=numpy.uint8)
        target: Any = state  # numpy's array has the buffer protocol; cffi's stub does not say
        written = self.lib.llama_state_seq_get_data(self.context, self.ffi.from_buffer("uint8_t[]", target), size, 0)
        return state[:written], self.cached

    def load_state(self, saved: tuple[Any, int]) -> None:
        """The cache as save_state left it (the same bytes: every later row as before)."""
        state, cells = saved
        self.clear()
        source: Any = self.ffi.from_buffer("uint8_t[]", state)
        if self.lib.llama_state_seq_set_data(self.context, source, len(state), 0) != len(state):
            self.clear()
            raise RuntimeError("llama.cpp did not take the saved cache back")
        self.cached = cells

    def _decode_chunks(self, tokens: list[int], rows: int) -> None:
        try:
            decode_batches(self.lib, self.context, tokens, self.cached, self.batch, len(tokens) - rows)
        except Interrupted as interrupted:
            self.cached = interrupted.cached
            raise
        self.cached += len(tokens)

    def set_threads(self, threads: int) -> None:
        if threads != self.threads:
            self.lib.llama_set_n_threads(self.context, threads, threads)
            self.threads = threads

    def keep(self, positions: int) -> None:
        """Drop every cached position from `positions` on (rejected drafts)."""
        if positions < self.cached:
            self.lib.llama_memory_seq_rm(self.memory, 0, positions, -1)
            self.cached = positions

    def clear(self) -> None:
        if self.context is None:  # closed: its memory is freed (an engine closed twice resets first)
            return
        self.lib.llama_memory_clear(self.memory, True)
        self.cached = 0

    def close(self) -> None:
        if getattr(self, "context", None) is not None:
            self.lib.llama_free(self.context)
            self.lib.llama_model_free(self.model)
            self.context = None


def decode_batches(lib: Any, context: Any, tokens: list[int], start: int, batch_size: int, first_row: int) -> None:
    """Run `tokens` into one sequence's cache at positions from `start`, `batch_size` a call,
    logits kept for the tokens from index `first_row` on. Interrupted (with the positions the
    cache holds) when the context's abort callback stopped a call."""
    for offset in range(0, len(tokens), batch_size):
        chunk = tokens[offset:offset + batch_size]
        batch = lib.llama_batch_init(len(chunk), 0, 1)
        try:
            batch.n_tokens = len(chunk)
            for i, token in enumerate(chunk):
                batch.token[i] = token
                batch.pos[i] = start + offset + i
                batch.n_seq_id[i] = 1
                batch.seq_id[i][0] = 0
                batch.logits[i] = 1 if offset + i >= first_row else 0
            code = lib.llama_decode(context, batch)
        finally:
            lib.llama_batch_free(batch)
        if code == ABORTED:  # llama.cpp removed the aborted call's positions from the cache
            raise Interrupted(start + offset)
        if code != 0:
            raise RuntimeError(f"llama_decode failed ({code})")


MADV_DONTNEED = 4


def release_mapped_pages(path: Path) -> None:
    """Take the GGUF's mapped pages out of this process's resident set. llama.cpp maps the file
    with every page read in, then copies the tensors its repacked kernels use into memory of
    their own: left alone, those weights count twice (the 1.5B target: 2.0 GB resident, 1.3 GB
    after this). Tensors still read from the mapping fault back in from the page cache on first
    use. Linux only; elsewhere nothing."""
    import ctypes

    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            lines = maps.readlines()
    except OSError:
        return
    target = str(path.resolve())
    libc = ctypes.CDLL(None)
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    for line in lines:
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and fields[5].rstrip("\n") == target:
            start, end = (int(address, 16) for address in fields[0].split("-"))
            libc.madvise(start, end - start, MADV_DONTNEED)


def weight_type(ffi: Any, lib: Any, model: Any) -> str:
    """The GGUF's weight type as people write it (Q4_K_M, Q8_0, ...), from llama.cpp's own
    description of the model ("qwen2 1.5B Q4_K - Medium")."""
    buffer = ffi.new("char[]", 256)
    lib.llama_model_desc(model, buffer, 256)
    words = [word for word in ffi.string(buffer).decode(errors="replace").split(" ") if not word.startswith("(")]
    kind = " ".join(words[2:]) or "gguf"
    for size, letter in ((" - Small", "_S"), (" - Medium", "_M"), (" - Large", "_L")):
        kind = kind.replace(size, letter)
    return kind.replace(" ", "_")


# A verify batch is never wider than this (k = 8 and its bonus row); wider steps run in several.
PROBED_ROWS = 9


@dataclass(frozen=True)
class VerifyShape:
    rows: int  # the widest decode whose rows equal decoding one token at a time
    slope: float  # t(rows)/t(1) - 1 per extra token: what one more verified draft costs
    busy: bool = False  # timed while other processes held the cores: not this machine's cost


def invariant_rows(model: LlamaModel, most: int = PROBED_ROWS, clock: Callable[[], float] = time.perf_counter) -> VerifyShape:
    """The most tokens one decode may hold while every row's logits stay bit for bit those of
    decoding the tokens one at a time. llama.cpp's CPU kernels switch at some batch width
    (AVX2: Q4_K's repacked 4-row gemm; Q4_0 past 6 rows) and round differently there; a verify
    split at this width gives what plain decoding gives, so T = 0 stays lossless. Probed on
    a fixed token sequence; the kernel a width takes does not depend on the values."""
    span = min(1000, model.vocab_size)
    prefix = [(97 * i + 13) % span for i in range(24)]
    tail = [(89 * i + 7) % span for i in range(most)]
    model.clear()
    model.decode(prefix, 1)
    alone = [model.decode([token], 1)[0] for token in tail]
    rows = 1
    for width in range(2, most + 1):
        model.keep(len(prefix))
        together = model.decode(tail[:width], width)
        if not all((together[i] == alone[i]).all() for i in range(width)):
            break
        rows = width
    one, widest = (_median_seconds(model, len(prefix), tail[:width], clock) for width in (1, rows))
    model.clear()
    slope = (widest / one - 1) / (rows - 1) if rows > 1 and one > 0 else 1.0
    return VerifyShape(rows, max(0.0, slope))


def _median_seconds(model: LlamaModel, keep: int, tokens: list[int], clock: Callable[[], float], repeats: int = 5) -> float:
    """One decode of `tokens` after `keep` cached positions, the median of a few (one alone is
    at the mercy of whatever else the machine did in that moment)."""
    times = []
    for _ in range(repeats):
        model.keep(keep)
        started = clock()
        model.decode(tokens, len(tokens))
        times.append(clock() - started)
    return sorted(times)[repeats // 2]


def cached_invariant_rows(model: LlamaModel) -> VerifyShape:
    """invariant_rows, probed once per GGUF, libllama version and CPU and remembered in the cache."""
    import hashlib
    import json

    from spectui.models.registry import cache_dir

    stat = model.path.stat()
    key = hashlib.sha256(f"{model.path.resolve()}:{stat.st_size}:{stat.st_mtime_ns}:{library_version()}:"
                         f"{_cpu_signature()}:{model.batch_invariant}".encode()).hexdigest()[:24]
    path = cache_dir() / "llamacpp" / "verify-shape.json"
    try:
        known = json.loads(path.read_text())
    except (OSError, ValueError):
        known = {}
    try:
        return VerifyShape(int(known[key]["rows"]), float(known[key]["slope"]))
    except (TypeError, KeyError, ValueError):
        pass
    from spectui.engines.threads import BUSY_SHARE, cpu_sample, others_share

    before = cpu_sample()
    shape = invariant_rows(model)
    share = others_share(before, cpu_sample())
    if share is not None and share >= BUSY_SHARE:
        # Neighbours' load in the timing (the card read "a verify of 5 costs 72.3 steps here"):
        # this run uses it, nothing keeps it, and the next load times it again.
        return VerifyShape(shape.rows, shape.slope, busy=True)
    known = known if isinstance(known, dict) else {}
    known[key] = {"rows": shape.rows, "slope": shape.slope}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{path.name}.{os.getpid()}")
        partial.write_text(json.dumps(known))
        os.replace(partial, path)
    except OSError:
        pass  # a read-only cache probes again next time
    return shape


def library_version() -> str:
    from llama_cpp_py_sync import __version__

    return __version__


def _cpu_signature() -> str:
    """The CPU's model name and feature flags: what decides which kernels ggml runs."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            lines = [line for line in info.read(1 << 20).splitlines() if line.startswith(("model name", "flags"))]
        return "|".join(sorted(set(lines)))
    except OSError:
        import platform

        return platform.processor() or platform.machine()


# llama_ftype values of the types that batch well on an AVX2 CPU (llama.h)
QUANTIZED_TYPES = {"Q4_0": 2, "Q8_0": 7}


def requantize(source: Path, kind: str, folder: Path, threads: int | None = None) -> Path:
    """A copy of a GGUF in another quantisation, made by llama.cpp's own quantizer (once; renamed
    into place when complete). From a Q4_K_M source, Q8_0 keeps its values to within Q8_0's
    rounding, while Q4_0 rounds them again: a model close to, not equal to, the source."""
    ffi, lib = library()
    target = folder / f"{source.stem}.{kind}.gguf"
    if target.is_file():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    # a C struct: its fields come from the CFFI declarations, not from cffi's stub
    params: Any = ffi.new("llama_model_quantize_params *", lib.llama_model_quantize_default_params())
    params.ftype = QUANTIZED_TYPES[kind]
    params.allow_requantize = True
    params.nthread = threads or default_threads()
    if lib.llama_model_quantize(str(source).encode(), str(partial).encode(), params) != 0:
        partial.unlink(missing_ok=True)
        raise UsageError(f"llama.cpp could not quantize {source.name} to {kind}")
    os.replace(partial, target)
    return target
