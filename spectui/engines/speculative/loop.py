"""The speculative decoding loop: propose, verify, emit one Step, repeat.

k = 0 is the same loop with nothing drafted, so a baseline is measured by the very code
that speculates. k and temperature are read from the live control before every step; how
the proposer drafts and how the target verifies are settled before the first.
"""

from __future__ import annotations

import time
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from spectui.core.events import NOTHING_TO_COPY, AutoChoice, Done, Event, FinishReason, GenerationParams, LiveControl, Prefill, Source, Step
from spectui.engines.adaptive import AdaptiveK, chain_reach
from spectui.engines.speculative.arrays import ops_of
from spectui.engines.speculative.cached_model import CachedFeatures, CachedLogits, common_prefix_len
from spectui.engines.speculative.detokenize import IncrementalDetokenizer
from spectui.engines.speculative.proposers import Proposer
from spectui.engines.speculative.sampling import Array, Generator, PositionDraws, sample, target_probs
from spectui.engines.speculative.verify import (
    Verdict, greedy_verdict, verify_copies, verify_greedy, verify_greedy_with_gaps, verify_sampled,
)


@dataclass
class LoopReply:
    """One reply in progress inside the loop: its context, its randomness and its clocks.
    (What the caller records of it is spectui.measure.run's MeasuredReply.)"""

    prompt_ids: tuple[int, ...]
    params: GenerationParams
    token_ids: list[int]
    generator: Generator | None  # a draft model's draws, and its rejection rule's
    draws: PositionDraws  # the target's own draws, keyed by position
    started: float = field(default_factory=time.perf_counter)
    num_generated: int = 0
    first_token_at: float = 0.0
    finished: float = 0.0  # when the last verify ended
    stop_token_id: int | None = None

    @property
    def room(self) -> int:
        """Drafts beyond it could never be emitted."""
        return self.params.max_tokens - self.num_generated - 1

    def done(self, finish_reason: FinishReason) -> Done:
        return Done(finish_reason, self.prompt_ids, time.perf_counter() - self.started, self.first_token_at,
                    stop_token_id=self.stop_token_id)


@dataclass(frozen=True)
class Draft:
    """What one step verifies, and the k and temperature that asked for it."""

    k: int
    temperature: float
    auto: AutoChoice | None = None
    drafted: list[int] = field(default_factory=list)
    p_draft: Array | None = None  # None: point masses (prompt lookup, a tree) or T = 0
    parents: list[int] | None = None  # a draft tree's shape (spectui.engines.speculative.tree)
    evidence: Hashable | None = None
    method: str = ""


@dataclass(frozen=True)
class Checked:
    drafted: list[int]  # a tree step's: the path it took and the first candidate it turned down
    verdict: Verdict
    tree_nodes: int | None = None  # drafted nodes a tree step verified
    margins: tuple[float, ...] = ()  # T = 0: each emitted row's top-two logit gap
    verified: int | None = None  # drafts the target ran rows for, when a piecewise verify stopped early


