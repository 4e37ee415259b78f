"""Adaptive k: before every step, the k expected to give the most tokens per second.

Measured as the reply runs: accept[i], the chance draft i is accepted once the ones before it
were; d, the draft's seconds per token; V(k), the verify's seconds; o, each step's overhead.
The choice maximises E(k) / (k·d + V(k) + o) with E(k) = 1 + Σ_j Π_{i<j} accept[i]
(Leviathan's speedup with a per-position α), and k = 0 when no k pays. At k = 0 an
occasional one-draft probe looks whether acceptance came back. A proposer that drafts for
free and knows its odds first (prompt lookup) drafts, then verifies as many as its evidence
says. docs/adaptive-k.md tells how the rules and numbers below were found. Stdlib only.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from functools import cached_property, lru_cache

from spectui.core.events import AutoChoice, Step

K_AUTO_MAX = 8  # past 8 drafts the product of acceptances rarely pays for the tail's cost
START_K = 4  # before anything is measured, for drafts already in hand (prompt lookup)
# ...and for a draft model, which pays a forward per draft: one draft measures d and V(1) as
# well as four, and where the draft cannot pay (a 135M draft for a 1.5B on 2 cores) the first
# step is the only one that loses.
MEASURE_K = 1
PRIOR_ACCEPT = 0.6
PRIOR_VERIFY_SLOPE = 0.05  # V(k)/V(0) - 1 per drafted token before two ks are measured
# What a slope the engine timed at load counts for in V(k)'s line, in squared drafts about their
# mean: one noisy verify among a window of plain steps (~2) cannot outvote it, a few replies
# drafting at several k (~50) do.
PRIOR_SPREAD = 4.0
ACCEPT_WEIGHT = 0.15  # weight of the newest observation: about the last dozen steps count
# What a new reply keeps of the last one's estimates, in steps: a new prompt may be other text.
FRESH_OBSERVATIONS = 2
# Slow start: a reply's first drafting step drafts at most 2, each fully accepted step raises
# the cap by its drafts (a draft model only: for prompt lookup a refused draft costs little).
RAMP_START = 2
COST_WEIGHT = 0.2
VERIFY_WINDOW = 24  # verify forwards the V(k) line is fitted to: a couple of replies' worth
# Untried positions follow the last tried one quickly, or a stale low estimate holds k down.
DRIFT_WEIGHT = 0.3
# Plain steps before the first probe, and the longest wait (a draft model's probe also reads
# the tokens it sat out).
PROBE_AFTER = 24
PROBE_AFTER_MAX = 48
CHEAP_PROBE = 0.15  # a probe's cost over a plain step, in plain steps, below which it is cheap
CHEAP_PROBE_AFTER = 4
CHEAP_PROBE_AFTER_MAX = 8
# What looking again at a declined evidence class may cost, in plain steps per step: a one-draft
# verify costs ~0.6 of a step on ggml, ~0.05 on torch int8 (docs/adaptive-k.md).
EVIDENCE_PROBE_SHARE = 0.03
FLOOR_MAX = 0.95  # the confidence floor stays below 1: a sure draft may always go on
SWITCH_MARGIN = 0.02  # keep the current k unless another is predicted 2% faster: no flapping
# A draft model starts drafting only when predicted this much faster than plain decoding, or by
# its catch-up per step sat out where that is more (AdaptiveK.start_margin).
DRAFT_MARGIN = 0.05
# ...and stops after this many steps in a row predict it slower (one refusal is not enough).
LEAVE_AFTER = 2
# An accepted probe is followed by another at once only if this many more accepted in a row
# could make drafting pay: else each probe of the streak is a step dearer than a plain one.
PROBE_REACH = 3


def moving(old: float | None, new: float, weight: float) -> float:
    return new if old is None else old + weight * (new - old)


def filled(accept: list[float | None]) -> list[float]:
    """Every position's estimate; one never tried takes the last measured one before it."""
    out, last = [], PRIOR_ACCEPT
    for value in accept:
        last = value if value is not None else last
        out.append(last)
    return out


