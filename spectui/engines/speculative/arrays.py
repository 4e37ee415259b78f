"""The few array operations the sampling and verify rules need, for numpy and for torch.

The rules (sampling.py, verify.py, the draft proposer) are written once against this
interface: on the ggml backend llama.cpp hands the loop numpy rows and nothing imports torch
(~200 MB and a second of start); on the torch backend the same rules run on tensors, on the
device they live on. `ops_of(array)` picks the implementation from the array itself, and
`ops_named` from what a model says it returns (CachedLogits.arrays).
"""

from __future__ import annotations

import math
from typing import Any, Protocol

import numpy


class ArrayOps(Protocol):
    """What the rules need beyond the operators numpy and torch share (+ - * / <, indexing,
    .sum(), .argmax(-1), .clip(min=), .tolist(), .shape)."""

    def generator(self, seed: int, device: Any = "cpu") -> Any: ...

    def uniforms(self, generator: Any, size: int, like: Any) -> Any:
        """size draws in [0, 1), of like's dtype (on like's device)."""
        ...

    def uniform64(self, generator: Any, like: Any) -> float:
        """One float64 draw in [0, 1)."""
        ...

    def softmax(self, logits: Any, temperature: float) -> Any:
        """float32 softmax(logits / temperature) over the last axis."""
        ...

    def sort_descending(self, probs: Any) -> tuple[Any, Any]:
        """(sorted values, order) over the last axis, ties in id order (a stable sort)."""
        ...

    def unsort(self, values: Any, order: Any) -> Any:
        """values scattered back to where order took them from (the inverse of sorting)."""
        ...

    def cumsum(self, values: Any, float64: bool = False) -> Any: ...

    def blocks(self, probs: Any, block: int) -> Any:
        """A [V] vector zero-padded to a multiple of block, viewed as [V / block, block]."""
        ...

    def row_sums64(self, blocks: Any) -> Any: ...

    def searchsorted_right(self, cumulative: Any, value: float) -> int: ...

    def last_with_mass(self, cumulative: Any) -> int:
        """The last index where a cumulative sum grows."""
        ...

    def prob_of(self, logits: Any, token: int) -> float:
        """softmax(logits)[token] of a [V] vector."""
        ...

    def pad_columns(self, probs: Any, width: int) -> Any: ...

    def stack(self, rows: list) -> Any: ...

    def like(self, array: Any, reference: Any) -> Any:
        """array with reference's dtype (and device)."""
        ...

    def top_two_gaps(self, rows: Any) -> list[float]:
        """Each row's top value minus its second: how near a tie a greedy choice was."""
        ...

    def greedy_rows(self, rows: Any) -> tuple[list[int], list[float]]:
        """Each row's argmax and top_two_gaps, read back from the device at once."""
        ...

    def argmax_and_prob(self, logits: Any) -> tuple[int, float]:
        """A [V] vector's argmax and its softmax probability (prob_of), read back at once."""
        ...


class NumpyOps:
    name = "numpy"

    def generator(self, seed: int, device: Any = "cpu") -> numpy.random.Generator:
        return numpy.random.Generator(numpy.random.PCG64(seed))

    def uniforms(self, generator: numpy.random.Generator | None, size: int, like: numpy.ndarray) -> numpy.ndarray:
        return _stream(generator).random(size, dtype=like.dtype if like.dtype == numpy.float32 else numpy.float64)

    def uniform64(self, generator: numpy.random.Generator | None, like: numpy.ndarray) -> float:
        return float(_stream(generator).random())

    def softmax(self, logits: numpy.ndarray, temperature: float) -> numpy.ndarray:
        scaled = logits.astype(numpy.float32) / numpy.float32(temperature)
        exp = numpy.exp(scaled - scaled.max(axis=-1, keepdims=True))
        return exp / exp.sum(axis=-1, keepdims=True)

    def sort_descending(self, probs: numpy.ndarray) -> tuple[numpy.ndarray, numpy.ndarray]:
        order = numpy.argsort(-probs, axis=-1, kind="stable")
        return numpy.take_along_axis(probs, order, axis=-1), order

    def unsort(self, values: numpy.ndarray, order: numpy.ndarray) -> numpy.ndarray:
        out = numpy.empty_like(values)
        numpy.put_along_axis(out, order, values, axis=-1)
        return out

    def cumsum(self, values: numpy.ndarray, float64: bool = False) -> numpy.ndarray:
        return numpy.cumsum(values, axis=-1, dtype=numpy.float64 if float64 else None)

    def blocks(self, probs: numpy.ndarray, block: int) -> numpy.ndarray:
        return numpy.pad(probs, (0, (-probs.shape[0]) % block)).reshape(-1, block)

    def row_sums64(self, blocks: numpy.ndarray) -> numpy.ndarray:
        return blocks.sum(axis=1, dtype=numpy.float64)

    def searchsorted_right(self, cumulative: numpy.ndarray, value: float) -> int:
        return int(numpy.searchsorted(cumulative, value, side="right"))

    def last_with_mass(self, cumulative: numpy.ndarray) -> int:
        return int(numpy.nonzero(numpy.diff(cumulative, prepend=0.0) > 0)[0][-1])

    def prob_of(self, logits: numpy.ndarray, token: int) -> float:
        wide = logits.astype(numpy.float64)
        top = wide.max()
        return math.exp(wide[token] - top - math.log(numpy.exp(wide - top).sum()))

    def pad_columns(self, probs: numpy.ndarray, width: int) -> numpy.ndarray:
        return numpy.pad(probs, (0, width - probs.shape[-1]))

    def stack(self, rows: list[numpy.ndarray]) -> numpy.ndarray:
        return numpy.stack(rows)

    def like(self, array: object, reference: numpy.ndarray) -> numpy.ndarray:
        return numpy.asarray(array, dtype=reference.dtype)

    def top_two_gaps(self, rows: numpy.ndarray) -> list[float]:
        top = numpy.partition(rows.astype(numpy.float32, copy=False), -2, axis=-1)
        return (top[:, -1] - top[:, -2]).tolist()

    def greedy_rows(self, rows: numpy.ndarray) -> tuple[list[int], list[float]]:
        return rows.argmax(-1).tolist(), self.top_two_gaps(rows)

    def argmax_and_prob(self, logits: numpy.ndarray) -> tuple[int, float]:
        token = int(logits.argmax())
        return token, self.prob_of(logits, token)


_unseeded: numpy.random.Generator | None = None


def _stream(generator: numpy.random.Generator | None) -> numpy.random.Generator:
    """The reply's seeded stream, or one process-wide unseeded stream (torch's global RNG's part)."""
    global _unseeded
    if generator is not None:
        return generator
    if _unseeded is None:
        _unseeded = numpy.random.default_rng()
    return _unseeded


NUMPY = NumpyOps()


def ops_named(name: str) -> ArrayOps:
    if name == "numpy":
        return NUMPY
    from spectui.engines.speculative.torch_arrays import TORCH

    return TORCH


def ops_of(array: Any) -> ArrayOps:
    """The implementation for this array: numpy's for an ndarray, else torch's (imported only then)."""
    return ops_named("numpy" if isinstance(array, numpy.ndarray) else "torch")