def decode_steps(
    target: CachedLogits,
    proposer: Proposer | None,
    prompt_ids: Sequence[int],
    params: GenerationParams,
    control: LiveControl,
    stop_ids: set[int],
    detokenizer: IncrementalDetokenizer,
    chooser: AdaptiveK | None = None,
) -> Iterator[Event]:
    """chooser: adaptive k, used while control.auto is on; it learns from every step (a
    reply's first holds the prompt's prefill, and it is told so)."""
    # Settled once: how the proposer drafts, and whether the target hands it its features.
    propose = no_drafts if proposer is None else partial(propose_step, proposer)
    if proposer is not None and proposer.needs_hidden:
        if not isinstance(target, CachedFeatures):  # heads read a torch model's hidden states
            raise TypeError(f"{type(proposer).__name__} needs the target's hidden states: {type(target).__name__} has none")
        verify = partial(verify_feeding, target, proposer)
    else:
        verify = partial(verify_chain, target)
    looks_first = proposer is not None and proposer.looks_first
    reply = start_reply(prompt_ids, params, target.device, target.arrays)
    yield from prefill_in_chunks(target, prompt_ids, control)
    while not control.cancelled:
        adaptive = chooser if chooser is not None and control.auto and proposer is not None else None
        if adaptive is not None and reply.finished:
            adaptive.observe_overhead(time.perf_counter() - reply.finished)
        plan = plan_step(reply, control, adaptive, looks_first)
        draft_started = time.perf_counter()
        draft = propose(reply, plan, adaptive)
        verify_started = time.perf_counter()
        checked = verify(reply, draft)
        reply.finished = time.perf_counter()
        seconds = (verify_started - draft_started, reply.finished - verify_started)
        step, finish_reason = emit(reply, draft, checked, seconds, stop_ids, detokenizer)
        if adaptive is not None:
            adaptive.observe(step, prefill=reply.num_generated == len(step.token_ids), evidence=draft.evidence)
        yield step
        if finish_reason:
            yield reply.done(finish_reason)
            return
    yield reply.done("cancelled")


def prefill_in_chunks(target: CachedLogits, prompt_ids: Sequence[int], control: LiveControl) -> Iterator[Prefill]:
    """A prompt longer than the target's prefill_chunk goes into its cache a chunk at a time,
    its progress said and a cancel heard between chunks, or inside one where the target can stop
    a forward midway (an 8k-token paste is minutes on a CPU). Chunk ends sit at multiples of the
    chunk from the cached prefix on, the same for every k; the last chunk runs in the first
    step, as a short prompt does whole."""
    # A target may choose per prompt (ggml: a long prompt into an empty cache goes in llama.cpp's
    # own batches, ggml.fast_prefill); otherwise its one chunk.
    choose: Any = getattr(target, "prefill_chunk_for", None)
    chunk: int | None = choose(prompt_ids) if choose is not None else target.prefill_chunk
    cached = common_prefix_len(target.seen, prompt_ids)
    total = len(prompt_ids) - cached
    if not chunk or total <= chunk:
        return
    yield Prefill(0, total)
    for end in range(cached + chunk, len(prompt_ids), chunk):
        if control.cancelled or not target.prefill(prompt_ids[:end], stop=lambda: control.cancelled):
            return
        yield Prefill(end - cached, total)


def start_reply(prompt_ids: Sequence[int], params: GenerationParams, device: Any, arrays: str = "torch") -> LoopReply:
    """arrays: the kind of rows the target returns ("numpy" on ggml), so of the draws too."""
    draws = PositionDraws(params.seed, device, arrays)
    generator = draws.ops.generator(params.seed, device) if params.seed is not None else None
    return LoopReply(tuple(prompt_ids), params, list(prompt_ids), generator, draws)


def plan_step(reply: LoopReply, control: LiveControl, adaptive: AdaptiveK | None, looks_first: bool) -> Draft:
    """The step's k: the control's, or adaptive k's choice (a proposer that looks first is
    told its k after drafting)."""
    k, temperature = control.snapshot()
    auto = None
    if adaptive is not None and reply.num_generated > 0 and not looks_first:
        auto = adaptive.choose(temperature)
        k = auto.k
    return Draft(min(k, reply.room), temperature, auto)


def no_drafts(reply: LoopReply, plan: Draft, adaptive: AdaptiveK | None) -> Draft:
    return replace(plan, k=0)


def propose_step(proposer: Proposer, reply: LoopReply, plan: Draft, adaptive: AdaptiveK | None) -> Draft:
    if reply.num_generated == 0:
        # The first token comes from the prefill alone, as in vLLM. The drafter reads the prompt
        # meanwhile: its cost lands in the time to first token, not in the first drafting step.
        if plan.k > 0 or adaptive is not None:
            proposer.prefill(reply.token_ids)
        return replace(plan, k=0)
    if adaptive is not None and proposer.looks_first:
        return draft_then_choose(proposer, reply, plan, adaptive)
    if plan.k == 0:
        return plan
    stop = {}
    if plan.auto is not None and adaptive is not None and proposer.stops_early:
        plan, stop = with_confidence_floor(plan, adaptive, reply.room)
    proposal = proposer.propose(reply.token_ids, plan.k, plan.temperature, reply.params.top_p, reply.generator, **stop)
    return replace(plan, drafted=proposal.drafted, p_draft=proposal.p_draft, parents=proposal.parents,
                   method=proposer.method)


