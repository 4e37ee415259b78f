"""Decodes of n rows timed on a loaded target: what a verify of n - 1 drafts costs against a plain
step, at a conversation's length (advise's cost profile: spectui.advise.measure). The same code
times a target loaded for it and the chat's own engine between replies."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from spectui.core.engine import DecodeTimings, Progress
from spectui.engines.speculative.cached_model import CachedLogits
from spectui.engines.speculative.proposers import Proposal, Proposer
from spectui.engines.threads import cpu_sample, others_share

STEPS = 2  # loop steps timed per width and round, after the reply's first (the prompt's)


def time_decodes(target: CachedLogits, backend: str, context_ids: Sequence[int], widest: int, rounds: int,
                 progress: Progress | None = None, tokenizer: Any = None) -> DecodeTimings:
    """Every width 1..widest (a verify's piece at most) after context_ids, `rounds` times, the
    widths interleaved: a slow stretch of a shared machine slows every width alike. Each width is
    timed as the loop's own steps (loop_steps): the target's decode alone left out the readback,
    the verdict, the rollback and the loop's work, and replays came out 10-31 % above timed runs
    (issue 57). tokenizer: the engine's, for the loop's detokenizer (None: none is run)."""
    report = progress or (lambda stage, done, total: None)
    widest = target.exact_rows or widest
    ids = list(context_ids) or [0] * 64
    base = ids[:-widest] if len(ids) > widest else ids
    report("prefill", 0, 1)
    target.logits(base, num_rows=1)
    report("prefill", 1, 1)
    seconds: dict[int, list[float]] = {width: [] for width in range(1, widest + 1)}
    before = cpu_sample()
    for round_index in range(rounds):
        for width, times in seconds.items():
            times.append(min(loop_steps(target, base, width, tokenizer)))  # the round's fastest: one value a round
        report("verify widths", round_index + 1, rounds)
    return DecodeTimings(seconds, len(base), target.exact_rows, backend, others_share(before, cpu_sample()))


def loop_steps(target: CachedLogits, base: list[int], width: int, tokenizer: Any) -> list[float]:
    """STEPS loop steps (decode_steps) from `base` on, each timed from the one before to its own
    arrival: width 1 plain steps, width n steps verifying n - 1 drafts the target turns down, so
    the next step rolls them back, as after a real rejection."""
    from spectui.core.events import Control, GenerationParams, Step
    from spectui.engines.speculative.detokenize import IncrementalDetokenizer
    from spectui.engines.speculative.loop import decode_steps

    k = width - 1
    detokenizer: Any = IncrementalDetokenizer(tokenizer, base) if tokenizer is not None else Silent()
    steps = decode_steps(target, TurnedDown() if k else None, base, GenerationParams(max_tokens=(STEPS + 1) * width + 1),
                         Control(k=k, temperature=0.0), set(), detokenizer)
    times: list[float] = []
    arrived = None
    for event in steps:
        if isinstance(event, Step):
            now = time.perf_counter()
            if arrived is not None:  # the reply's first step is the prompt's: not timed
                times.append(now - arrived)
            arrived = now
            if len(times) >= STEPS:
                break
    close = getattr(steps, "close", None)  # decode_steps' generator: ended at the step it stopped at
    if close is not None:
        close()
    return times


class TurnedDown(Proposer):
    """k drafts the target turns down (a token it rarely follows itself with: the context's last)."""

    method = "measure"

    def propose(self, token_ids: Sequence[int], k: int, temperature: float, top_p: float, generator: object,
                **stop: object) -> Proposal:
        return Proposal([token_ids[-1]] * k, None)


class Silent:
    """A detokenizer for a target timed without its tokenizer: no text."""

    def add(self, token_ids: Sequence[int]) -> str:
        return ""

    def flush(self) -> str:
        return ""