def expected_tokens(accept: list[float], k: int) -> float:
    """E(k) with per-position acceptance: 1 + sum_j prod_{i<j} accept[i]."""
    total, reach = 1.0, 1.0
    for i in range(k):
        reach *= accept[i]
        total += reach
    return total


def learn_acceptance(accept: list, seen: list[int], accepted: int, drafted: int, k_max: int, copies: bool) -> None:
    """One step's drafts into the per-position acceptance estimates (in place).

    Position i was tried only if every draft before it was accepted; a position tried for the
    first time starts from what the model assumed for it. Positions past the last one tried drift
    back towards it, so one refusal does not hold them down for ever; a copy's (copies: the drafts
    came with evidence) later positions move only up, after a copy that ran to its end (a copy
    refused at its first token says nothing of the rest)."""
    tried = min(drafted, accepted + 1, k_max)
    assumed = filled(accept)
    for i in range(tried):
        previous = accept[i] if accept[i] is not None else assumed[i]
        weight = max(ACCEPT_WEIGHT, 1 / (seen[i] + 2))
        accept[i] = moving(previous, 1.0 if i < accepted else 0.0, weight)
        seen[i] += 1
    last = accept[tried - 1]
    ran_out = accepted == drafted
    for i in range(tried, k_max):
        if accept[i] is not None and (not copies or (ran_out and accept[i] < last)):
            accept[i] = moving(accept[i], last, DRIFT_WEIGHT)


def verify_line(points: Sequence[tuple[int, float]], prior_slope: float, k: int, prior_spread: float = 0.0) -> float:
    """V(k) in seconds: the least-squares line through the last verify forwards (a line, not a
    table per k: a k left behind keeps no stale figure); one k so far: the prior's slope."""
    return VerifyLine.fit(points, prior_slope, prior_spread).at(k)


@dataclass(frozen=True)
class VerifyLine:
    """verify_line's fit, kept so that V(k) at many k fits the points once (a chooser asks ~50 a step)."""

    mean_k: float
    mean_v: float
    slope: float  # the fitted slope (<= 0: flat at mean_v)
    plain: float | None  # one k so far: V(0) along the prior's slope

    @staticmethod
    def fit(points: Sequence[tuple[int, float]], prior_slope: float, prior_spread: float = 0.0) -> VerifyLine:
        # a step fits the same points twice (observe, then the next choice's Costs)
        return _fit(tuple(points), prior_slope, prior_spread)

    @staticmethod
    def fitted(points: Sequence[tuple[int, float]], prior_slope: float, prior_spread: float = 0.0) -> VerifyLine:
        """Least squares, the prior's slope weighing as prior_spread (0: only before two ks)."""
        mean_k = sum(n for n, _ in points) / len(points)
        mean_v = sum(v for _, v in points) / len(points)
        spread = sum((n - mean_k) ** 2 for n, _ in points)
        prior_plain = mean_v / (1 + prior_slope * mean_k)
        if not spread:
            return VerifyLine(mean_k, mean_v, prior_slope, prior_plain)
        moment = sum((n - mean_k) * (v - mean_v) for n, v in points)
        slope = (moment + prior_spread * prior_slope * prior_plain) / (spread + prior_spread)
        return VerifyLine(mean_k, mean_v, slope, None)

    def at(self, k: int) -> float:
        if self.plain is not None:
            return self.plain * (1 + self.slope * k)
        if self.slope <= 0:  # noise: a bigger verify is never cheaper
            return self.mean_v
        return max(1e-9, self.mean_v + self.slope * (k - self.mean_k))


@lru_cache(maxsize=16)
def _fit(points: tuple[tuple[int, float], ...], prior_slope: float, prior_spread: float) -> VerifyLine:
    return VerifyLine.fitted(points, prior_slope, prior_spread)


