"""What the speculative engine asks of a backend (torch or ggml): the target as a model kept in
step with a token list, what the kernels promise, and the few things only the backend can do
(threads, deferred load work, closing). The loop itself never asks which backend it runs on."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from spectui.core.engine import ALL_CONTROLS, Capabilities
from spectui.engines.speculative.cached_model import CachedLogits

# What the loop gives on any backend; a backend whose kernels promise more says so.
LOOP_CAPABILITIES = Capabilities(live_controls=ALL_CONTROLS, exact_provenance=True, method_switch=True, tokenizer=True,
                                 times_decodes=True)


class Backend(Protocol):
    """One backend, its target loaded: spectui.engines.torch_backend.backend.TorchBackend and
    spectui.engines.ggml.backend.GgmlBackend (the type checker holds both to this)."""

    @property
    def name(self) -> str:
        """What --backend says: "torch" or "ggml"."""
        ...

    @property
    def target(self) -> CachedLogits: ...

    @property
    def capabilities(self) -> Capabilities: ...

    @property
    def verify_slope(self) -> float:
        """V(k)/V(0) - 1 per drafted token as far as the backend knows before measuring (adaptive k's prior)."""
        ...

    @property
    def measured_verify_slope(self) -> float | None:
        """The slope timed on this machine (ggml, at load), or None."""
        ...

    @property
    def generation_config(self) -> object | None:
        """The model's own generation settings (its stop tokens), where it has them."""
        ...

    @property
    def context_length(self) -> int | None: ...

    def use_threads(self, threads: int, draft: CachedLogits | None) -> None: ...

    def settle(self, draft: CachedLogits | None, stop: Callable[[], bool], progress: Callable[[int, int], None] | None) -> bool:
        """Finish work put off at load (torch's int8 joins); True once done."""
        ...

    def reply_ended(self, prompt_length: int, emitted: int) -> None:
        """A reply of `emitted` tokens after a prompt of `prompt_length` ended (ggml trims its cache)."""
        ...

    def close(self, draft: CachedLogits | None) -> None: ...
