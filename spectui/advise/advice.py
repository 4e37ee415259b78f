"""The advice: every copy drafter × k (0 … 8 and auto) replayed over the saved replies, in the
order they were had, charged at one cost profile; and the arm that pays most.

    advise(selection, costs, drafters=COPY_DRAFTERS, ks=KS, progress=None) -> Advice

Speeds are predictions: exact acceptance at T = 0, at measured (or given) costs. Speed leaves
each reply's first token out (it comes from the prefill whatever the arm), as decode speed does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from spectui.advise.chats import ChatReply, Selection
from spectui.advise.costs import CostProfile
from spectui.advise.draft_model import replay_teacher_forced
from spectui.advise.lookups import LookupTable, SharedLookup
from spectui.advise.replay import AUTO, ReplayedStep, ReplyTotals, replay_fixed, replay_reply
from spectui.advise.suffixes import ConversationWalks, SharedHistory, SharedSuffix
from spectui.engines.adaptive import AdaptiveK, chooser_for
from spectui.engines.speculative.proposers import NgramProposer, Proposer
from spectui.engines.speculative.suffix import SuffixProposer
from spectui.settings.options import LOOKUP_MAX

KS: tuple[int | str, ...] = (*range(1, 9), AUTO)
SAME_SPEED = 0.01  # within 1 % of k = 0 is no gain worth a recommendation


@dataclass(frozen=True)
class Drafter:
    """A copy drafter the replay builds afresh for every k: name (the table's), method (the
    engine's --method), and its settings."""

    name: str
    method: str
    history: bool = True  # suffix: earlier replies too
    lookup: tuple[int, int] = (1, LOOKUP_MAX)  # ngram: the n-gram range

    def build(self, lookups: dict[int, LookupTable] | None = None,
              suffixes: tuple[ConversationWalks, SharedHistory] | None = None) -> Proposer:
        """A fresh proposer; prompt lookup's from `lookups` (by lookup_max), suffix decoding's from
        `suffixes` (its conversation's and history's walks) when given, shared with other arms."""
        if self.method == "suffix":
            return SuffixProposer(use_history=self.history) if suffixes is None else SharedSuffix(*suffixes[:1], self.history, suffixes[1])
        if lookups is None:
            return NgramProposer(*self.lookup)
        lookup_min, lookup_max = self.lookup
        return SharedLookup(lookups.setdefault(lookup_max, LookupTable(lookup_max)), lookup_min)


COPY_DRAFTERS = (
    Drafter("suffix", "suffix"),
    Drafter("suffix (no history)", "suffix", history=False),
    Drafter(f"ngram 1-{LOOKUP_MAX}", "ngram"),
    Drafter(f"ngram 3-{LOOKUP_MAX}", "ngram", lookup=(3, LOOKUP_MAX)),
)


@dataclass
class ArmResult:
    drafter: str  # "" for k = 0
    k: int | str
    replies: int = 0
    tokens: int = 0  # decoded tokens (every reply's first one left out)
    steps: int = 0
    drafted: int = 0
    accepted: int = 0
    coloured: int = 0  # emitted tokens that came from drafts
    seconds: float = 0.0
    speedup: float = 1.0  # predicted, over k = 0 on the same replies
    per_reply: list[tuple[int, int]] = field(default_factory=list)  # (coloured tokens, steps) per reply

    @property
    def name(self) -> str:
        return "k 0" if not self.drafter else f"{self.drafter} k {self.k}"

    @property
    def gamma(self) -> float | None:
        """Drafts kept over drafts verified."""
        return self.accepted / self.drafted if self.drafted else None

    @property
    def tau(self) -> float | None:
        """Tokens per target forward."""
        return self.tokens / self.steps if self.steps else None

    @property
    def coloured_share(self) -> float:
        return self.coloured / (self.tokens + self.replies) if self.tokens + self.replies else 0.0

    def add(self, steps: Sequence[ReplayedStep]) -> None:
        decoding = steps[1:]
        self.replies += 1
        self.tokens += sum(step.emitted for step in decoding)
        self.steps += len(decoding)
        self.drafted += sum(step.drafted for step in decoding)
        self.accepted += sum(step.accepted for step in decoding)
        coloured = sum(step.coloured for step in decoding)
        self.coloured += coloured
        self.seconds += sum(step.seconds for step in decoding)
        self.per_reply.append((coloured, len(steps)))

    def add_totals(self, totals: ReplyTotals) -> None:
        """add() for a reply replayed by replay_fixed: the same sums."""
        self.replies += 1
        self.tokens += totals.emitted
        self.steps += totals.steps
        self.drafted += totals.drafted
        self.accepted += totals.accepted
        self.coloured += totals.coloured
        self.seconds += totals.seconds
        self.per_reply.append((totals.coloured, totals.steps_with_first))

    def as_dict(self) -> dict:
        return {"drafter": self.drafter or None, "k": self.k, "predicted_speedup": self.speedup, "gamma": self.gamma,
                "tau": self.tau, "coloured_share": self.coloured_share, "replies": self.replies, "tokens": self.tokens,
                "steps": self.steps, "predicted_seconds": self.seconds}


@dataclass(frozen=True)
class DraftReplay:
    """A draft model's teacher-forced greedy predictions, one list per reply (spectui.advise.draft_model)."""

    name: str
    predictions: list[list[int]]


@dataclass
class Advice:
    costs: CostProfile
    baseline: ArmResult  # k = 0
    arms: list[ArmResult]
    selection: Selection

    @property
    def best(self) -> ArmResult:
        return max(self.arms, key=lambda arm: arm.speedup, default=self.baseline)

    def vs_llamacpp(self, arm: ArmResult) -> float | None:
        """The arm's predicted speed over llama.cpp's plain decoding on the same GGUF, where the
        profile holds llama.cpp's plain step (it is charged per decoded token, as the arm is)."""
        plain = self.costs.llamacpp_plain_seconds
        return plain * arm.tokens / arm.seconds if plain and arm.seconds else None

    def recommendation(self) -> str:
        if not self.baseline.replies:
            return "no reply to replay: nothing to recommend"
        best = self.best
        rests = f"(predicted from {self.baseline.replies} replies, {self.baseline.tokens:,} tokens)"
        if best.speedup < 1 + SAME_SPEED:
            return (f"for your chats: k 0 (plain decoding){self._llamacpp(self.baseline)}; no drafter is predicted to pay "
                    f"here, the best is {best.name} ×{best.speedup:.2f} {rests}")
        return f"for your chats: {best.drafter}, k {best.k}, ×{best.speedup:.2f} over k 0{self._llamacpp(best)} {rests}"

    def _llamacpp(self, arm: ArmResult) -> str:
        ratio = self.vs_llamacpp(arm)
        return "" if ratio is None else f", ×{ratio:.2f} vs llama.cpp plain"

    def checks(self) -> list[dict]:
        """Per reply: the arm it ran, its recorded accepted drafts and the replay's for that arm."""
        by_name = {arm.name: arm for arm in [self.baseline, *self.arms]}
        out = []
        for index, reply in enumerate(self.selection.replies):
            arm = by_name.get(replayed_arm_name(reply))
            out.append({
                "conversation": reply.conversation_id, "message": reply.message_id, "ran": reply.arm,
                "replayed_as": arm.name if arm else None,
                "recorded_accepted": sum(step.num_accepted for step in reply.recorded),
                "replayed_accepted": arm.per_reply[index][0] if arm else None,
                "recorded_steps": len(reply.recorded), "replayed_steps": arm.per_reply[index][1] if arm else None,
            })
        return out

    def as_dict(self) -> dict:
        return {"prediction": "replayed at T = 0 (exact acceptance) at the costs below", "costs": self.costs.as_dict(),
                "recommendation": self.recommendation(), "baseline": self._arm_dict(self.baseline),
                "arms": [self._arm_dict(arm) for arm in self.arms], "replies": len(self.selection.replies),
                "conversations": self.selection.conversations, "skipped": self.selection.skipped, "checks": self.checks()}

    def _arm_dict(self, arm: ArmResult) -> dict:
        return {**arm.as_dict(), "predicted_vs_llamacpp_plain": self.vs_llamacpp(arm)}


def replayed_arm_name(reply: ChatReply) -> str:
    """The replay's arm for the one a reply ran: suffix with history (the chat's default), ngram's default range."""
    settings = reply.settings
    method = settings.get("method") or next((s.method for s in reply.recorded if s.method), "")
    k = AUTO if settings.get("auto_k") else settings.get("k")
    if not method or k == 0 or k is None:
        return "k 0"
    cross = reply.cross_vocab_arm(k)  # a draft with another tokenizer: the replay's arm for its rule
    if cross is not None:
        return cross
    drafter = {"suffix": "suffix", "ngram": f"ngram 1-{LOOKUP_MAX}"}.get(method)
    return f"{drafter} k {k}" if drafter else ""


def advise(selection: Selection, costs: CostProfile, drafters: Sequence[Drafter] = COPY_DRAFTERS,
           ks: Sequence[int | str] = KS, progress: Callable[[int, int], None] | None = None,
           draft: DraftReplay | None = None) -> Advice:
    """Replay every drafter × k over the selection's replies (in order: suffix's history grows
    as it did) and charge each at `costs`; with `draft`, a draft model at every fixed k too.
    Reply by reply, every arm in turn: the arms share each reply's lookups and suffix walks
    (spectui.advise.lookups, spectui.advise.suffixes). progress(done, total) counts replies."""
    replies = selection.replies
    report = progress or (lambda done, total: None)
    lookups: dict[int, LookupTable] = {}
    suffixes = (ConversationWalks(replies), SharedHistory(replies))
    baseline = ArmResult("", 0)
    running: list[tuple[ArmResult, SharedLookup | SharedSuffix | None, AdaptiveK | None]] = [(baseline, None, None)]
    for drafter in drafters:
        for k in ks:
            proposer = drafter.build(lookups, suffixes)
            assert isinstance(proposer, SharedLookup | SharedSuffix)
            running.append((ArmResult(drafter.name, k), proposer, new_chooser(costs) if k == AUTO else None))
    charges: list[dict[tuple[bool, int, int], float]] = [{} for _ in running]  # each arm's seconds per step shape
    report(0, len(replies))
    for index, reply in enumerate(replies):
        for (result, proposer, chooser), charged in zip(running, charges, strict=True):
            if proposer is not None:
                proposer.reply = index
            if isinstance(result.k, int):  # fixed k (k 0 too): summed without its steps
                result.add_totals(replay_fixed(reply, proposer, result.k, costs, charged))
            else:
                assert proposer is not None
                result.add(replay_reply(reply, proposer, result.k, costs, chooser))
        for table in lookups.values():
            table.forget(index)
        report(index + 1, len(replies))
    arms = [result for result, _, _ in running[1:]]
    for arm in arms:
        arm.speedup = baseline.seconds / arm.seconds if arm.seconds else 1.0
    if draft is not None:
        arms += [draft_arm(replies, draft, k, costs, baseline) for k in ks if isinstance(k, int)]
    return Advice(costs, baseline, arms, selection)


def draft_arm(replies: Sequence[ChatReply], draft: DraftReplay, k: int, costs: CostProfile, baseline: ArmResult) -> ArmResult:
    """A draft model at a fixed k, teacher-forced (spectui.advise.draft_model)."""
    result = ArmResult(draft.name, k)
    for reply, predictions in zip(replies, draft.predictions, strict=True):
        result.add(replay_teacher_forced(reply, predictions, k, costs))
    result.speedup = baseline.seconds / result.seconds if result.seconds else 1.0
    return result


def replay_arm(replies: Sequence[ChatReply], drafter: Drafter | None, k: int | str, costs: CostProfile,
               lookups: dict[int, LookupTable] | None = None) -> ArmResult:
    """One arm over every reply, on one proposer (and one AdaptiveK for auto), as one engine
    would run them in a row; `lookups`: prompt lookup's matches shared with the other arms."""
    result = ArmResult(drafter.name if drafter else "", k)
    proposer = drafter.build(lookups) if drafter else NgramProposer()
    chooser = new_chooser(costs) if k == AUTO else None
    for index, reply in enumerate(replies):
        if isinstance(proposer, SharedLookup):
            proposer.reply = index
        result.add(replay_reply(reply, proposer, k if drafter else 0, costs, chooser))
    return result


def new_chooser(costs: CostProfile) -> AdaptiveK:
    """Adaptive k as the ggml engine builds it: the profile's v(2) is a slope timed on this
    machine, as ggml's at load."""
    return chooser_for(max(0.0, costs.rows_cost(2) - 1), timed=True, verify_piece=costs.piece)
