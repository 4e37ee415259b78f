"""Provenance for engines that report how many tokens a step emitted, not which were drafts.

vLLM (in-process or behind its OpenAI server) streams one output per engine step; a step
that verified a draft emits n tokens = n − 1 accepted drafts + 1 target token (the bonus
when every draft was kept, the recovered token otherwise). The first token comes from
prefill and is the target's own. Stdlib only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from spectui.core.events import Source, Step


@dataclass(frozen=True)
class StepCount:
    """One engine step of one request, as the engine's own counters saw it."""

    num_tokens: int  # tokens generated in this step
    num_drafted: int  # 0: nothing was proposed for this step
    num_accepted: int


def sources_for(num_tokens: int, num_drafted: int, num_accepted: int) -> tuple[Source, ...]:
    """Sources of one step's tokens when the engine's counters for it are known.

    A step cut short by a stop token or max_tokens emits fewer than num_accepted + 1
    tokens: what it kept are the accepted drafts, in order.
    """
    if num_drafted == 0:
        return (Source.TARGET,) * num_tokens
    drafts = min(num_tokens, num_accepted)
    if num_tokens == drafts:
        return (Source.DRAFT,) * drafts
    last = Source.BONUS if num_accepted == num_drafted else Source.RECOVERED
    # More tokens than accepted + 1 cannot come from one step: mark the excess as plain
    # target tokens rather than invent drafts.
    excess = num_tokens - drafts - 1
    return (Source.DRAFT,) * drafts + (last,) + (Source.TARGET,) * excess


def hidden_accepted(num_tokens: int, num_drafted: int, num_accepted: int) -> int | None:
    """The engine's accepted count for a step cut short inside its accepted drafts (a stop
    token, max_tokens): the target accepted drafts the reply never showed, and γ, like
    vLLM's own counters, counts them. None when the shown DRAFT tokens are the count."""
    if num_drafted and num_tokens < num_accepted:
        return num_accepted
    return None


def guess_sources(num_tokens: int, k: int, first: bool) -> tuple[Source, ...]:
    """Sources of one chunk from its size alone (no counters): n − 1 drafts + 1 target token.

    Without counters a one-token chunk after a rejected draft and one after no proposal look
    the same; both are called RECOVERED when k > 0. A chunk of k + 1 kept every draft.
    """
    if num_tokens == 0:
        return ()
    if first or k == 0:
        return (Source.TARGET,) * num_tokens
    if num_tokens > k + 1:  # several steps merged into one chunk: cannot be split by size
        return (Source.TARGET,) * num_tokens
    accepted = num_tokens - 1
    return sources_for(num_tokens, k, accepted)


def split_chunk(num_tokens: int, counts: Sequence[StepCount]) -> list[StepCount] | None:
    """The steps one streamed chunk holds, when the counters received with it add up.

    One count per chunk is the usual case; several mean the consumer fell behind and the
    engine merged outputs. None when the counters do not add up to the chunk: then the
    chunk's provenance is a guess.
    """
    producing = [count for count in counts if count.num_tokens > 0]
    if not producing or sum(count.num_tokens for count in producing) != num_tokens:
        return None
    return producing


def reconcile(
    num_accepted_per_step: Sequence[int],
    per_step_accepted: Sequence[int],
) -> bool:
    """True when the accepted counts of the steps that drafted, in order, are the engine's own.

    `per_step_accepted` is vLLM's per-request record (one entry per step that verified
    drafts); a match means every colour shown came from the engine's own count.
    """
    return list(num_accepted_per_step) == list(per_step_accepted)


def _strict_reading(chunks: Sequence[int], accepted: Sequence[int]) -> tuple[int, list[int | None] | None]:
    """The readings of `chunks` with record `accepted` when every drafting chunk has exactly
    accepted + 1 tokens: (how many, up to 2; the earliest one, each chunk's record index).

    A chunk of n != 1 tokens can only be the drafting step of the next record entry with
    n - 1 accepted, so those pair up in order; between two of them the entries with 0
    accepted go to one-token chunks there, any of them: the earliest ones are taken, and
    the reading is unique when the entries fill that gap or there are none. Linear.
    """
    if any(size < 1 for size in chunks):
        return 0, None
    forced = [i for i, size in enumerate(chunks) if size != 1]
    nonzero = [j for j, kept in enumerate(accepted) if kept != 0]
    if len(forced) != len(nonzero) or any(chunks[i] != accepted[j] + 1 for i, j in zip(forced, nonzero)):
        return 0, None
    reading: list[int | None] = [None] * len(chunks)
    ways = 1
    chunk_bounds, record_bounds = [-1, *forced, len(chunks)], [-1, *nonzero, len(accepted)]
    for gap in range(len(chunk_bounds) - 1):
        ones = range(chunk_bounds[gap] + 1, chunk_bounds[gap + 1])
        zeros = range(record_bounds[gap] + 1, record_bounds[gap + 1])
        if len(zeros) > len(ones):
            return 0, None
        if 0 < len(zeros) < len(ones):
            ways = 2
        for i, j in zip(ones, zeros):
            reading[i] = j
        if gap < len(forced):
            reading[forced[gap]] = nonzero[gap]
    return ways, reading