@dataclass(frozen=True)
class Costs:
    """What the predictions rest on, once each part is measured: d, the draft's seconds per
    token; the verify forwards V(k) is fitted to; o, each step's overhead."""

    draft: float
    verify_points: tuple[tuple[int, float], ...]
    prior_slope: float
    overhead: float
    piece: int | None = None  # rows a verify runs at a time, stopping at its first rejection
    # a step that asked for drafts and got none: the draft's seconds all the same (SLEM, whose
    # text held no whole target token); what the 1 - offered steps pay besides a plain step
    empty: float = 0.0
    catch_up: float | None = None  # a draft model's catch-up seconds per token it sat out, as measured
    prior_spread: float = 0.0  # what prior_slope weighs in the line (PRIOR_SPREAD where the engine timed it)

    @cached_property
    def line(self) -> VerifyLine:
        return VerifyLine.fit(self.verify_points, self.prior_slope, self.prior_spread)

    def verify(self, k: int) -> float:
        return self.line.at(k)

    def expected_verify(self, k: int, accept: list[float]) -> float:
        """V(k) where the verify runs in pieces: a piece is paid only when every draft before
        it was kept (row i checks draft i; the last row is the bonus's)."""
        return self._expected_verify(k, accept, [self.verify(j) for j in range(k + 1)])

    def step(self, working: float) -> float:
        """A step's wall time: its drafting and verifying plus the overhead every step pays."""
        return working + self.overhead

    def probe(self) -> float:
        """A probe's cost over a plain step, in plain steps."""
        plain = self.verify(0)
        return (self.draft + self.verify(1) - plain) / self.step(plain)

    def draft_ratio(self) -> float:
        return self.draft / self.verify(0)

    def leaving(self, wait: int) -> float:
        """What stopping a draft model costs per step, in plain steps: coming back, at the
        first probe after `wait` plain steps, it reads all their tokens in one forward: as
        measured, else guessed as the target's verify line scales (on ggml that line is the
        target's pieces, 0.7 of a step a row on a 1.5B: a small draft reads 24 tokens for far less)."""
        plain = self.verify(0)
        if self.catch_up is not None:
            return self.catch_up / self.step(plain)
        return self.draft * self.verify(wait) / plain / (wait * self.step(plain))

    def ceiling(self, k_max: int) -> float:
        """The best any k > 0 could do over plain decoding, with every draft accepted: below 1
        the costs alone rule drafting out, and no acceptance measured can change that."""
        sure = [1.0] * k_max
        return max(self.rate(k, sure, 1.0) for k in range(1, k_max + 1)) / self.rate(0, sure, 1.0)

    def rates(self, k_max: int, accept: list[float], offered: float) -> dict[int, float]:
        """rate(k, accept, offered) at every k from 0 to k_max, V(k) read once per k."""
        verify = [self.verify(k) for k in range(k_max + 1)]
        rates = {}
        for k in range(k_max + 1):
            tokens = offered * expected_tokens(accept, k) + (1 - offered)
            seconds = offered * (k * self.draft + self._expected_verify(k, accept, verify)) + (1 - offered) * (
                verify[0] + (self.empty if k else 0.0))
            rates[k] = tokens / self.step(seconds)
        return rates

    def _expected_verify(self, k: int, accept: list[float], verify: list[float]) -> float:
        """expected_verify(k, accept) with V(j) = verify[j]."""
        if self.piece is None or k < self.piece:
            return verify[k]
        total, reach = 0.0, 1.0
        for start in range(0, k + 1, self.piece):
            end = min(start + self.piece, k + 1)
            total += reach * (verify[end - 1] - (verify[start - 1] if start else 0.0))
            for i in range(start, min(end, k)):
                reach *= accept[i]
        return total

    def rate(self, k: int, accept: list[float], offered: float) -> float:
        """Predicted tokens per second at k; offered: the chance drafts come at all."""
        tokens = offered * expected_tokens(accept, k) + (1 - offered)
        seconds = offered * (k * self.draft + self.expected_verify(k, accept)) + (1 - offered) * (
            self.verify(0) + (self.empty if k else 0.0))
        return tokens / self.step(seconds)


