"""What the loop asks of a model with its KV cache, without torch: CachedModel (torch,
spectui.engines.torch_backend.kv) and LlamaCached (libllama, numpy rows) both give it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol


def common_prefix_len(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class CachedLogits(Protocol):
    """Say which tokens the model should have seen, get the logits of the last rows: a torch
    tensor or a numpy array, as `arrays` says ("torch" or "numpy"), for the rules to sample with."""

    @property
    def device(self) -> Any: ...

    @property
    def arrays(self) -> str: ...

    def reset(self) -> None: ...

    def logits(self, token_ids: Sequence[int], num_rows: int) -> Any: ...
