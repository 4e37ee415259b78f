"""The ggml backend's cached model: spectui's own loop (decode_steps: the Step contract, exact
provenance, adaptive k, the same proposers and verify rules) with llama.cpp computing the
target's and the draft's forwards (the backend itself: spectui.engines.ggml.backend).

LlamaCached gives a LlamaModel the interface the loop expects of a model with a KV cache
(spectui.engines.speculative.cached_model.CachedLogits, as torch_backend.kv.CachedModel does): say which tokens it should have seen, get the
logits of the last rows; the common prefix stays cached, the rest is rolled back and run.
T = 0 stays lossless because a verify never holds more tokens than the target's kernels
compute bit for bit as one at a time (lib.invariant_rows), and a reply leaves in the cache
exactly what plain decoding leaves. Its rows are numpy arrays: the loop samples and verifies
them with numpy (spectui.engines.speculative.arrays), so the ggml backend never imports torch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from spectui.engines.speculative.cached_model import common_prefix_len

if TYPE_CHECKING:
    import numpy

    from spectui.engines.ggml.fast_prefill import FastPrefill
    from spectui.engines.ggml.lib import LlamaModel


class LlamaCached:
    """A LlamaModel kept in step with a token list, as CachedModel keeps a torch model.

    rows: the widest decode whose rows equal decoding one token at a time; the rows a call
    wants (a verify's) run in pieces of at most that many tokens, after the tokens before them
    (a prompt's last chunk) in a call of their own. None: no limit, one call (a draft model,
    whose rounding changes acceptance, never the output).

    fast_prefill: a long prompt into an empty cache runs at llama.cpp's defaults in a second
    context, whose cache moves here before the first row is read (ggml.fast_prefill); every
    decode, the first token's included, runs in this exact context."""

    device = "cpu"
    arrays = "numpy"  # logits are numpy rows: the loop's rules run on numpy, torch never loads
    # A long prompt's prefill runs in chunks of this many (spectui.engines.speculative.loop), each
    # one progress report; Esc does not wait for a chunk's end (prefill's stop).
    prefill_chunk = 64

    def __init__(self, model: LlamaModel, rows: int | None = None, fast_prefill: bool = False) -> None:
        self.model = model
        self.exact_rows = rows
        self.seen: list[int] = []
        self.fast_prefill = fast_prefill and model.batch_invariant
        self.pending: FastPrefill | None = None  # a prefill under way in the second context
        # the loop's chunk where the second context takes the prompt (only with fast prefill)
        self.fast_chunk: int | None = model.batch if self.fast_prefill else None

    def reset(self) -> None:
        self.drop_prefill()
        self.model.clear()
        self.seen = []

    def logits(self, token_ids: Sequence[int], num_rows: int) -> numpy.ndarray:
        import numpy

        self._prefill_fast(token_ids, len(token_ids) - num_rows, None)
        self._land()
        keep = min(common_prefix_len(self.seen, token_ids), len(token_ids) - num_rows)
        self.model.keep(keep)
        tail = list(token_ids[keep:])
        width = self.exact_rows
        if width is None:
            rows = self.model.decode(tail, num_rows)
        else:
            # The rows asked run in calls of their own, at most `width` tokens each; the tokens
            # before them (a prompt's last chunk) in one call: a reply's first row is then computed
            # alone whether its prompt runs now or an earlier reply left it cached (issue 58).
            if len(tail) > num_rows:
                self.model.decode(tail[:-num_rows], 1)
            asked = [tail[len(tail) - num_rows:][start:start + width] for start in range(0, num_rows, width)]
            pieces = [self.model.decode(piece, len(piece)) for piece in asked]
            rows = pieces[0] if len(pieces) == 1 else numpy.concatenate(pieces)
        self.seen = list(token_ids)
        return rows

    def prefill(self, token_ids: Sequence[int], stop: Callable[[], bool]) -> bool:
        """Run a prompt chunk into the cache; False when stop() said so mid-decode (what whole
        calls had run stays cached and seen)."""
        from spectui.engines.ggml.lib import Interrupted

        try:
            if self._prefill_fast(token_ids, len(token_ids), stop):
                return True
        except Interrupted:
            return False
        self._land()
        keep = common_prefix_len(self.seen, token_ids)
        self.model.keep(keep)
        try:
            self.model.decode(list(token_ids[keep:]), 1, stop)
        except Interrupted as interrupted:
            self.model.keep(interrupted.cached)
            self.seen = list(token_ids[:interrupted.cached])
            return False
        self.seen = list(token_ids)
        return True

    def forget_after(self, length: int) -> None:
        """Keep only the first `length` tokens cached."""
        self._land()
        if length < len(self.seen):
            self.model.keep(length)
            self.seen = self.seen[:length]

    def prefill_chunk_for(self, token_ids: Sequence[int]) -> int | None:
        """The loop's chunk for this prompt: a prompt the second context takes goes in llama.cpp's
        own batches, as llama.cpp runs it (in 64-token calls the 1.5B's 837-token prompt took
        twice the CPU beside busy neighbours: each call waits on its threads at every graph
        node), the exact path's in chunks of prefill_chunk."""
        return self.fast_chunk if self._goes_fast(token_ids, len(token_ids) - 1) else self.prefill_chunk

    def _goes_fast(self, token_ids: Sequence[int], end: int) -> bool:
        from spectui.engines.ggml.fast_prefill import FAST_PREFILL_MIN

        keep = common_prefix_len(self.seen, token_ids)
        if self.pending is not None:
            return keep == len(self.seen) <= end  # the prompt under way, going on
        # A short cached prefix (a chat template's system lines, shared by every new chat)
        # runs again with the rest; a longer one is a conversation going on: a follow-up.
        return self.fast_prefill and keep < FAST_PREFILL_MIN and end - keep >= FAST_PREFILL_MIN

    def _prefill_fast(self, token_ids: Sequence[int], end: int, stop: Callable[[], bool] | None) -> bool:
        """Run token_ids[:end] in the second context where a fast prefill is (or may start)
        under way; True when it took them. Interrupted as the exact prefill raises it."""
        from spectui.engines.ggml.fast_prefill import StateLayoutError
        from spectui.engines.ggml.lib import Interrupted

        if not self._goes_fast(token_ids, end):
            return False  # (under way: another prompt; what ran moves over, the exact path goes on)
        try:
            if self.pending is None:
                self.pending = self.open_prefill(end)
                self.model.clear()
                self.seen = []
            elif end > self.pending.cells:
                self.pending = self.pending.grown(self.model, end)
        except (MemoryError, StateLayoutError) as error:
            self.fast_prefill = self.fast_prefill and isinstance(error, MemoryError)
            self.drop_prefill()  # what ran there runs again here: slow, never wrong
            return False
        try:
            self.pending.decode(list(token_ids[len(self.seen):end]), stop)
        except Interrupted as interrupted:
            self.seen = list(token_ids[:interrupted.cached])
            raise
        self.seen = list(token_ids[:end])
        return True

    def open_prefill(self, cells: int) -> FastPrefill:
        """The second context a fast prefill runs in, sized for `cells` (tests count its
        decodes here)."""
        from spectui.engines.ggml.fast_prefill import FastPrefill

        return FastPrefill(self.model, cells)

    def _land(self) -> None:
        """Move a fast prefill's cache into the exact context; where its state cannot be read,
        the same tokens run again here (slow, never wrong) and fast prefill stays off."""
        from spectui.engines.ggml.fast_prefill import StateLayoutError

        pending, self.pending = self.pending, None
        if pending is None:
            return
        try:
            pending.land(self.model)
        except StateLayoutError:
            self.fast_prefill = False
            self.model.clear()
            if self.seen:
                self.model.decode(list(self.seen), 1)

    def drop_prefill(self) -> None:
        """Free a fast prefill's context without moving it (a reset, the engine closing)."""
        if self.pending is not None:
            self.pending.close()
            self.pending = None
            self.seen = []
            self.model.clear()