@dataclass
class AdaptiveK:
    k_max: int = K_AUTO_MAX
    accept: list[float | None] = field(default_factory=list)  # [] : every position at the prior
    seen: list[int] = field(default_factory=list)  # observations per position, for the first ones' weight
    draft_seconds: float | None = None  # per drafted token
    # the last verify forwards, (drafts they held, seconds): V(k) is the line through them
    verify_points: deque[tuple[int, float]] = field(default_factory=deque)
    overhead_seconds: float | None = None  # per step, outside drafting and verifying
    empty_seconds: float = 0.0  # drafting time of a step that asked for drafts and got none
    catch_up_seconds: float | None = None  # per token a draft model sat out, read on its return
    missed_tokens: int = 0  # tokens since the draft model last ran
    current_k: int = START_K
    plain_steps: int = 0
    probe_after: int = PROBE_AFTER
    realised: float | None = None  # moving tokens/s over the plain rate
    # how often asking for drafts gets any (a draft model: 1; prompt lookup: where the text repeats)
    proposal_rate: float | None = None
    probing: bool = False
    leave_votes: int = 0  # drafting steps in a row that predicted plain decoding faster
    drafted_last_step: bool = False
    ramp: int = K_AUTO_MAX  # the largest k this reply has earned (slow start)
    new_reply: bool = False  # no step of this reply chose yet: the draft has just read the prompt
    temperature: float = 0.0  # what `accept` and `seen` describe: each temperature has its own
    # V(k)/V(0) - 1 per drafted token until two ks are measured: the engine's own (ggml probes it), or a guess
    prior_verify_slope: float = PRIOR_VERIFY_SLOPE
    prior_spread: float = 0.0  # its weight once two ks are measured: PRIOR_SPREAD where the engine timed it, else none
    verify_piece: int | None = None  # rows a T = 0 verify runs at a time, to its first rejection (Costs.piece)

    def __post_init__(self) -> None:
        fresh_accept, fresh_seen = self._fresh_table()
        self.accept = self.accept or fresh_accept
        self.seen = self.seen or fresh_seen
        self.verify_points = deque(self.verify_points, maxlen=VERIFY_WINDOW)
        # per (evidence, temperature), for choose_for: (accept, seen) as above, and the k = 0
        # choices since the last probe. Sampling accepts a copied token only as often as the
        # target would pick it: a 4-token match in math at T 0.7 is not one at T 0.
        self.by_evidence: dict[tuple[Hashable, float], tuple[list[float | None], list[int]]] = {}
        self.declined: dict[tuple[Hashable, float], int] = {}
        self.other_temperatures: dict[float, tuple[list[float | None], list[int]]] = {}

    def at_temperature(self, temperature: float) -> None:
        """Make `accept` and `seen` those of this temperature (new ones start from the prior):
        a sampled token matches the draft less often than the target's top choice."""
        if temperature == self.temperature:
            return
        self.other_temperatures[self.temperature] = (self.accept, self.seen)
        self.accept, self.seen = self.other_temperatures.pop(temperature, None) or self._fresh_table()
        self.temperature = temperature
        # the k in force was chosen on the other temperature's estimates: this one starts anew
        self.current_k, self.leave_votes = 0, 0

    def _fresh_table(self) -> tuple[list[float | None], list[int]]:
        """(accept, seen) before anything was observed: every position at the prior."""
        return [None] * self.k_max, [0] * self.k_max

    def _tables(self, evidence: Hashable | None, temperature: float) -> tuple[list[float | None], list[int]]:
        if evidence is None:
            return self.accept, self.seen
        key = (evidence, temperature)
        if key not in self.by_evidence:
            self.by_evidence[key] = self._fresh_table()
        return self.by_evidence[key]

    # learning

    def observe(self, step: Step, prefill: bool = False, evidence: Hashable | None = None) -> None:
        """Learn from one finished step; a reply's first (prefill=True) only resets the draft's state.

        evidence: what choose_for was told for this step's drafts."""
        drafted = step.num_drafted
        steady = self.drafted_last_step
        self.drafted_last_step = bool(drafted) and not prefill
        if prefill:
            # A new prompt is new text: what was learned is a prior its first steps correct
            # quickly, and k climbs to it only as this reply's drafts are accepted.
            tables = [*self.by_evidence.values(), *self.other_temperatures.values()]
            for seen in [self.seen, *(seen for _, seen in tables)]:
                seen[:] = [min(count, FRESH_OBSERVATIONS) for count in seen]
            self.ramp = RAMP_START
            self.new_reply = True
            # the draft read the prompt: its next drafts' time is d, no catch-up
            self.drafted_last_step, self.missed_tokens = True, 0
            # The reply's first drafting step may probe: the draft model read the prompt with
            # the target (decode_steps), so a probe costs one drafted token, no catch-up.
            self.probe_after = self.probe_wait()[0]
            self.plain_steps = self.probe_after
            return
        if evidence is None:
            self.at_temperature(step.temperature)
        observe_costs(self, step, steady, evidence)
        if drafted:
            accept, seen = self._tables(evidence, step.temperature)
            learn_acceptance(accept, seen, step.num_accepted, drafted, self.k_max, copies=evidence is not None)
            ran_out = step.num_accepted == drafted
            if ran_out:
                # one more per accepted draft, also for steps the floor stopped short (RAMP_START)
                self.ramp = min(self.k_max, self.ramp + drafted)
            if self.probing and step.num_accepted and within_reach(self):
                # acceptance may be back: look again at once, until the estimate says draft
                self.probe_after = 0
            self.probing = False
            self.plain_steps = 0
        elif self.probing and step.k and step.draft_seconds < CHEAP_PROBE * step.verify_seconds:
            # Prompt lookup found no match (free; a draft model that ran and wrote no target token
            # paid its forwards: it waits as after any probe): nothing learned, look again next step.
            self.plain_steps = self.probe_after
        else:
            self.plain_steps += 1

    def observe_overhead(self, seconds: float) -> None:
        """The time between one step's end and the next one's start."""
        self.overhead_seconds = moving(self.overhead_seconds, seconds, COST_WEIGHT)

    # the model

    def acceptance(self) -> list[float]:
        return filled(self.accept)

    def costs(self, temperature: float | None = None) -> Costs | None:
        """The measured costs, or None while some part is still unmeasured."""
        if not self.verify_points or self.draft_seconds is None:
            return None
        piece = self.verify_piece if (self.temperature if temperature is None else temperature) == 0.0 else None
        return Costs(self.draft_seconds, tuple(self.verify_points), self.prior_verify_slope, self.overhead_seconds or 0.0, piece,
                     self.empty_seconds, self.catch_up_seconds, self.prior_spread)

    def probe_cost(self) -> float | None:
        """A probe's cost over a plain step, in plain steps (None until both are measured)."""
        costs = self.costs()
        return None if costs is None else costs.probe()

    def cheap_probe(self) -> bool:
        cost = self.probe_cost()
        return cost is not None and cost < CHEAP_PROBE

    def leaving_cost(self, costs: Costs) -> float:
        return costs.leaving(self.probe_wait()[0])

    def start_margin(self, costs: Costs) -> float:
        """How much faster than plain decoding drafting must be predicted to start from k = 0: a
        cheap probe's SWITCH_MARGIN; a draft model's DRAFT_MARGIN, or its catch-up per step sat out
        where that is more: coming back, it must win back reading those steps in as many again."""
        return SWITCH_MARGIN if self.cheap_probe() else max(DRAFT_MARGIN, self.leaving_cost(costs))

    def probe_wait(self) -> tuple[int, int]:
        """Plain steps before the first probe, and the longest wait refusals lead to."""
        return (CHEAP_PROBE_AFTER, CHEAP_PROBE_AFTER_MAX) if self.cheap_probe() else (PROBE_AFTER, PROBE_AFTER_MAX)

    def rates(self, costs: Costs, accept: list[float], offered: float | None = None) -> dict[int, float]:
        """Predicted tokens per second at every k; offered: the chance drafts come at all
        (default: as measured)."""
        if offered is None:
            offered = 1.0 if self.proposal_rate is None else self.proposal_rate
        return costs.rates(self.k_max, accept, offered)

    def choose(self, temperature: float | None = None) -> AutoChoice:
        if temperature is not None:
            self.at_temperature(temperature)
        accept = self.acceptance()
        costs = self.costs()
        every_rate = {} if costs is None else self.rates(costs, accept)
        if costs is None or not every_rate[0]:
            self.new_reply = False  # this step is the reply's first look
            return self._measuring(MEASURE_K)
        cheap = self.cheap_probe()
        # from k = 0 drafting starts only past start_margin: below it even a sure draft never
        # would, and a probe, with its catch-up, would only lose
        start = self.start_margin(costs)
        needed = 1 + (SWITCH_MARGIN if self.current_k else start)
        ceiling = costs.ceiling(self.k_max)
        if ceiling < needed:
            return stepping_aside(self, costs, every_rate, ceiling, needed)
        self.new_reply = False
        # slow start guards against drafts that cost real time; a refused cheap one costs little
        cap = self.k_max if cheap else self.ramp
        rates = {k: rate for k, rate in every_rate.items() if k <= cap}
        best = max(rates, key=lambda k: rates[k])
        if self.current_k in rates and rates[best] < rates[self.current_k] * (1 + SWITCH_MARGIN):
            best = self.current_k
        if cheap:
            best = best if rates[best] >= rates[0] * (1 + SWITCH_MARGIN) else 0
        elif self.current_k:
            drafting = max((k for k in rates if k), key=lambda k: rates[k])
            # once left, a draft that could not start again is not probed: leaving costs no catch-up
            leaving = self.leaving_cost(costs) if ceiling >= 1 + start else 0.0
            self.leave_votes = self.leave_votes + 1 if rates[drafting] < rates[0] * (1 - leaving) else 0
            best = 0 if self.leave_votes >= LEAVE_AFTER else best or drafting
        elif best and rates[best] < rates[0] * (1 + start):
            best = 0
        if best and not self.current_k:
            self.leave_votes = 0
        plain_rate = rates[0]
        why = f"α {accept[0]:.2f}, draft {costs.draft_ratio():.2f}× target"
        if best == 0 and self.plain_steps >= self.probe_after:
            # a cheap look: one drafted token tells whether acceptance came back
            first_wait, longest_wait = self.probe_wait()
            self.probe_after = min(longest_wait, max(first_wait, self.probe_after * 2))
            self.plain_steps = 0
            self.probing = True
            self.current_k = 0
            return AutoChoice(1, rates[1] / plain_rate, self.realised, f"{why} → probe k 1")
        self.current_k = best
        held = ""
        if best and max(every_rate, key=lambda k: every_rate[k]) > cap:
            held = " (slow start)"
        elif best and rates[best] < plain_rate:
            held = " (stopping costs a catch-up)"  # drafting at a predicted loss: the leaving rule
        return AutoChoice(best, rates[best] / plain_rate, self.realised, f"{why} → k {best}{held}")

    def _measuring(self, k: int = START_K) -> AutoChoice:
        """A step that drafts k to measure what drafting costs; never k = 0, which measures nothing."""
        return AutoChoice(k, None, self.realised, f"measuring: k {k} until the costs are known")

    def confidence_floor(self, choice: AutoChoice) -> float:
        """Where a draft model that can stop mid-step stops (stopping_floor)."""
        return stopping_floor(self, choice)

    def choose_for(self, evidence: Hashable, temperature: float) -> AutoChoice:
        """How many of the drafts in hand to verify, for a proposer that drafted first: its own
        rules (choose_for_evidence), on the costs this chooser measured."""
        return choose_for_evidence(self, evidence, temperature)