def draft_then_choose(proposer: Proposer, reply: LoopReply, plan: Draft, adaptive: AdaptiveK) -> Draft:
    """Drafting costs next to nothing: draft as many as adaptive k could verify, then let the
    drafts' evidence say how many to verify."""
    most = min(adaptive.k_max, reply.room)
    proposal = proposer.propose(reply.token_ids, most, plan.temperature, reply.params.top_p, reply.generator) if most > 0 else None
    if proposal is None or not proposal.drafted:
        return replace(plan, k=0, auto=AutoChoice(0, 1.0, adaptive.realised, NOTHING_TO_COPY))
    auto = adaptive.choose_for(proposal.evidence, plan.temperature)
    k = min(auto.k, most)
    return replace(plan, k=k, auto=auto, drafted=proposal.drafted[:k], p_draft=proposal.p_draft,
                   evidence=proposal.evidence, method=proposer.method)


def with_confidence_floor(plan: Draft, adaptive: AdaptiveK, room: int) -> tuple[Draft, dict]:
    """For a proposer that stops early: the chain runs while the draft is sure enough, past the
    planned k as far as this reply's slow start allows where drafting is predicted to pay."""
    choice = plan.auto
    floor = adaptive.confidence_floor(choice) if choice is not None else None
    if choice is None or not floor:
        return plan, {}
    k = min(chain_reach(adaptive, choice, plan.k), room)
    auto = replace(choice, k=k, reason=f"{choice.reason}, up to {k} while {floor:.0%} sure")
    return replace(plan, k=k, auto=auto), {"stop_below": floor}


def verify_chain(target: CachedLogits, reply: LoopReply, draft: Draft) -> Checked:
    width = target.exact_rows
    gaps: list[float] = []
    if draft.temperature == 0.0 and width is not None and len(draft.drafted) >= width:
        verdict, logits, gaps = verify_greedy_in_pieces(target, reply.token_ids, draft.drafted, width)
    else:
        logits = target.logits(reply.token_ids + draft.drafted, num_rows=len(draft.drafted) + 1)
        if draft.temperature == 0.0:
            verdict, gaps = verify_greedy_with_gaps(draft.drafted, logits)
        else:
            verdict = verify_rule(reply, draft, logits)
    # T = 0: how near a tie each emitted row was (the compare view's report of a divergence)
    margins = tuple(gaps[: verdict.num_accepted + 1])
    verified = len(logits) - 1 if len(logits) <= len(draft.drafted) else None
    return Checked(draft.drafted, verdict, margins=margins, verified=verified)


def verify_greedy_in_pieces(target: CachedLogits, token_ids: list[int], drafted: list[int],
                            width: int) -> tuple[Verdict, Array, list[float]]:
    """A T = 0 verify wider than the target computes exactly, a piece of `width` rows at a time:
    the pieces after the first rejected draft are never run (the verdict is the one the whole
    verify gives). Returns it with the rows that were run and their top-two gaps."""
    rows: list = []
    predicted: list[int] = []
    gaps: list[float] = []
    for start in range(0, len(drafted) + 1, width):
        end = min(start + width, len(drafted) + 1)
        piece = target.logits(token_ids + drafted[:end - 1], num_rows=end - start)  # row i checks drafted[i]
        rows.extend(piece)
        piece_ids, piece_gaps = ops_of(piece).greedy_rows(piece)
        predicted.extend(piece_ids)
        gaps.extend(piece_gaps)
        verdict = greedy_verdict(drafted, predicted)
        if verdict is not None:
            return verdict, ops_of(piece).stack(rows), gaps
    raise AssertionError("the last piece holds the row after every draft: it always decides")


