"""`spectui bench --history`: real timed arms on the user's own saved prompts, beside the
replay's predicted speed for the same arms, so a user can check the replay on this machine.

The prompts are the ones `spectui advise` replays (spectui.advise.chats: the chat before each
finished T = 0 reply, as its prompt ids were built), and each arm is timed against the replay of
the same drafter and k (spectui.advise.advice): the bench's suffix decoding drafts from the
conversation only (spectui.bench.drafters), so it is the replay's "suffix (no history)"; prompt
lookup is the replay's n-gram range of the engine's settings. Every speed is over k 0 on the same
replies; timed speed is decode speed (each reply's first token left out), as the replay's is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from spectui.advise.advice import AUTO, Advice, ArmResult as ReplayedArm, Drafter
from spectui.advise.chats import ChatReply
from spectui.bench.measure import BASELINE, Case, CaseResult
from spectui.bench.runs import Arm, median_of
from spectui.bench.workloads import Workload

# A saved reply that ended on its stop token is timed with this much room past its length: the
# engine caps drafts by the room left, which the replay of a finished reply does not.
STOP_MARGIN = 9
HISTORY_METHODS = ("suffix", "ngram")  # the copy drafters: the ones the replay runs without a model
HISTORY_CATEGORY = "history"


@dataclass(frozen=True)
class HistoryPrompt(Workload):
    """A saved chat's prompt as a bench workload."""

    def __post_init__(self) -> None:
        """A saved chat belongs to no suite category: nothing to check."""


def history_drafters(methods: Sequence[str], lookup: tuple[int, int]) -> dict[str, Drafter]:
    """The replay's drafter for each timed method: suffix over the conversation only (as the bench
    runs it), prompt lookup over the engine's n-gram range."""
    out = {}
    for method in methods:
        if method == "suffix":
            out[method] = Drafter("suffix (no history)", "suffix", history=False)
        elif method == "ngram":
            out[method] = Drafter(f"ngram {lookup[0]}-{lookup[1]}", "ngram", lookup=lookup)
    return out


def capped(replies: Sequence[ChatReply], max_tokens: int | None) -> list[ChatReply]:
    """Replies cut at max_tokens, as a budget cuts them: timed and replayed alike."""
    if max_tokens is None:
        return list(replies)
    return [reply if len(reply.reply_ids) <= max_tokens
            else replace(reply, reply_ids=reply.reply_ids[:max_tokens], finish_reason="length") for reply in replies]


def history_cases(replies: Sequence[ChatReply]) -> list[Case]:
    """One T = 0 case per saved reply: the chat before it, a budget of its length (and room past a stop)."""
    cases = []
    for reply in replies:
        budget = len(reply.reply_ids) + (0 if reply.finish_reason == "length" else STOP_MARGIN)
        name = f"conversation {reply.conversation_id} · message {reply.message_id}"
        prompt = HistoryPrompt(HISTORY_CATEGORY, name, tuple(dict(m) for m in reply.messages), 0.0, budget, 0)
        cases.append(Case(prompt, 0.0))
    return cases


@dataclass(frozen=True)
class TimedVsReplayed:
    """One arm: its timed decode speed and speed over k 0, the replay's predicted speed over k 0."""

    arm: Arm
    timed_tokens_per_s: float | None
    timed_speedup: float | None
    predicted_speedup: float | None
    same_replies: int  # timed replies whose tokens equal the saved reply's
    replies: int
    timed_accepted: int | None = None  # drafts kept in the first round's replies
    replayed_accepted: int | None = None  # drafts the replay keeps over the same replies

    @property
    def difference(self) -> float | None:
        """Predicted over timed, less one: + where the replay promises more than the run gave."""
        if self.timed_speedup is None or self.predicted_speedup is None or self.timed_speedup == 0:
            return None
        return self.predicted_speedup / self.timed_speedup - 1

    def as_dict(self) -> dict:
        return {"arm": self.arm.label, "method": self.arm.method, "k": AUTO if self.arm.auto else self.arm.k,
                "timed_tokens_per_s": self.timed_tokens_per_s, "timed_speedup": self.timed_speedup,
                "predicted_speedup": self.predicted_speedup, "difference": self.difference,
                "same_replies": self.same_replies, "replies": self.replies,
                "timed_accepted": self.timed_accepted, "replayed_accepted": self.replayed_accepted}


def timed_rate(cases: Sequence[CaseResult], arm: Arm) -> float | None:
    """Decode tokens over decode seconds, every reply at the median of its rounds."""
    tokens, seconds = 0.0, 0.0
    for case in cases:
        result = case.arm(arm)
        if result is None or not result.replies:
            return None
        decode = median_of(reply.wall_seconds - (reply.first_token_seconds or 0.0) for reply in result.replies)
        if decode is None:
            return None
        tokens += median_of(max(0, reply.num_tokens - reply.first_chunk_tokens) for reply in result.replies) or 0.0
        seconds += decode
    return tokens / seconds if seconds > 0 else None


def same_as_saved(cases: Sequence[CaseResult], arm: Arm, replies: Sequence[ChatReply]) -> int:
    """How many of the arm's first-round replies are the saved reply, token for token."""
    same = 0
    for case, reply in zip(cases, replies, strict=True):
        result = case.arm(arm)
        if result is not None and result.replies and tuple(result.replies[0].token_ids) == tuple(reply.reply_ids):
            same += 1
    return same


def first_round_accepted(cases: Sequence[CaseResult], arm: Arm) -> int | None:
    """Drafts the target kept in the arm's first-round replies (None where a case did not run it)."""
    kept = 0
    for case in cases:
        result = case.arm(arm)
        if result is None or not result.replies:
            return None
        kept += sum(step.num_accepted for step in result.replies[0].steps)
    return kept


def replayed_arm(advice: Advice, drafters: dict[str, Drafter], arm: Arm) -> ReplayedArm | None:
    if not arm.speculative and not arm.auto:
        return advice.baseline
    drafter = drafters.get(arm.method)
    k: int | str = AUTO if arm.auto else arm.k
    return next((a for a in advice.arms if drafter is not None and a.drafter == drafter.name and a.k == k), None)


def timed_vs_replayed(cases: Sequence[CaseResult], arms: Sequence[Arm], advice: Advice,
                      drafters: dict[str, Drafter], replies: Sequence[ChatReply]) -> list[TimedVsReplayed]:
    """Every timed arm beside the replay's prediction for it."""
    base = timed_rate(cases, BASELINE)
    rows = []
    for arm in arms:
        rate = timed_rate(cases, arm)
        predicted = replayed_arm(advice, drafters, arm)
        rows.append(TimedVsReplayed(arm, rate, rate / base if rate and base else None,
                                    predicted.speedup if predicted is not None else None,
                                    same_as_saved(cases, arm, replies), len(replies), first_round_accepted(cases, arm),
                                    predicted.accepted if predicted is not None else None))
    return rows
