"""Numbers derived from Steps. Stdlib only; every screen, the bench and `--json` use these.

Acceptance is counted once, in `AcceptanceCounts`: the counters vLLM keeps for the same
purpose (`SpecDecodingStats`, vllm/v1/spec_decode/metrics.py), so that a figure computed
here and one computed from vLLM's own counters mean the same thing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from spectui.core.events import Step


@dataclass
class AcceptanceCounts:
    """Drafted and accepted tokens over some steps, added one Step at a time; mergeable."""

    num_drafts: int = 0  # steps that drafted at least one token (vLLM's num_drafts)
    num_draft_tokens: int = 0
    num_accepted_tokens: int = 0
    num_draft_tokens_per_pos: list[int] = field(default_factory=list)
    num_accepted_tokens_per_pos: list[int] = field(default_factory=list)
    # Drafting steps whose last draft the target turned down: α's failures (vLLM keeps none).
    num_rejections: int = 0

    def observe(self, step: Step) -> None:
        self.observe_draft(step.num_drafted, step.num_accepted)

    def observe_draft(self, num_draft_tokens: int, num_accepted_tokens: int) -> None:
        """As vLLM's SpecDecodingStats.observe_draft; a step that drafted nothing is no draft."""
        if not num_draft_tokens:
            return
        self.num_drafts += 1
        self.num_draft_tokens += num_draft_tokens
        self.num_accepted_tokens += num_accepted_tokens
        self.num_rejections += num_accepted_tokens < num_draft_tokens
        missing = num_draft_tokens - len(self.num_draft_tokens_per_pos)
        if missing > 0:
            self.num_draft_tokens_per_pos.extend([0] * missing)
            self.num_accepted_tokens_per_pos.extend([0] * missing)
        for position in range(num_draft_tokens):
            self.num_draft_tokens_per_pos[position] += 1
        for position in range(num_accepted_tokens):
            self.num_accepted_tokens_per_pos[position] += 1

    def merged(self, other: AcceptanceCounts) -> AcceptanceCounts:
        return AcceptanceCounts(
            self.num_drafts + other.num_drafts,
            self.num_draft_tokens + other.num_draft_tokens,
            self.num_accepted_tokens + other.num_accepted_tokens,
            _add_lists(self.num_draft_tokens_per_pos, other.num_draft_tokens_per_pos),
            _add_lists(self.num_accepted_tokens_per_pos, other.num_accepted_tokens_per_pos),
            self.num_rejections + other.num_rejections,
        )

    def copy(self) -> AcceptanceCounts:
        return replace(
            self,
            num_draft_tokens_per_pos=list(self.num_draft_tokens_per_pos),
            num_accepted_tokens_per_pos=list(self.num_accepted_tokens_per_pos),
        )

    @property
    def gamma(self) -> float | None:
        """Draft acceptance rate: accepted drafts / drafted tokens (vLLM's draft acceptance rate)."""
        return self.num_accepted_tokens / self.num_draft_tokens if self.num_draft_tokens else None

    @property
    def mean_acceptance_length(self) -> float | None:
        """τ = 1 + accepted / drafting steps, vLLM's mean acceptance length (the bonus included)."""
        return 1.0 + self.num_accepted_tokens / self.num_drafts if self.num_drafts else None

    @property
    def per_position(self) -> list[float]:
        """Fraction of steps whose i-th draft was accepted, among steps that drafted i+1."""
        return [a / d for a, d in zip(self.num_accepted_tokens_per_pos, self.num_draft_tokens_per_pos)]

    @property
    def alpha(self) -> float | None:
        """Per-token acceptance α, the maximum-likelihood value for i.i.d. acceptance: each
        drafting step gives its accepted drafts as successes and one failure if it stopped
        before its last draft; this stays right when k changes within a reply."""
        total = self.num_accepted_tokens + self.num_rejections
        return self.num_accepted_tokens / total if total else None


def _add_lists(a: list[int], b: list[int]) -> list[int]:
    longer, shorter = (a, b) if len(a) >= len(b) else (b, a)
    return [x + (shorter[i] if i < len(shorter) else 0) for i, x in enumerate(longer)]


def count_acceptance(steps: Iterable[Step]) -> AcceptanceCounts:
    counts = AcceptanceCounts()
    for step in steps:
        counts.observe(step)
    return counts


@dataclass(frozen=True)
class ReplyStats:
    num_steps: int  # target forwards, the prefill's included
    num_tokens: int
    seconds: float
    acceptance: AcceptanceCounts = field(default_factory=AcceptanceCounts)

    @property
    def num_drafted(self) -> int:
        return self.acceptance.num_draft_tokens

    @property
    def num_accepted(self) -> int:
        return self.acceptance.num_accepted_tokens

    @property
    def num_drafts(self) -> int:
        return self.acceptance.num_drafts

    @property
    def gamma(self) -> float | None:
        return self.acceptance.gamma

    @property
    def tau(self) -> float | None:
        """Mean acceptance length, vLLM's definition: 1 + accepted / drafting steps."""
        return self.acceptance.mean_acceptance_length

    @property
    def tokens_per_forward(self) -> float | None:
        """1 + accepted / every step: what each target forward yielded, the prefill's and
        the undrafted ones' included (not τ: vLLM divides by drafting steps only)."""
        return 1.0 + self.num_accepted / self.num_steps if self.num_steps else None

    @property
    def tokens_per_s(self) -> float | None:
        return self.num_tokens / self.seconds if self.seconds > 0 else None

    def as_dict(self) -> dict:
        return {
            "gamma": self.gamma,
            "tau": self.tau,
            "tokens_per_forward": self.tokens_per_forward,
            "tokens_per_s": self.tokens_per_s,
            "num_steps": self.num_steps,
            "num_drafts": self.num_drafts,
            "num_tokens": self.num_tokens,
            "num_drafted": self.num_drafted,
            "num_accepted": self.num_accepted,
            "seconds": self.seconds,
        }


def summarize(steps: Iterable[Step], seconds: float) -> ReplyStats:
    steps = list(steps)
    return ReplyStats(
        num_steps=len(steps),
        num_tokens=sum(len(s.token_ids) for s in steps),
        seconds=seconds,
        acceptance=count_acceptance(steps),
    )


def per_position_acceptance(steps: Iterable[Step]) -> list[float]:
    """Fraction of steps whose i-th draft was accepted, among steps that drafted i+1."""
    return count_acceptance(steps).per_position


def _changes(labels: Iterable[str], most: int = 4) -> str:
    """Labels in order with repeats collapsed, "a→b→c"; a long run of changes keeps its ends."""
    runs: list[str] = []
    for label in labels:
        if not runs or runs[-1] != label:
            runs.append(label)
    return "→".join(runs if len(runs) <= most else [runs[0], "…", runs[-1]])


def settings_ran(steps: Iterable[Step]) -> str:
    """The k and T a reply's steps ran with, in order: "k 4 · T 0.00", "k auto→6 · T 0.00→0.10"
    (a key pressed mid-reply); "" without steps. The first step is the prompt's token, which
    drafts nothing whatever k is (an engine may say k 0 there): the others say what ran."""
    steps = list(steps)
    if not steps:
        return ""
    steps = steps[1:] or steps
    k = _changes("auto" if step.auto is not None else str(step.k) for step in steps)
    temperature = _changes(f"{step.temperature:.2f}" for step in steps)
    return f"k {k} · T {temperature}"


def changed_mid_reply(ran: str) -> bool:
    return "→" in ran
