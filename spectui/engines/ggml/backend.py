"""The ggml backend: llama.cpp computes the target's (and a draft's) forwards for spectui's loop,
its batch-invariant kernels in verify pieces of proven width, so T = 0 is identical to plain
decoding (docs/ggml.md)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from spectui.engines.ggml.cached import LlamaCached
from spectui.engines.speculative.backend import LOOP_CAPABILITIES
from spectui.engines.speculative.cached_model import CachedLogits

if TYPE_CHECKING:
    from spectui.engines.ggml.lib import LlamaModel
    from spectui.engines.speculative.cross_vocab import Encode
    from spectui.engines.speculative.proposers import Proposer
    from spectui.models.vocab_map import VocabMap


class GgmlBackend:
    name = "ggml"
    # Batch-invariant kernels (lib.LlamaModel) in verify pieces of proven width: T = 0 is identical.
    capabilities = replace(LOOP_CAPABILITIES, greedy_identical=True)
    generation_config = None  # the GGUF's tokenizer folder gives the stop tokens

    def __init__(self, model: LlamaModel) -> None:
        from spectui.engines.ggml.lib import cached_invariant_rows

        # The widest verify whose rows equal one-at-a-time decoding, and what a verify costs,
        # probed once per GGUF and CPU (lib.cached_invariant_rows). A long prompt prefills at
        # llama.cpp's defaults and its cache moves into the exact context (ggml.fast_prefill).
        shape = cached_invariant_rows(model)
        self.target = LlamaCached(model, shape.rows, fast_prefill=True)
        self.verify_slope: float = shape.slope
        self.measured_verify_slope: float | None = None if shape.busy else shape.slope  # a busy figure is none

    @property
    def context_length(self) -> int:
        return self.target.model.context_length

    def use_threads(self, threads: int, draft: CachedLogits | None) -> None:
        self.target.model.set_threads(threads)
        if isinstance(draft, LlamaCached):
            draft.model.set_threads(threads)

    def settle(self, draft: CachedLogits | None, stop: Callable[[], bool],
               progress: Callable[[int, int], None] | None) -> bool:
        return True  # nothing put off: llama.cpp maps the GGUF as it is

    def reply_ended(self, prompt_length: int, emitted: int) -> None:
        # Plain decoding never runs a reply's last token, nor drafts accepted past a stop
        # token: the next prompt prefills them in one batch, which rounds its own way.
        self.target.forget_after(prompt_length + max(0, emitted - 1))

    def close(self, draft: CachedLogits | None) -> None:
        self.target.drop_prefill()
        self.target.model.close()
        if isinstance(draft, LlamaCached):
            draft.drop_prefill()
            draft.model.close()


def ggml_draft_proposer(draft: LlamaModel, target_width: int, vocab: VocabMap | None = None,
                        encode: Encode | None = None, target_encode: Encode | None = None,
                        how: str = "tli") -> Proposer:
    """spectui's draft-model proposer, its forwards run by llama.cpp; across vocabularies (vocab
    not identical, encode the draft's tokenizer) TLI's, or SLEM's (how "slem", target_encode
    the target's tokenizer)."""
    from spectui.engines.speculative.slem import vocab_proposer

    # The draft reads the prompt before the first token too: a long one goes through its own
    # second context as the target's does (ggml.fast_prefill).
    return vocab_proposer(LlamaCached(draft, fast_prefill=True), target_width, vocab, encode, target_encode, how)
