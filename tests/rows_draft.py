"""A numpy draft model for the cross-vocabulary tests (TLI and SLEM): its next-token logits
are a row chosen by its last token."""

from __future__ import annotations

import numpy


class RowsByLastToken:
    """A numpy draft (CachedLogits) whose next-token logits depend on its last token only."""

    device, arrays, prefill_chunk, exact_rows = "cpu", "numpy", None, None

    def __init__(self, rows: numpy.ndarray) -> None:
        self.rows = rows
        self.seen: list[int] = []
        self.calls: list[list[int]] = []

    def reset(self) -> None:
        self.seen = []

    def logits(self, token_ids, num_rows):
        self.seen = list(token_ids)
        self.calls.append(list(token_ids))
        return self.rows[token_ids[-1]][None, :]

    def prefill(self, token_ids, stop) -> bool:
        self.seen = list(token_ids)
        return True
