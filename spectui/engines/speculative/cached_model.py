"""What the loop asks of a model with its KV cache, without torch: the one protocol both
backends satisfy (spectui.engines.torch_backend.kv.CachedModel and .static_kv.StaticCachedModel
on torch, spectui.engines.ggml.cached.LlamaCached on libllama's numpy rows)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable


def common_prefix_len(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens a and b share. Called k + 2 times a step on the whole context:
    slices compared in C (about 10x a Python loop at 8k tokens), halving the span that holds
    the first difference, then a short loop inside it."""
    n = min(len(a), len(b))
    a = a if isinstance(a, list) else list(a)  # a list never equals a tuple: compare like with like
    b = b if isinstance(b, list) else list(b)
    if a[:n] == b[:n]:
        return n
    low, high = 0, n  # a[:low] == b[:low]; the first difference is before high
    while high - low > 32:
        middle = (low + high) // 2
        if a[low:middle] == b[low:middle]:
            low = middle
        else:
            high = middle
    while a[low] == b[low]:
        low += 1
    return low


class CachedLogits(Protocol):
    """Say which tokens the model should have seen, get the logits of the last rows: a torch
    tensor or a numpy array, as `arrays` says ("torch" or "numpy"), for the rules to sample with."""

    @property
    def device(self) -> Any: ...

    @property
    def arrays(self) -> str: ...

    @property
    def seen(self) -> list[int]:
        """The tokens the cache holds now, in order."""
        ...

    @property
    def prefill_chunk(self) -> int | None:
        """A prompt longer than this goes into the cache a chunk at a time (progress, cancel);
        None: whole."""
        ...

    @property
    def exact_rows(self) -> int | None:
        """The widest decode whose rows equal decoding one token at a time (None: any width). A
        T = 0 verify wider than that runs in pieces of it and stops at the first rejection."""
        ...

    def reset(self) -> None: ...

    def logits(self, token_ids: Sequence[int], num_rows: int) -> Any: ...

    def prefill(self, token_ids: Sequence[int], stop: Callable[[], bool]) -> bool:
        """Put a prompt chunk in the cache, no rows wanted; False when stop() ended it early."""
        ...


@runtime_checkable
class CachedFeatures(CachedLogits, Protocol):
    """A cached model that also hands out its last hidden states, for proposers that draft from
    them (Medusa, EAGLE heads): the torch backend's CachedModel."""

    def logits_and_hidden(self, token_ids: Sequence[int], num_rows: int) -> tuple[Any, Any, int]: ...

    def tree_logits_and_hidden(
        self, token_ids: Sequence[int], drafted: Sequence[int], parents: Sequence[int]
    ) -> tuple[Any, Any, int]: ...
