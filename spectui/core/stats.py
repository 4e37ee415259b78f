"""Numbers derived from a list of Steps. Stdlib only; every screen uses these."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from spectui.core.events import Step


@dataclass(frozen=True)
class ReplyStats:
    num_steps: int
    num_tokens: int
    num_drafted: int
    num_accepted: int
    seconds: float

    @property
    def gamma(self) -> float | None:
        """Draft acceptance rate: accepted drafts / drafted tokens."""
        return self.num_accepted / self.num_drafted if self.num_drafted else None

    @property
    def tau(self) -> float | None:
        """Mean acceptance length, 1 + accepted / steps (vLLM's definition)."""
        return 1.0 + self.num_accepted / self.num_steps if self.num_steps else None

    @property
    def tokens_per_s(self) -> float | None:
        return self.num_tokens / self.seconds if self.seconds > 0 else None

    def as_dict(self) -> dict:
        return {
            "gamma": self.gamma,
            "tau": self.tau,
            "tokens_per_s": self.tokens_per_s,
            "num_steps": self.num_steps,
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
        num_drafted=sum(s.num_drafted for s in steps),
        num_accepted=sum(s.num_accepted for s in steps),
        seconds=seconds,
    )


def per_position_acceptance(steps: Iterable[Step]) -> list[float]:
    """Fraction of steps whose i-th draft was accepted, among steps that drafted i+1."""
    offered: list[int] = []
    accepted: list[int] = []
    for step in steps:
        for i in range(step.num_drafted):
            if i == len(offered):
                offered.append(0)
                accepted.append(0)
            offered[i] += 1
            accepted[i] += i < step.num_accepted
    return [a / o for a, o in zip(accepted, offered)]
