"""One timed reply of one arm (a runner at a method and k), and the numbers it yields.

Every runner, spectui's engines and the anchors alike, is timed the same way: wall clock
from the call to the last token, and the first token's arrival (spectui's engines through
measure.run.run_reply). Stdlib only.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from spectui.core.events import Step
from spectui.measure.costs import StepTimings
from spectui.measure.run import MeasuredReply
from spectui.measure.speed import decode_tokens_per_s, tokens_per_s
from spectui.measure.speed import median_or_none as median_of  # noqa: F401  (the bench's name for it)
from spectui.measure.speed import paired_ratio as paired_rates


@dataclass(frozen=True)
class Arm:
    """What runs: a runner ("spectui", "transformers", "vllm") drafting by `method` with k."""

    runner: str
    method: str  # "none" for plain decoding; "draft", "ngram", "assisted", "prompt-lookup"
    k: int  # with auto: where adaptive k starts
    auto: bool = False  # adaptive k picks each step's k

    @property
    def label(self) -> str:
        if self.auto:
            return f"{self.runner} {self.method} k=auto"
        return f"{self.runner} {self.method}" + (f" k={self.k}" if self.k else "")

    @property
    def speculative(self) -> bool:
        return self.k > 0 and self.method != "none"


@dataclass
class ArmReply:
    """One arm's reply in a bench case: its tokens and its wall-clock times, from any engine
    (a spectui engine's MeasuredReply, a server's stream, a llama.cpp anchor's AnchorReply)."""

    arm: Arm
    token_ids: list[int]
    wall_seconds: float  # the call to the last token
    first_token_seconds: float | None  # the call to the first token
    steps: list[Step] = field(default_factory=list)  # spectui's engines only
    finish_reason: str = "stop"
    # Tokens that arrived with the first: 1 where the prompt's prefill makes the first token
    # on its own; k + 1 where the prefill also verifies the first drafts (transformers'
    # assisted generation and prompt lookup).
    first_chunk_tokens: int = 1

    @classmethod
    def of(cls, arm: Arm, reply: MeasuredReply) -> ArmReply:
        """A spectui engine's reply, as run_reply timed it."""
        return cls(arm, reply.token_ids, reply.wall_seconds, reply.first_token_seconds, list(reply.steps),
                   reply.finish_reason or "stop", reply.first_chunk_tokens)

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def tokens_per_s(self) -> float | None:
        return tokens_per_s(self.num_tokens, self.wall_seconds)

    @property
    def decode_tokens_per_s(self) -> float | None:
        """Tokens after the first chunk over the time after it (measure.speed.decode_tokens_per_s)."""
        return decode_tokens_per_s(self.num_tokens, self.wall_seconds, self.first_token_seconds, self.first_chunk_tokens)


def paired_ratio(top: Sequence[ArmReply], bottom: Sequence[ArmReply]) -> float | None:
    """One arm's decode speed over another's, paired by round (measure.speed.paired_ratio):
    both lists in round order."""
    return paired_rates([reply.decode_tokens_per_s for reply in top], [reply.decode_tokens_per_s for reply in bottom])


def case_costs(replies: Iterable[tuple[str, Sequence[Step]]]) -> StepTimings:
    """The step timings of one case: replies are (method, steps) of spectui's arms."""
    costs = StepTimings()
    for method, steps in replies:
        costs.add_reply(steps, method)
    return costs


def replayed_seconds(steps: Sequence[Step], method: str, costs: StepTimings) -> float | None:
    """A reply's decode time with each of its steps at the case's median costs: the arm's real
    choices and acceptances, without the machine's moment-to-moment speed. A draft model that
    sat out plain steps first runs over the tokens it missed: charged as one forward over that
    many tokens, scaled as the target's forwards scale. None for draft trees (their cost is
    not a chain's)."""
    plain = costs.verify_seconds(0)
    if plain is None:
        return None
    total, missed = 0.0, 0
    for step in steps[1:]:
        drafted = step.num_drafted
        verify = costs.verify_seconds(step.num_verified)
        draft = costs.draft_seconds(method) if drafted else 0.0
        if step.tree_nodes is not None or verify is None or draft is None:
            return None
        total += verify
        if drafted:
            total += drafted * draft
            if method == "draft" and missed:
                widest = costs.verify_seconds(missed) or costs.verify_seconds(max(costs.verify))
                assert widest is not None, "every k in costs.verify was timed"
                total += draft * widest / plain
            missed = 0
        else:
            missed += len(step.token_ids)
    return total


def replayed_rate(replies: Sequence[Sequence[Step]], method: str, costs: StepTimings) -> float | None:
    """Tokens per replayed second over replies (their first steps left out, as decode speed does)."""
    tokens, seconds = 0, 0.0
    for steps in replies:
        replayed = replayed_seconds(steps, method, costs)
        if replayed is None:
            return None
        tokens += sum(len(step.token_ids) for step in steps[1:])
        seconds += replayed
    return tokens / seconds if seconds > 0 else None