def stepping_aside(chooser: AdaptiveK, costs: Costs, rates: dict[int, float], ceiling: float, needed: float) -> AutoChoice:
    """k = 0 at once when drafting cannot pay enough at any acceptance (ceiling: the best k's
    speed with every draft accepted; needed: what drafting must reach). Only the costs could
    change that, so the one look is at a reply's first step, where the draft has just read the
    prompt: one drafted token, no catch-up, and it measures d and V(1) again."""
    probe, chooser.new_reply = chooser.new_reply, False
    chooser.current_k, chooser.leave_votes, chooser.probing = 0, 0, probe
    k = 1 if probe else 0
    verdict = ("no k pays even if every draft is accepted" if ceiling < 1 else
               f"every draft accepted would give ×{ceiling:.2f}, drafting must reach ×{needed:.2f}")
    why = (f"draft {costs.draft_ratio():.2f}× target, a verify of 2 {costs.verify(1) / costs.verify(0):.2f}× a step: "
           f"{verdict} → {'probe k 1' if probe else 'k 0'}")
    return AutoChoice(k, rates[k] / rates[0], chooser.realised, why)


def observe_costs(chooser: AdaptiveK, step: Step, steady: bool, evidence: Hashable | None) -> None:
    """What one step (not a prefill) says of the costs: how often asking brings drafts, what
    drafting costs with drafts and without, the verify forward (a point of V(k)), and its speed
    over the plain rate. steady: the draft model drafted on the step before too."""
    drafted = step.num_drafted
    if step.k:
        chooser.proposal_rate = moving(chooser.proposal_rate, 1.0 if drafted else 0.0, COST_WEIGHT)
        if not drafted:  # SLEM's forwards that wrote no whole target token are still paid
            chooser.empty_seconds = moving(chooser.empty_seconds, step.draft_seconds, COST_WEIGHT)
    # A draft model that sat out some steps first runs over every token it missed (the prompt,
    # after the prefill): that catch-up is paid once, not per drafted token, and counting it in
    # d would make drafting look too dear to ever try again; it is what leaving costs. A proposer
    # that drafted first (evidence) reads no model: every one of its steps is its cost.
    if drafted and (steady or evidence is not None):
        chooser.draft_seconds = moving(chooser.draft_seconds, step.draft_seconds / drafted, COST_WEIGHT)
    elif drafted and chooser.missed_tokens and chooser.draft_seconds is not None:
        catch_up = max(0.0, step.draft_seconds - drafted * chooser.draft_seconds) / chooser.missed_tokens
        chooser.catch_up_seconds = moving(chooser.catch_up_seconds, catch_up, COST_WEIGHT)
    chooser.missed_tokens = 0 if step.k else chooser.missed_tokens + len(step.token_ids)
    # a row per draft the verify held, and one more (n-gram may find fewer; pieces stop early)
    chooser.verify_points.append((step.num_verified, step.verify_seconds))
    overhead = chooser.overhead_seconds or 0.0
    plain = verify_line(chooser.verify_points, chooser.prior_verify_slope, 0, chooser.prior_spread) + overhead
    seconds = step.draft_seconds + step.verify_seconds + overhead
    if plain and seconds > 0:
        chooser.realised = moving(chooser.realised, len(step.token_ids) / seconds * plain, COST_WEIGHT)


