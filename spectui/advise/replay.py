"""One saved reply replayed for one copy drafter and one k at T = 0, as the loop would run it.

At T = 0 the target keeps a draft exactly while it equals the reply (greedy verify), so a
drafter whose proposal is a function of the token ids (prompt lookup, suffix decoding) replays
exactly from the prompt's and the reply's ids: no model runs. The steps follow
spectui.engines.speculative.loop: the first token comes from the prefill (the drafter reads
the prompt meanwhile); a fixed k drafts min(k, room) every step; auto drafts first and lets
the real spectui.engines.adaptive.AdaptiveK choose how many to verify on the drafts' evidence
(draft_then_choose), shown each step's seconds at the profile's costs.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Protocol

from spectui.advise.costs import CostProfile
from spectui.core.events import NOTHING_TO_COPY, AutoChoice, Source, Step
from spectui.engines.adaptive import K_AUTO_MAX, AdaptiveK
from spectui.engines.speculative.cached_model import common_prefix_len
from spectui.engines.speculative.proposers import Proposer

AUTO = "auto"
CEILING = "ceiling"  # verify exactly the drafts that will be kept: no k does better


@dataclass(frozen=True)
class ReplayInput:
    """What a reply's replay needs: the ids the engine saw and wrote."""

    prompt_ids: tuple[int, ...]
    reply_ids: tuple[int, ...]
    finish_reason: str = "stop"  # "length": the reply used its whole budget, so drafts were capped by it


@dataclass(frozen=True)
class ReplayedStep:
    k: int  # the k in force (auto: what it chose)
    drafted: int  # drafts the target verified
    accepted: int  # drafts kept (within the reply)
    emitted: int  # tokens the step wrote
    seconds: float  # at the profile's costs: drafting, verifying, the loop's overhead

    @property
    def coloured(self) -> int:
        """Emitted tokens that came from drafts (a stop token may end the step inside them)."""
        return min(self.accepted, self.emitted)


@dataclass(frozen=True)
class ReplyTotals:
    """A reply's replayed steps summed as ArmResult sums them (the first, the prefill's, left out
    but counted in `steps_with_first`): what a fixed k's fast replay returns instead of its steps."""

    emitted: int
    steps: int
    drafted: int
    accepted: int
    coloured: int
    seconds: float  # summed step by step in order, as sum() over the steps would
    steps_with_first: int


class DraftsAt(Protocol):
    """A shared proposer's drafts for the context whole[:length] at k, without the Proposal
    (spectui.advise.lookups.SharedLookup, spectui.advise.suffixes.SharedSuffix)."""

    method: str

    def prefill(self, token_ids: Sequence[int]) -> None: ...

    def drafts_at(self, whole: list[int], length: int, k: int) -> Sequence[int]: ...


def replay_fixed(reply: ReplayInput, proposer: DraftsAt | None, k: int, costs: CostProfile,
                 charges: dict[tuple[bool, int, int], float]) -> ReplyTotals:
    """replay_reply at a fixed k (0: plain decoding, no proposer asked), summed: the same steps,
    without a context copied, a Proposal or a ReplayedStep made per step. charges: each (drafted
    at all, drafts, kept)'s seconds, as replayed_step charges it (filled as met; one per profile
    and method)."""
    ids = reply.reply_ids
    if not ids:
        return ReplyTotals(0, 0, 0, 0, 0, 0, 0)
    prompt_length, last = len(reply.prompt_ids), len(ids)
    whole = [*reply.prompt_ids, *ids]
    budget = last if reply.finish_reason == "length" else None
    if k > 0 and proposer is not None:
        proposer.prefill(whole[:prompt_length])
    emitted_sum = steps = drafted_sum = accepted_sum = coloured = 0
    seconds = 0.0
    position = 1
    while position < last:
        step_k = min(k, budget - position - 1 if budget is not None else last + 64)  # replay_reply's room
        drafted = kept = 0
        if step_k > 0 and proposer is not None:
            drafts = proposer.drafts_at(whole, prompt_length + position, step_k)
            drafted = len(drafts)
            at = prompt_length + position
            while kept < drafted and position + kept < last and drafts[kept] == whole[at + kept]:
                kept += 1
        emitted = min(kept + 1, last - position)
        key = (step_k > 0, drafted, kept)
        charge = charges.get(key)
        if charge is None:
            draft_seconds, verify_seconds, _ = step_seconds(costs, drafted, kept, proposer.method if key[0] and proposer else None)
            charge = charges[key] = draft_seconds + verify_seconds + costs.overhead_seconds  # replayed_step's sum, in its order
        seconds += charge
        emitted_sum += emitted
        steps += 1
        drafted_sum += drafted
        accepted_sum += kept
        coloured += min(kept, emitted)
        position += emitted
    return ReplyTotals(emitted_sum, steps, drafted_sum, accepted_sum, coloured, seconds, steps + 1)


