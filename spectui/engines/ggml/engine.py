"""The embedded engine on ggml: spectui's own loop (decode_steps: the Step contract, exact
provenance, adaptive k, the same proposers and verify rules) with llama.cpp computing the
target's and the draft's forwards.

LlamaCached gives a LlamaModel the interface the loop expects of a model with a KV cache
(spectui.engines.torch_backend.kv.CachedModel): say which tokens it should have seen, get the
logits of the last rows; the common prefix stays cached, the rest is rolled back and run.
T = 0 stays lossless because a verify never holds more tokens than the target's kernels
compute bit for bit as one at a time (lib.invariant_rows), and a reply leaves in the cache
exactly what plain decoding leaves. Its rows are numpy arrays: the loop samples and verifies
them with numpy (spectui.engines.speculative.arrays), so this engine never imports torch.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from spectui.core.engine import with_threads
from spectui.core.events import Done, Event, GenerationParams, LiveControl, Step
from spectui.engines.speculative.cached_model import common_prefix_len
from spectui.engines.speculative.engine import CAPABILITIES, EmbeddedEngine

if TYPE_CHECKING:
    import numpy

    from spectui.engines.speculative.cached_model import CachedLogits


class LlamaCached:
    """A LlamaModel kept in step with a token list, as CachedModel keeps a torch model.

    rows: the widest decode whose rows equal decoding one token at a time; a call that wants
    more than one row (a verify) runs in pieces of at most that many tokens. None: no limit
    (a draft model, whose rounding changes acceptance, never the output)."""

    device = "cpu"
    arrays = "numpy"  # logits are numpy rows: the loop's rules run on numpy, torch never loads
    # A long prompt's prefill runs in chunks of this many (spectui.engines.speculative.loop): on
    # 2 cores 64 tokens are about a second of a 1.5B model, so Esc is heard within one.
    prefill_chunk = 64

    def __init__(self, model, rows: int | None = None) -> None:
        self.model = model
        self.rows = rows
        self.seen: list[int] = []

    def reset(self) -> None:
        self.model.clear()
        self.seen = []

    def logits(self, token_ids: Sequence[int], num_rows: int) -> numpy.ndarray:
        import numpy

        keep = min(common_prefix_len(self.seen, token_ids), len(token_ids) - num_rows)
        self.model.keep(keep)
        tail = list(token_ids[keep:])
        if num_rows == 1 or self.rows is None or len(tail) <= self.rows:
            rows = self.model.decode(tail, num_rows)
        else:
            pieces = [tail[start:start + self.rows] for start in range(0, len(tail), self.rows)]
            rows = numpy.concatenate([self.model.decode(piece, len(piece)) for piece in pieces])[-num_rows:]
        self.seen = list(token_ids)
        return rows

    def forget_after(self, length: int) -> None:
        """Keep only the first `length` tokens cached."""
        if length < len(self.seen):
            self.model.keep(length)
            self.seen = self.seen[:length]


def llama_draft_proposer(draft: LlamaCached, target_width: int):
    """spectui's draft-model proposer, its forwards run by llama.cpp."""
    from spectui.engines.speculative.proposers import DraftModelProposer

    class LlamaDraftProposer(DraftModelProposer):
        def __init__(self) -> None:  # the parent's wraps a torch model; this one is wrapped already
            self.draft, self.target_width = draft, target_width

    return LlamaDraftProposer()


class LlamaCppEngine(EmbeddedEngine):
    """The embedded engine (its loop, pieces, adaptive k, method switch) with llama.cpp computing
    every forward."""

    # Batch-invariant kernels (lib.LlamaModel) in verify pieces of proven width: T = 0 is identical.
    declared = replace(CAPABILITIES, greedy_identical=True)

    def cached(self, target_model):
        from spectui.engines.ggml.lib import cached_invariant_rows

        shape = cached_invariant_rows(target_model)
        self.verify_slope = self.measured_verify_slope = shape.slope
        cached: CachedLogits = LlamaCached(target_model, shape.rows)  # the checker holds it to the loop's contract
        return cached

    @property
    def context_length(self) -> int:
        return self.target.model.context_length

    def settle(self, stop=lambda: False, progress=None) -> bool:
        return True  # nothing put off: llama.cpp maps the GGUF as it is

    def stream_ids(self, prompt_ids: Sequence[int], params: GenerationParams, control: LiveControl) -> Iterator[Event]:
        emitted = 0
        for event in super().stream_ids(prompt_ids, params, control):
            if isinstance(event, Step):
                emitted += len(event.token_ids)
            elif isinstance(event, Done):
                # Plain decoding never runs a reply's last token, nor drafts accepted past a stop
                # token: the next prompt prefills them in one batch, which rounds its own way.
                self.target.forget_after(len(prompt_ids) + max(0, emitted - 1))
            yield event

    def use_threads(self, threads: int) -> None:
        self.target.model.set_threads(threads)
        self.info = with_threads(self.info, threads)
        draft = self._proposers.get("draft")
        if draft is not None:
            draft.draft.model.set_threads(threads)

    def close(self) -> None:
        super().close()
        self.target.model.close()
        draft = self._proposers.get("draft")
        if draft is not None:
            draft.draft.model.close()