def within_reach(chooser: AdaptiveK) -> bool:
    """Whether PROBE_REACH more accepted probes in a row would make drafting pay: where the costs
    ask for an acceptance far above the estimate (1.5B on ggml: a probe costs 0.9 of a plain step
    more, for α ≈ 0.75 of a token), a streak of probes is a streak of losing steps."""
    costs = chooser.costs()
    if costs is None:
        return True
    accept, seen = list(chooser.accept), list(chooser.seen)
    for _ in range(PROBE_REACH):
        learn_acceptance(accept, seen, 1, 1, chooser.k_max, copies=False)
    rates = chooser.rates(costs, filled(accept))
    return max(rate for k, rate in rates.items() if k) >= rates[0] * (1 + chooser.start_margin(costs))


def chain_reach(chooser: AdaptiveK, choice: AutoChoice, k: int) -> int:
    """How far a sure chain may run past the planned k: as far as this reply's slow start
    allows where drafting is predicted to pay; held at a predicted loss (the leaving rule), k."""
    held = choice.predicted_speedup is not None and choice.predicted_speedup < 1
    return k if held else min(max(k, chooser.ramp), chooser.k_max)


def stopping_floor(chooser: AdaptiveK, choice: AutoChoice) -> float:
    """For a draft model that can stop mid-step: the chain confidence (the product of the
    draft's probabilities for its drafts so far) below which one more draft does not pay;
    0 when drafting was not chosen or the costs are unknown. One more draft pays when
    chain · accept[0] beats what the same time yields at the predicted speed."""
    extra = chooser.probe_cost()  # one more draft and its verify, in plain steps
    if not choice.k or chooser.probing or choice.predicted_speedup is None or extra is None:
        return 0.0  # a probe stays one cheap look
    return min(FLOOR_MAX, choice.predicted_speedup * extra / max(chooser.acceptance()[0], 0.05))