def _reading(chunks: Sequence[int], accepted: Sequence[int]) -> tuple[int, list[int | None] | None]:
    """As _strict_reading, where the last chunk may also hold fewer tokens than its step's
    accepted + 1 (the reply stopped inside it). At most one of the two kinds of reading
    exists: they need different numbers of chunks of n != 1 tokens."""
    ways, reading = _strict_reading(chunks, accepted)
    if reading is None and chunks and accepted and 1 <= chunks[-1] < accepted[-1] + 1:
        ways, head = _strict_reading(chunks[:-1], accepted[:-1])
        reading = None if head is None else [*head, len(accepted) - 1]
    return ways, reading


def rebuild(
    chunk_sizes: Sequence[int],
    per_step_accepted: Sequence[int],
    per_step_drafted: Sequence[int],
) -> list[StepCount] | None:
    """Steps for a whole reply from its chunk sizes and the engine's per-step record.

    The first chunk is prefill. None when no reading exists (the stream merged steps).
    Where a one-token chunk could be either a step that rejected every draft or a step
    with no proposal, the earliest reading is taken (see `is_unambiguous`): the token is
    the target's either way, only which of those chunks is called RECOVERED can differ.
    Linear in the reply's length: a server's record costs no more than its chunks.
    """
    if not chunk_sizes:
        return []
    _, reading = _reading(list(chunk_sizes[1:]), per_step_accepted)
    if reading is None:
        return None
    steps = [StepCount(chunk_sizes[0], 0, 0)]
    for size, j in zip(chunk_sizes[1:], reading):
        steps.append(StepCount(size, 0, 0) if j is None else StepCount(size, per_step_drafted[j], per_step_accepted[j]))
    return steps


def is_unambiguous(chunk_sizes: Sequence[int], per_step_accepted: Sequence[int]) -> bool:
    """True when the record can be laid over the chunks in exactly one way."""
    if not chunk_sizes:
        return True
    ways, _ = _reading(list(chunk_sizes[1:]), per_step_accepted)
    return ways == 1


def counted_step(
    token_ids: Sequence[int],
    text: str,
    count: StepCount | None,
    *,
    k: int,
    temperature: float,
    method: str,
    first: bool,
    seconds: float = 0.0,
) -> Step:
    """A Step for tokens whose provenance comes from counts: the engine's, or a guess from
    the chunk size when `count` is None. Always exact=False: the ids of rejected drafts are
    not known, and the pairing of counts with chunks is inferred."""
    if count is not None:
        sources = sources_for(len(token_ids), count.num_drafted, count.num_accepted)
        drafted = count.num_drafted
        accepted = hidden_accepted(len(token_ids), count.num_drafted, count.num_accepted)
    else:
        sources = guess_sources(len(token_ids), k, first)
        drafted = 0 if first or k == 0 or len(token_ids) > k + 1 else k
        accepted = None
    return Step(
        token_ids=tuple(token_ids),
        sources=sources,
        text=text,
        k=k,
        temperature=temperature,
        verify_seconds=seconds,
        exact=False,
        method=method if drafted else "",
        draft_count=drafted,
        accepted_count=accepted,
    )


def restate(steps: Sequence[Step], counts: Sequence[StepCount]) -> tuple[Step, ...]:
    """Steps with their sources (and drafted counts) taken from `counts`, one per step."""
    from dataclasses import replace

    return tuple(
        replace(
            step,
            sources=sources_for(len(step.token_ids), count.num_drafted, count.num_accepted),
            draft_count=count.num_drafted,
            accepted_count=hidden_accepted(len(step.token_ids), count.num_drafted, count.num_accepted),
        )
        for step, count in zip(steps, counts, strict=True)
    )