def replay_reply(reply: ReplayInput, proposer: Proposer, k: int | str, costs: CostProfile,
                 chooser: AdaptiveK | None = None) -> list[ReplayedStep]:
    """Every step of `reply` under `proposer` at k (an int, CEILING, or AUTO with `chooser`); the first is
    the prefill's plain step (seconds 0: decode speed leaves it out)."""
    ids, prompt = reply.reply_ids, list(reply.prompt_ids)
    whole = prompt + list(ids)  # every step's context is a slice of it
    if not ids:
        return []
    auto = k == AUTO
    if auto and chooser is None:
        raise ValueError("k auto replays with an AdaptiveK")
    budget = len(ids) if reply.finish_reason == "length" else None
    if auto or k == CEILING or (isinstance(k, int) and k > 0):
        proposer.prefill(prompt)
    first = Step((ids[0],), (Source.TARGET,), "", temperature=0.0)
    if chooser is not None and auto:
        chooser.observe(first, prefill=True)
    steps = [ReplayedStep(0, 0, 0, 1, 0.0)]
    position = 1
    while position < len(ids):
        room = budget - position - 1 if budget is not None else len(ids) + 64
        length = len(prompt) + position  # the step's context: whole[:length]
        if auto:
            assert chooser is not None
            chooser.observe_overhead(costs.overhead_seconds)
            step_k, drafted, evidence, choice, looked = draft_then_choose(proposer, chooser, whole, length, room)
        else:
            step_k = min(K_AUTO_MAX if k == CEILING else int(k), room)
            drafted = list(proposer.propose_at(whole, length, step_k).drafted) if step_k > 0 else []
            evidence, choice, looked = None, None, step_k > 0
            if k == CEILING:
                drafted = drafted[:common_prefix_len(drafted, list(ids[position:]))]
        step, seconds = replayed_step(drafted, ids, position, step_k, costs, proposer.method if looked else None)
        if chooser is not None and auto:
            chooser.observe(as_step(step, drafted, seconds, choice, ids, position), evidence=evidence)
        steps.append(step)
        position += step.emitted
    return steps


def draft_then_choose(proposer: Proposer, chooser: AdaptiveK, whole: list[int], length: int,
                      room: int) -> tuple[int, list[int], Hashable | None, AutoChoice, bool]:
    """The loop's draft_then_choose: draft as many as adaptive k could verify, then let the
    evidence say how many (the context: whole[:length]). Returns (k, drafts verified, evidence,
    choice, whether it drafted)."""
    most = min(chooser.k_max, room)
    proposal = proposer.propose_at(whole, length, most) if most > 0 else None
    if proposal is None or not proposal.drafted:
        return 0, [], None, AutoChoice(0, 1.0, chooser.realised, NOTHING_TO_COPY), most > 0
    choice = chooser.choose_for(proposal.evidence, 0.0)
    k = min(choice.k, most)
    return k, list(proposal.drafted[:k]), proposal.evidence, choice, True


def replayed_step(drafted: Sequence[int], ids: Sequence[int], position: int, k: int, costs: CostProfile,
                  drafting: str | None) -> tuple[ReplayedStep, tuple[float, float, int | None]]:
    """The step and its (draft seconds, verify seconds, drafts verified or None for all)."""
    accepted = common_prefix_len(list(drafted), list(ids[position:position + len(drafted)]))
    emitted = min(accepted + 1, len(ids) - position)
    draft_seconds, verify_seconds, verified = step_seconds(costs, len(drafted), accepted, drafting)
    seconds = draft_seconds + verify_seconds + costs.overhead_seconds
    return ReplayedStep(k, len(drafted), accepted, emitted, seconds), (draft_seconds, verify_seconds, verified)


def step_seconds(costs: CostProfile, drafted: int, accepted: int, drafting: str | None) -> tuple[float, float, int | None]:
    """(draft seconds, verify seconds, drafts verified or None for all) of a step at the profile's costs."""
    verify_steps, verified = costs.verify_steps(drafted, accepted)
    return (costs.draft_cost(drafting) if drafting else 0.0), verify_steps * costs.plain_seconds, verified


def as_step(step: ReplayedStep, drafted: Sequence[int], seconds: tuple[float, float, int | None],
            choice: AutoChoice | None, ids: Sequence[int], position: int) -> Step:
    """The Step the loop would have shown adaptive k (its ids, sources, drafts and timings)."""
    emitted = tuple(ids[position:position + step.emitted])
    sources = (Source.DRAFT,) * step.coloured + (Source.TARGET,) * (step.emitted - step.coloured)
    return Step(emitted, sources, "", drafted=tuple(drafted), k=step.k, temperature=0.0,
                draft_seconds=seconds[0], verify_seconds=seconds[1], accepted_count=step.accepted, auto=choice,
                verified_count=seconds[2])