# A proposer that drafted first (prompt lookup): each step decides on its own evidence.


def choose_for_evidence(chooser: AdaptiveK, evidence: Hashable, temperature: float) -> AutoChoice:
    """How many of the drafts in hand to verify, for a proposer that drafted first (prompt
    lookup), from how drafts with the same evidence fared. No slow start and no hysteresis:
    each step decides on its own evidence, and a refused draft costs only its verify width.
    A class whose drafts do not pay is still tried with one draft every few of its steps."""
    accept = filled(chooser._tables(evidence, temperature)[0])
    costs = chooser.costs(temperature)
    rates = {} if costs is None else chooser.rates(costs, accept, offered=1.0)
    if costs is None or not rates[0]:
        return chooser._measuring()
    best = max(rates, key=lambda k: rates[k])
    if best and rates[best] < rates[0] * (1 + SWITCH_MARGIN):
        best = 0
    why = f"match {evidence}: α {accept[0]:.2f}, draft {costs.draft_ratio():.2f}× target"
    if best == 0:
        key = (evidence, temperature)
        chooser.declined[key] = chooser.declined.get(key, 0) + 1
        if chooser.declined[key] >= evidence_probe_wait(chooser):
            chooser.declined[key] = 0
            return AutoChoice(1, rates[1] / rates[0], chooser.realised, f"{why} → probe k 1")
    return AutoChoice(best, rates[best] / rates[0], chooser.realised, f"{why} → k {best}")


def evidence_probe_wait(chooser: AdaptiveK) -> int:
    """Declined steps of one evidence class before one draft looks again: every 4th while a
    look is cheap, else as rarely as keeps looks at EVIDENCE_PROBE_SHARE of the time."""
    cost = chooser.probe_cost()
    if cost is None or cost < CHEAP_PROBE:
        return CHEAP_PROBE_AFTER
    return max(CHEAP_PROBE_AFTER, math.ceil(cost / EVIDENCE_PROBE_SHARE))


def chooser_for(verify_slope: float, timed: bool, verify_piece: int | None) -> AdaptiveK:
    """Adaptive k for a target whose verify costs verify_slope per drafted token: a slope timed
    on this machine weighs PRIOR_SPREAD in V(k)'s line, a guess only until two ks are measured."""
    return AdaptiveK(prior_verify_slope=verify_slope, prior_spread=PRIOR_SPREAD if timed else 0.0, verify_piece=verify_piece)
