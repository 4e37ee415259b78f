"""Decodes of n rows timed on a loaded target: what a verify of n - 1 drafts costs against a plain
step, at a conversation's length (advise's cost profile: spectui.advise.measure). The same code
times a target loaded for it and the chat's own engine between replies."""

from __future__ import annotations

import time
from collections.abc import Sequence

from spectui.core.engine import DecodeTimings, Progress
from spectui.engines.speculative.cached_model import CachedLogits
from spectui.engines.threads import cpu_sample, others_share


def time_decodes(target: CachedLogits, backend: str, context_ids: Sequence[int], widest: int, rounds: int,
                 progress: Progress | None = None) -> DecodeTimings:
    """Every width 1..widest (a verify's piece at most) after context_ids, `rounds` times, the
    widths interleaved: a slow stretch of a shared machine slows every width alike."""
    report = progress or (lambda stage, done, total: None)
    widest = target.exact_rows or widest
    ids = list(context_ids) or [0] * 64
    base, tail = ids[:-widest] if len(ids) > widest else ids, (ids * (widest // len(ids) + 1))[:widest]
    report("prefill", 0, 1)
    target.logits(base, num_rows=1)
    report("prefill", 1, 1)
    seconds: dict[int, list[float]] = {width: [] for width in range(1, widest + 1)}
    before = cpu_sample()
    for round_index in range(rounds):
        for width in seconds:
            started = time.perf_counter()
            target.logits(base + tail[:width], num_rows=width)
            seconds[width].append(time.perf_counter() - started)
        report("verify widths", round_index + 1, rounds)
    return DecodeTimings(seconds, len(base), target.exact_rows, backend, others_share(before, cpu_sample()))
