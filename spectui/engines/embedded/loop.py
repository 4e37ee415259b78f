"""The speculative decoding loop: draft, verify, emit one Step, repeat.

k = 0 is the same loop with nothing drafted, so a baseline is measured by the very code
that speculates. k and temperature are read from the live control before every step.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import replace

import torch

from spectui.engines.adaptive import AdaptiveK
from spectui.engines.embedded.detokenize import IncrementalDetokenizer
from spectui.engines.embedded.kv import CachedModel
from spectui.engines.embedded.proposers import Proposer
from spectui.engines.embedded.sampling import Draws, PositionDraws, sample, target_probs
from spectui.engines.embedded.tree import verify_tree
from spectui.engines.embedded.verify import Verdict, verify_copies, verify_greedy, verify_sampled
from spectui.core.events import AutoChoice, Control, Done, GenerationParams, Source, Step


def decode_steps(
    target: CachedModel,
    proposer: Proposer | None,
    prompt_ids: Sequence[int],
    params: GenerationParams,
    control: Control,
    stop_ids: set[int],
    detokenizer: IncrementalDetokenizer,
    chooser: AdaptiveK | None = None,
) -> Iterator[Step | Done]:
    """chooser: adaptive k, used while control.auto is on; it learns from every step (a
    reply's first holds the prompt's prefill, and it is told so)."""
    generator = None  # a draft model's draws, and its rejection rule's
    if params.seed is not None:
        generator = torch.Generator(device=target.device).manual_seed(params.seed)
    draws = PositionDraws(params.seed, target.device)  # the target's own draws
    token_ids = list(prompt_ids)
    num_generated = 0
    started = time.perf_counter()
    first_token_at = 0.0
    # Medusa and EAGLE draft from the target's own features: they ask for them once, and
    # the draft and n-gram paths keep the plain logits call.
    needs_hidden = proposer is not None and getattr(proposer, "needs_hidden", False)
    looks_first = proposer is not None and getattr(proposer, "looks_first", False)
    finished = None
    while True:
        if control.cancelled:
            yield Done("cancelled", tuple(prompt_ids), time.perf_counter() - started, first_token_at)
            return
        k, temperature = control.snapshot()
        adaptive = chooser if chooser is not None and control.auto and proposer is not None else None
        if adaptive is not None and finished is not None:
            adaptive.observe_overhead(time.perf_counter() - finished)
        auto = adaptive.choose(temperature) if adaptive is not None and num_generated > 0 and not looks_first else None
        if auto is not None:
            k = auto.k
        draft_started = time.perf_counter()
        if num_generated == 0 and proposer is not None and (k > 0 or adaptive is not None):
            # The drafter reads the prompt while the target prefills it, as in vLLM: its cost
            # lands in the time to first token instead of the reply's first drafting step.
            proposer.prefill(token_ids)
        # The first token comes from the prefill alone, as in vLLM: nothing to draft from yet.
        if num_generated == 0 or proposer is None:
            k = 0
        room = params.max_tokens - num_generated - 1  # drafts beyond it could never be emitted
        k = min(k, room)

        drafted: list[int] = []
        p_draft = None
        parents = None
        tree_nodes = None
        evidence = None
        if adaptive is not None and looks_first and num_generated > 0:
            # Drafting first costs next to nothing; the evidence then says how many drafts to verify.
            most = min(adaptive.k_max, room)
            proposal = proposer.propose(token_ids, most, temperature, params.top_p, generator) if most > 0 else None
            if proposal is not None and proposal.drafted:
                evidence = proposal.evidence
                auto = adaptive.choose_for(evidence, temperature)
                k = min(auto.k, most)
                drafted, p_draft = proposal.drafted[:k], proposal.p_draft
            else:
                auto = AutoChoice(0, 1.0, adaptive.realised, "nothing to copy: a plain step")
                k = 0
        elif k > 0:
            stop = {}
            if auto is not None and getattr(proposer, "stops_early", False):
                floor = adaptive.confidence_floor(auto)
                if floor:
                    # as far as this reply's slow start allows: a sure draft may run past the plan
                    k = min(max(k, adaptive.ramp), adaptive.k_max, room)
                    auto = replace(auto, k=k, reason=f"{auto.reason}, up to {k} while {floor:.0%} sure")
                    stop = {"stop_below": floor}
            proposal = proposer.propose(token_ids, k, temperature, params.top_p, generator, **stop)
            drafted, p_draft, parents = proposal.drafted, proposal.p_draft, proposal.parents
        verify_started = time.perf_counter()
        if parents is not None:
            tree_nodes = len(drafted)
            # From here on the step reads as a chain: the verified path and its rejected top candidate.
            drafted, verdict, hidden, first_position = verify_tree(
                target, token_ids, drafted, parents, temperature, params.top_p, draws.after(len(token_ids))
            )
        elif needs_hidden:
            target_logits, hidden, first_position = target.logits_and_hidden(
                token_ids + drafted, num_rows=len(drafted) + 1
            )
        else:
            target_logits = target.logits(token_ids + drafted, num_rows=len(drafted) + 1)
        if parents is None:
            verdict = _verify(drafted, p_draft, target_logits, temperature, params.top_p, generator, draws.after(len(token_ids)))
        if needs_hidden:
            # Features of rejected drafts describe a future that did not happen: only the
            # positions up to the last accepted token are handed on.
            num_verified = len(token_ids) + verdict.num_accepted
            proposer.observe_hidden((token_ids + drafted)[:num_verified], first_position, hidden[: num_verified - first_position])
        finished = time.perf_counter()

        accepted = drafted[: verdict.num_accepted]
        emitted = accepted + [verdict.next_token]
        sources = [Source.DRAFT] * len(accepted) + [verdict.next_source]
        finish_reason = None
        accepted_count = None
        for i, token in enumerate(emitted):
            if token in stop_ids:
                emitted, sources, finish_reason = emitted[:i], sources[:i], "stop"
                if i < len(accepted):  # accepted drafts after the stop still count for γ
                    accepted_count = len(accepted)
                break
        if finish_reason is None and num_generated + len(emitted) >= params.max_tokens:
            finish_reason = "length"

        token_ids += emitted
        num_generated += len(emitted)
        if not first_token_at:
            first_token_at = finished - started
        text = detokenizer.add(emitted)
        if finish_reason:
            text += detokenizer.flush()
        step = Step(
            token_ids=tuple(emitted),
            sources=tuple(sources),
            text=text,
            drafted=tuple(drafted),
            k=k,
            temperature=temperature,
            draft_seconds=verify_started - draft_started,
            verify_seconds=finished - verify_started,
            method=proposer.method if drafted else "",
            accepted_count=accepted_count,
            auto=auto,
            tree_nodes=tree_nodes,
        )
        if adaptive is not None:
            adaptive.observe(step, prefill=num_generated == len(emitted), evidence=evidence)
        yield step
        if finish_reason:
            yield Done(finish_reason, tuple(prompt_ids), time.perf_counter() - started, first_token_at)
            return


def _verify(
    drafted: list[int],
    p_draft: torch.Tensor | None,
    target_logits: torch.Tensor,
    temperature: float,
    top_p: float,
    generator: torch.Generator | None,
    draws: Draws,
) -> Verdict:
    if temperature == 0.0:
        return verify_greedy(drafted, target_logits)
    p_target = target_probs(target_logits, temperature, top_p)
    if not drafted:
        return Verdict(0, sample(p_target[0], draws(0)), Source.TARGET)
    if p_draft is None:
        return verify_copies(drafted, p_target, draws)
    return verify_sampled(drafted, p_target, p_draft, generator)
