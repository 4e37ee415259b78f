"""Keep the garbage collector's full passes out of a streaming reply.

A full (generation 2) collection walks every container object alive — torch, the
tokenizer, Textual's caches, the reply so far — and stalls the UI thread, keys included,
for 50-150 ms on a 2-core machine (measured by benchmarks/tokenview.py). The young
generations still run as usual; full passes happen between replies, when nobody waits.
"""

from __future__ import annotations

import gc

_NO_AUTOMATIC_FULL_PASS = 1_000_000


def defer_full_collections() -> tuple[int, int, int]:
    """Stop automatic full passes; returns the thresholds to give back on exit."""
    before = gc.get_threshold()
    gc.set_threshold(before[0], before[1], _NO_AUTOMATIC_FULL_PASS)
    return before


def collect_between_replies() -> None:
    gc.collect()
