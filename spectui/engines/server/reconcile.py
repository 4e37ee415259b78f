"""Lay the server's per-request record over the streamed chunks, after the reply.

While streaming, a chunk's colours are a guess from its size. The final usage chunk may
carry vLLM's own per-step record (`--per-request-spec-decode-metrics detailed`); when it
fits the chunk sizes it decides the colours, and the reply is restated if they differ.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TypeGuard

from spectui.engines.provenance import StepCount, is_unambiguous, rebuild, restate
from spectui.engines.server.bounds import MAX_DRAFTS_PER_STEP
from spectui.engines.server.chunks import DraftCounts
from spectui.core.events import Source, Step


@dataclass(frozen=True)
class Reconciliation:
    approximate: bool  # some colours stay a guess: no record, or one that does not fit
    # The record fits the chunks in more than one way: which one-token steps rejected their
    # drafts (RECOVERED) and which proposed nothing (TARGET) is then not known; totals are.
    ambiguous: bool
    restated_steps: tuple[Step, ...] | None  # the reply recoloured from the record, if it differs
    counts: list[StepCount] | None  # the record laid over the chunks, when it fits


def per_step_record(record: Mapping | None) -> tuple[list[int], list[int]] | None:
    """(per_step_accepted, per_step_drafted) from vLLM's record; None when it has none."""
    if not record:
        return None
    accepted = record.get("per_step_accepted")
    drafted = record.get("per_step_drafted")
    if counts_list(accepted) and counts_list(drafted) and len(accepted) == len(drafted):
        return accepted, drafted
    # vLLM leaves the arrays out when they are empty, so a reply that never verified a
    # draft has a summary only; it is still a complete record.
    if record.get("num_spec_steps") == 0:
        return [], []
    return None


def counts_list(value: object) -> TypeGuard[list[int]]:
    return isinstance(value, list) and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in value)


def reconcile(
    steps: Sequence[Step], record: Mapping | None, *, k: int, method: str
) -> Reconciliation:
    """`k` and `method` are the server's, as the steps should carry them."""
    chunk_sizes = [len(step.token_ids) for step in steps]
    per_step = per_step_record(record)
    if per_step is None:
        # Without speculation every token is the target's, guessed or not.
        return Reconciliation(approximate=bool(steps) and k > 0, ambiguous=False, restated_steps=None, counts=None)
    counts = rebuild(chunk_sizes, *per_step)
    if counts is None:  # the stream merged steps: no reading of the chunks fits the record
        return Reconciliation(approximate=True, ambiguous=False, restated_steps=None, counts=None)
    restated = tuple(
        replace(step, k=k, method=method if step.num_drafted else "")
        for step in restate(steps, counts)
    )
    changed = any(
        (old.sources, old.num_drafted, old.num_accepted, old.k, old.method)
        != (new.sources, new.num_drafted, new.num_accepted, new.k, new.method)
        for old, new in zip(steps, restated)
    )
    return Reconciliation(
        approximate=False,
        ambiguous=not is_unambiguous(chunk_sizes, per_step[0]),
        restated_steps=restated if changed else None,
        counts=counts,
    )


def spread_counts(steps: Sequence[Step], counts: DraftCounts | None, *, method: str) -> Reconciliation:
    """Colours for a reply streamed as text (one token per chunk) from its whole-reply draft
    counts (llama-server, LM Studio): which tokens were drafts is not known, so the accepted
    ones are spread evenly over the reply. γ is exact; the colours are approximate.

    Each target forward emits its accepted drafts then one token of its own, so n tokens with
    a accepted drafts took n − a forwards; the first is the prompt's (no drafts). Each
    forward's counts (drafted, accepted) go on the step of its own token, so γ, τ and
    per-position acceptance count forwards as vLLM does; its drafts' steps count nothing
    (accepted_count 0), so any sum over the steps gives the server's counts.
    """
    if counts is None or not steps:
        return Reconciliation(approximate=False, ambiguous=False, restated_steps=None, counts=None)
    num_tokens = sum(len(step.token_ids) for step in steps)
    forwards = num_tokens - counts.accepted
    if forwards < 2 and counts.drafted or any(len(step.token_ids) != 1 for step in steps):
        # The counts do not fit one token per chunk: keep the stream as it came, say so.
        return Reconciliation(approximate=True, ambiguous=False, restated_steps=None, counts=None)
    accepted = share(counts.accepted, forwards - 1)
    rejected = share(counts.drafted - counts.accepted, forwards - 1)
    if forwards > 1 and accepted[0] + rejected[0] > MAX_DRAFTS_PER_STEP:
        # More drafts a forward than any k: the counts cannot be spread as steps.
        return Reconciliation(approximate=True, ambiguous=False, restated_steps=None, counts=None)
    restated: list[Step] = []
    position = 0
    for forward in range(forwards):
        kept = accepted[forward - 1] if forward else 0
        drafted = kept + rejected[forward - 1] if forward else 0
        for _ in range(kept):
            restated.append(
                replace(steps[position], sources=(Source.DRAFT,), draft_count=0, accepted_count=0, method="")
            )
            position += 1
        if drafted:
            own = Source.BONUS if kept == drafted else Source.RECOVERED
            restated.append(
                replace(steps[position], sources=(own,), draft_count=drafted, accepted_count=kept, method=method)
            )
        else:
            restated.append(replace(steps[position], sources=(Source.TARGET,), draft_count=0, method=""))
        position += 1
    return Reconciliation(approximate=True, ambiguous=False, restated_steps=tuple(restated), counts=None)


def share(total: int, parts: int) -> list[int]:
    """`total` in `parts` near-equal whole shares (the larger ones first)."""
    if parts <= 0:
        return []
    base, extra = divmod(total, parts)
    return [base + (1 if index < extra else 0) for index in range(parts)]
