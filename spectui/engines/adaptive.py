"""Adaptive k: before every step, the k expected to give the most tokens per second.

Everything it needs is measured as the reply runs, on this device:
  accept[i]  the chance the draft at position i is accepted once positions < i were
             (an exponentially weighted estimate per position: it follows the text as it
             moves from prose into code and back);
  d          the draft's seconds per drafted token;
  V(k)       the target's seconds to verify k drafts (k + 1 tokens); V(0) is a plain step.
Expected tokens per step E(k) = 1 + sum over j = 1..k of accept[0]·…·accept[j-1], and the
choice is the k with the largest E(k) / (k·d + V(k)): Leviathan's S(k) = E(α,k) / (k·c + v(k))
with a per-position α, and k = 0 (plain decoding, S = 1) when no k pays. A proposer that
offers drafts only on some steps (prompt lookup needs a match) is weighted by how often it does.
A proposer that drafts for next to nothing and knows its odds beforehand (prompt lookup: the
length of the n-gram it matched, and whether earlier occurrences of it went on differently)
drafts first, and the controller then picks how many of the drafts to verify from how drafts
with the same evidence fared: a 1-token match's copy is refused three times in four, a
4-token match's is mostly accepted, and one estimate for both would be wrong for each.
Every step also pays a fixed overhead o outside drafting and verifying (sampling's
bookkeeping, detokenizing, the consumer handling the step); it is measured between steps and
added to every k's cost, so long steps get the credit for amortizing it.
At k = 0 nothing is learned about acceptance, so now and then one step drafts a single token
(a probe): while probes are accepted they repeat, until the estimate says draft; each
refusal doubles the wait. A probe that costs little over a plain step (prompt lookup, heads)
is made every few steps, one that runs a draft model waits longer, and every reply starts
with one. A draft model that sat out plain steps must first read the tokens it missed (its
catch-up), so leaving drafting has a price paid on the way back: a draft model stops drafting
only when two steps in a row predict plain decoding faster by more than that catch-up, spread
over the steps until the next probe. Estimates carry over between replies, but a new prompt
may be nothing like the last: with a draft model, a reply's k starts capped at 2 and each
fully accepted step raises the cap by its drafts. Each temperature keeps its own estimates.
A draft model under auto k also stops mid-step where its own probabilities say the next
draft will not pay (confidence_floor), and may run past the chosen k where they say it will.
Stdlib only.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass

from spectui.core.events import AutoChoice, Step

K_AUTO_MAX = 8  # past 8 drafts the product of acceptances rarely pays for the tail's cost
START_K = 4  # before anything is measured: the sweet spot the literature and our sweeps agree on
PRIOR_ACCEPT = 0.6
PRIOR_VERIFY_SLOPE = 0.05  # V(k)/V(0) - 1 per drafted token before two ks are measured
ACCEPT_WEIGHT = 0.15  # weight of the newest observation: about the last dozen steps count
# A position's first observations weigh 1/2, 1/3, … until that falls to ACCEPT_WEIGHT: with a
# fixed weight a reply of a dozen steps ends before the estimate leaves its prior. A new reply
# keeps what was learned as a prior worth FRESH_OBSERVATIONS steps, so its own first steps
# weigh 1/4, 1/5, …: at 0.15, creative writing after a retrieval answer (α 0.99) drafted k 6,
# 6, 3, all refused, before it stopped, and factual QA after it took half its reply to resume.
FRESH_OBSERVATIONS = 2
# Slow start: a reply's first drafting step drafts at most 2, and every step whose drafts
# were all accepted raises the cap by as many (a step drafted up to the cap doubles it). After
# retrieval (α 0.99) creative writing (α 0.3) otherwise started at k 8: four plain steps' cost
# for one token. Raising it only to twice a fully accepted step's drafts held retrieval at
# k 2 for 8 of its 10 steps: the confidence floor stopped its chains at 1 or 2 drafts, all
# accepted, and 2 · 1 raised nothing (0.91x the best fixed k replayed, now 0.97x). Not for
# cheap proposers (prompt lookup): a refused draft costs them a few verified tokens, a capped
# k whole steps.
RAMP_START = 2
COST_WEIGHT = 0.2
VERIFY_WINDOW = 24  # verify forwards the V(k) line is fitted to: a couple of replies' worth
# Untried positions follow the last tried one quickly: at k = 1 only position 0 is seen, and
# a stale low estimate further on would hold k at 1 while every draft is accepted (measured:
# at 0.05 per step, a TypeScript reply with γ 1.0 stayed at k = 1 for all its 30 steps).
DRIFT_WEIGHT = 0.3
# Plain steps before the first probe, and the longest wait. A draft model's probe after W plain
# steps also reads those W tokens: at W 16 that catch-up cost 1.3 plain steps on the quick
# suite, and creative writing at T 1.0 lost 4% to probes at 16 and 32, 2% at 24 and 48
# (benchmarks/adaptive_replay.py). Summaries whose first drafts are refused pay for it.
PROBE_AFTER = 24
PROBE_AFTER_MAX = 48
CHEAP_PROBE = 0.15  # a probe's cost over a plain step, in plain steps, below which it is cheap
CHEAP_PROBE_AFTER = 4  # ~8% per cheap probe: every 4th to 8th step is at most 2%
CHEAP_PROBE_AFTER_MAX = 8
# A draft model under auto k drafts while the chain's confidence pays (confidence_floor); the
# floor stays below 1 so that a sure draft may always go on.
FLOOR_MAX = 0.95
SWITCH_MARGIN = 0.02  # keep the current k unless another is predicted 2% faster: no flapping
# Drafting with a draft model must be predicted this much faster than plain decoding to
# start: its catch-up over the tokens of the plain steps it sat out is real time the model
# leaves out. Cheap proposers (prompt lookup, heads) have no catch-up to pay.
DRAFT_MARGIN = 0.05
# ...and predicted slower than plain decoding on this many steps in a row to stop: the estimate
# is lowest right after a refusal, and stopping there held SQL, summaries and retrieval at
# k = 0 through runs of accepted drafts (auto 0.84-0.86x the best fixed k, replayed).
LEAVE_AFTER = 2


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


@dataclass
class AdaptiveK:
    k_max: int = K_AUTO_MAX
    accept: list[float | None] | None = None
    seen: list[int] | None = None  # observations per position, for the first ones' weight
    draft_seconds: float | None = None  # per drafted token
    # the last verify forwards, (drafted, seconds): V(k) is the line through them
    verify_points: deque[tuple[int, float]] | None = None
    overhead_seconds: float | None = None  # per step, outside drafting and verifying
    current_k: int = START_K
    plain_steps: int = 0
    probe_after: int = PROBE_AFTER
    realised: float | None = None  # moving tokens/s over the plain rate
    # how often asking for drafts gets any: 1 for a draft model; prompt lookup finds a match
    # only where the text repeats, and a step without one costs a plain step
    proposal_rate: float | None = None
    probing: bool = False
    leave_votes: int = 0  # drafting steps in a row that predicted plain decoding faster
    drafted_last_step: bool = False
    ramp: int = K_AUTO_MAX  # the largest k this reply has earned (slow start)
    temperature: float = 0.0  # what `accept` and `seen` describe: each temperature has its own

    def __post_init__(self) -> None:
        fresh_accept, fresh_seen = self._fresh_table()
        self.accept = self.accept or fresh_accept
        self.seen = self.seen or fresh_seen
        self.verify_points = deque(self.verify_points or (), maxlen=VERIFY_WINDOW)
        # per (evidence, temperature), for choose_for: (accept, seen) as above, and the k = 0
        # choices since the last probe. Sampling accepts a copied token only as often as the
        # target would pick it: a 4-token match in math at T 0.7 is not one at T 0.
        self.by_evidence: dict[tuple[Hashable, float], tuple[list[float | None], list[int]]] = {}
        self.declined: dict[tuple[Hashable, float], int] = {}
        self.other_temperatures: dict[float, tuple[list[float | None], list[int]]] = {}

    def at_temperature(self, temperature: float) -> None:
        """Make `accept` and `seen` those of this temperature (new ones start from the prior).

        A sampled token matches the draft less often than the target's top choice: creative
        writing at T 1.0 taught one estimate that the draft is useless, and the next reply,
        code at T 0, started from it at k = 0."""
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
            # The reply's first drafting step may probe: the draft model read the prompt with
            # the target (decode_steps), so a probe costs one drafted token, no catch-up.
            self.probe_after = self.probe_wait()[0]
            self.plain_steps = self.probe_after
            return
        if evidence is None:
            self.at_temperature(step.temperature)
        if step.k:
            self.proposal_rate = moving(self.proposal_rate, 1.0 if drafted else 0.0, COST_WEIGHT)
        if drafted:
            # A draft model that sat out some steps first runs over every token it missed (the
            # prompt, after the prefill): that catch-up is paid once, not per drafted token, and
            # counting it would make drafting look too dear to ever try again.
            if steady:
                self.draft_seconds = moving(self.draft_seconds, step.draft_seconds / drafted, COST_WEIGHT)
            # position i was tried only if every draft before it was accepted
            tried = min(drafted, step.num_accepted + 1, self.k_max)
            accept, seen = self._tables(evidence, step.temperature)
            # a position tried for the first time starts from what the model assumed for it
            assumed = filled(accept)
            for i in range(tried):
                previous = accept[i] if accept[i] is not None else assumed[i]
                weight = max(ACCEPT_WEIGHT, 1 / (seen[i] + 2))
                accept[i] = moving(previous, 1.0 if i < step.num_accepted else 0.0, weight)
                seen[i] += 1
            # Positions past the last one tried drift back towards it: one unlucky refusal
            # must not keep a position's estimate low for ever, as k would never reach it again.
            # A copy's later positions move only after a copy accepted to its end, and only
            # up. A copy refused at its first token says nothing of how far copies run once
            # they start (retrieval's 1-token matches: 16% accepted first, 80-94% after that):
            # pulling the rest down to 16% verified 3 of a run of 8 (benchmarks/lookup_replay.py:
            # retrieval 0.93x k 8, now 1.02x). Nor does it say they run far: lifted towards
            # the first position's 60% by its refusals, a Python reply whose copies part
            # after one token verified 6-8 drafts for 1, five steps running (now 3-5).
            last = accept[tried - 1]
            ran_out = step.num_accepted == drafted
            for i in range(tried, self.k_max):
                if accept[i] is not None and (evidence is None or (ran_out and accept[i] < last)):
                    accept[i] = moving(accept[i], last, DRIFT_WEIGHT)
            if ran_out:
                # one more per accepted draft, also for steps the floor stopped short (RAMP_START)
                self.ramp = min(self.k_max, self.ramp + drafted)
            if self.probing and step.num_accepted:
                # acceptance may be back: look again at once, until the estimate says draft
                self.probe_after = 0
            self.probing = False
            self.plain_steps = 0
        elif self.probing and step.k:
            # Prompt lookup found no match for the probe: nothing was learned about
            # acceptance, and a step without drafts costs a plain step, so look again next step.
            self.plain_steps = self.probe_after
        else:
            self.plain_steps += 1
        # the target verified drafted + 1 tokens, whatever k asked for (n-gram may find fewer)
        self.verify_points.append((drafted, step.verify_seconds))
        plain = self.step_seconds(self.verify_cost(0))
        seconds = self.step_seconds(step.draft_seconds + step.verify_seconds)
        if plain and seconds > 0:
            self.realised = moving(self.realised, len(step.token_ids) / seconds * plain, COST_WEIGHT)

    def observe_overhead(self, seconds: float) -> None:
        """The time between one step's end and the next one's start."""
        self.overhead_seconds = moving(self.overhead_seconds, seconds, COST_WEIGHT)

    # the model

    def acceptance(self) -> list[float]:
        return filled(self.accept)

    def verify_cost(self, k: int) -> float | None:
        """V(k) in seconds: the least-squares line through the last verify forwards.

        A line through recent points, not a table per k: a k left behind keeps no stale
        figure (the first reply's first forwards, slow while the machine warms up, held a
        draft at k = 1 through a whole reply where every draft was accepted)."""
        points = self.verify_points
        if not points:
            return None
        mean_k = sum(n for n, _ in points) / len(points)
        mean_v = sum(v for _, v in points) / len(points)
        spread = sum((n - mean_k) ** 2 for n, _ in points)
        if not spread:  # one k so far: the prior's slope through it
            plain = mean_v / (1 + PRIOR_VERIFY_SLOPE * mean_k)
            return plain * (1 + PRIOR_VERIFY_SLOPE * k)
        slope = sum((n - mean_k) * (v - mean_v) for n, v in points) / spread
        if slope <= 0:  # noise: a bigger verify is never cheaper
            return mean_v
        return max(1e-9, mean_v + slope * (k - mean_k))

    def step_seconds(self, working: float | None) -> float | None:
        """A step's wall time: its drafting and verifying plus the overhead every step pays."""
        return None if working is None else working + (self.overhead_seconds or 0.0)

    def probe_cost(self) -> float | None:
        """A probe's cost over a plain step, in plain steps (None until both are measured)."""
        plain, probe = self.verify_cost(0), self.verify_cost(1)
        if plain is None or probe is None or self.draft_seconds is None:
            return None
        return (self.draft_seconds + probe - plain) / self.step_seconds(plain)

    def cheap_probe(self) -> bool:
        cost = self.probe_cost()
        return cost is not None and cost < CHEAP_PROBE

    def leaving_cost(self) -> float:
        """What stopping a draft model costs per step, in plain steps: coming back, at the
        first probe, it reads the tokens of every plain step it sat out in one forward."""
        wait = self.probe_wait()[0]
        plain = self.verify_cost(0)
        catch_up = (self.draft_seconds or 0.0) * self.verify_cost(wait) / plain
        return catch_up / (wait * self.step_seconds(plain))

    def probe_wait(self) -> tuple[int, int]:
        """Plain steps before the first probe, and the longest wait refusals lead to."""
        return (CHEAP_PROBE_AFTER, CHEAP_PROBE_AFTER_MAX) if self.cheap_probe() else (PROBE_AFTER, PROBE_AFTER_MAX)

    def rate(self, k: int, accept: list[float], offered: float | None = None) -> float | None:
        """Predicted tokens per second at k; offered: the chance drafts come at all (default: as measured)."""
        verify = self.verify_cost(k)
        if verify is None or (k and self.draft_seconds is None):
            return None
        plain = self.verify_cost(0)
        if offered is None:
            offered = 1.0 if self.proposal_rate is None else self.proposal_rate
        tokens = offered * expected_tokens(accept, k) + (1 - offered)
        seconds = offered * (k * (self.draft_seconds or 0.0) + verify) + (1 - offered) * plain
        return tokens / self.step_seconds(seconds)

    def choose(self, temperature: float | None = None) -> AutoChoice:
        if temperature is not None:
            self.at_temperature(temperature)
        accept = self.acceptance()
        every_rate = {k: self.rate(k, accept) for k in range(self.k_max + 1)}
        if any(rate is None for rate in every_rate.values()) or not every_rate[0]:
            return self._measuring()
        cheap = self.cheap_probe()
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
            if rates[drafting] < rates[0] * (1 - self.leaving_cost()):
                self.leave_votes += 1
            else:
                self.leave_votes = 0
            best = 0 if self.leave_votes >= LEAVE_AFTER else best or drafting
        elif best and rates[best] < rates[0] * (1 + DRAFT_MARGIN):
            best = 0
        if best and not self.current_k:
            self.leave_votes = 0
        plain_rate = rates[0]
        cost_ratio = (self.draft_seconds or 0.0) / self.verify_cost(0)
        why = f"α {accept[0]:.2f}, draft {cost_ratio:.2f}× target"
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

    def _measuring(self) -> AutoChoice:
        """A step that drafts to measure what drafting costs. Never at k = 0: a new temperature
        sets k to 0, and turning auto on at T 0.2 before anything was measured held prompt
        lookup at "measuring: k 0" for the whole reply, measuring nothing."""
        k = self.current_k or START_K
        return AutoChoice(k, None, self.realised, f"measuring: k {k} until the costs are known")

    def confidence_floor(self, choice: AutoChoice) -> float:
        """For a draft model that can stop mid-step: the chain confidence (the product of the
        draft's probabilities for its drafts so far) below which one more draft does not pay;
        0 when drafting was not chosen or the costs are unknown.

        One more draft costs d plus the verify's slope, and adds a token only if the chain so
        far and it are accepted, about chain · accept[0]; at the predicted speed S the same
        time yields S · cost tokens. The k S(k) chose stays the plan; the floor lets a sure
        draft run past it, up to what slow start allows (retrieval: k 1 to 3 for 10 steps while
        the estimates climbed, every draft accepted), and stops an unsure one short of it."""
        extra = self.probe_cost()  # one more draft and its verify, in plain steps
        if not choice.k or self.probing or choice.predicted_speedup is None or extra is None:
            return 0.0  # a probe stays one cheap look
        return min(FLOOR_MAX, choice.predicted_speedup * extra / max(self.acceptance()[0], 0.05))

    def choose_for(self, evidence: Hashable, temperature: float) -> AutoChoice:
        """How many of the drafts in hand to verify, for a proposer that drafted first (prompt
        lookup), from how drafts with the same evidence fared. No slow start and no hysteresis:
        each step decides on its own evidence, and a refused draft costs only its verify width.
        A class whose drafts do not pay is still tried with one draft every few of its steps."""
        accept = filled(self._tables(evidence, temperature)[0])
        rates = {k: self.rate(k, accept, offered=1.0) for k in range(self.k_max + 1)}
        if any(rate is None for rate in rates.values()) or not rates[0]:
            return self._measuring()
        best = max(rates, key=lambda k: rates[k])
        if best and rates[best] < rates[0] * (1 + SWITCH_MARGIN):
            best = 0
        cost_ratio = (self.draft_seconds or 0.0) / self.verify_cost(0)
        why = f"match {evidence}: α {accept[0]:.2f}, draft {cost_ratio:.2f}× target"
        if best == 0:
            key = (evidence, temperature)
            self.declined[key] = self.declined.get(key, 0) + 1
            if self.declined[key] >= CHEAP_PROBE_AFTER:
                self.declined[key] = 0
                return AutoChoice(1, rates[1] / rates[0], self.realised, f"{why} → probe k 1")
        return AutoChoice(best, rates[best] / rates[0], self.realised, f"{why} → k {best}")