def verify_feeding(target: CachedFeatures, proposer: Proposer, reply: LoopReply, draft: Draft) -> Checked:
    """Verify a chain or a tree and hand the proposer the target's features, for a proposer
    that drafts from them (Medusa, EAGLE: torch only, a CachedFeatures)."""
    from spectui.engines.speculative.tree import verify_tree

    token_ids = reply.token_ids
    if draft.parents is not None:
        drafted, verdict, hidden, first_position = verify_tree(
            target, token_ids, draft.drafted, draft.parents, draft.temperature, reply.params.top_p,
            reply.draws.after(len(token_ids)),
        )
        checked = Checked(drafted, verdict, tree_nodes=len(draft.drafted))
    else:
        logits, hidden, first_position = target.logits_and_hidden(token_ids + draft.drafted, num_rows=len(draft.drafted) + 1)
        checked = Checked(draft.drafted, verify_rule(reply, draft, logits))
    # Features of rejected drafts describe a future that did not happen: only the positions
    # up to the last accepted token are handed on.
    num_verified = len(token_ids) + checked.verdict.num_accepted
    proposer.observe_hidden((token_ids + checked.drafted)[:num_verified], first_position,
                            hidden[: num_verified - first_position])
    return checked


def verify_rule(reply: LoopReply, draft: Draft, target_logits: Array) -> Verdict:
    """Greedy at T = 0; at T > 0 the rejection rule for the draft's kind."""
    if draft.temperature == 0.0:
        return verify_greedy(draft.drafted, target_logits)
    draws = reply.draws.after(len(reply.token_ids))
    p_target = target_probs(target_logits, draft.temperature, reply.params.top_p)
    if not draft.drafted:
        return Verdict(0, sample(p_target[0], draws(0)), Source.TARGET)
    if draft.p_draft is None:
        return verify_copies(draft.drafted, p_target, draws)
    return verify_sampled(draft.drafted, p_target, draft.p_draft, reply.generator)


def emit(
    reply: LoopReply,
    draft: Draft,
    checked: Checked,
    seconds: tuple[float, float],
    stop_ids: set[int],
    detokenizer: IncrementalDetokenizer,
) -> tuple[Step, FinishReason | None]:
    """The step's tokens up to and including a stop token, and why the reply ends, if it does.
    seconds: (drafting, verifying)."""
    accepted = checked.drafted[: checked.verdict.num_accepted]
    emitted = accepted + [checked.verdict.next_token]
    sources = [Source.DRAFT] * len(accepted) + [checked.verdict.next_source]
    stop_at = next((i for i, token in enumerate(emitted) if token in stop_ids), None)
    finish_reason = None
    if stop_at is not None:
        emitted, sources, finish_reason = emitted[: stop_at + 1], sources[: stop_at + 1], "stop"
        reply.stop_token_id = emitted[-1]
    elif reply.num_generated + len(emitted) >= reply.params.max_tokens:
        finish_reason = "length"
    reply.token_ids += emitted
    reply.num_generated += len(emitted)
    reply.first_token_at = reply.first_token_at or reply.finished - reply.started
    text = detokenizer.add(emitted) + (detokenizer.flush() if finish_reason else "")
    step = Step(
        token_ids=tuple(emitted),
        sources=tuple(sources),
        text=text,
        drafted=tuple(checked.drafted),
        k=draft.k,
        temperature=draft.temperature,
        draft_seconds=seconds[0],
        verify_seconds=seconds[1],
        method=draft.method if checked.drafted else "",
        # Accepted drafts after the stop token were not emitted; the target accepted them all the same.
        accepted_count=len(accepted) if stop_at is not None and stop_at + 1 < len(accepted) else None,
        auto=draft.auto,
        tree_nodes=checked.tree_nodes,
        margins=checked.margins[: len(emitted)],
        verified_count=checked.verified,
    )
    return step, finish_reason
