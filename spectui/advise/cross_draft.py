"""A draft model with another tokenizer (TLI, SLEM, --vocab auto) replayed exactly at T = 0.

One teacher-forced pass cannot give its drafts: its context is its own tokenization of the
text (DraftContext), rebuilt at every step's boundary, and SLEM's drafts are its text
re-tokenized by the target's tokenizer. So the replay runs the proposer the loop runs
(spectui.engines.speculative.slem.vocab_proposer, as --vocab tli|slem|auto builds it) over the
reply's true prefix, called as the loop calls it: the prompt read at the prefill, then
propose(prefix, min(k, room)) every step. At T = 0 the target keeps a draft while it equals the
reply, so every step is the real run's. The draft's cache lives as in a chat: kept from reply
to reply within a conversation, reset where one starts (the engine's forget_prompts), so even
the rounding of its batched forwards is the run's.

A step is charged its draft forwards (each at the profile's seconds per draft token) and its
verify's pieces; the draft's cost per target token it drafted (what -k auto measures) is the
arm's draft seconds over its drafts. Each rule × k is a real draft run: progress is per reply.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from spectui.advise.advice import Advice, ArmResult
from spectui.advise.chats import VOCAB_RULE_NAMES, ChatReply
from spectui.advise.costs import CostProfile
from spectui.advise.replay import ReplayedStep, ReplayInput
from spectui.engines.speculative.cached_model import CachedLogits, common_prefix_len
from spectui.engines.speculative.cross_vocab import DraftContext, Encode
from spectui.engines.speculative.proposers import Proposer

if TYPE_CHECKING:
    from spectui.engines.ggml.lib import LlamaModel
    from spectui.models.vocab_map import VocabMap

RULES = VOCAB_RULE_NAMES  # --vocab's rules, as the table names them (and a chat's row: chats.ChatReply.arm)
DRAFT_KS = (2, 4, 8)  # each k is a real draft run per rule: the default keeps a history's replay in minutes


@dataclass(frozen=True)
class CrossPair:
    """A draft of another tokenizer for the target: its name, the pair's map and both tokenizers."""

    name: str
    vocab: VocabMap
    encode: Encode  # the draft's tokenizer
    target_encode: Encode
    target_width: int

    def draft_ids(self, target_ids: Sequence[int]) -> list[int]:
        """The target's ids as the draft reads them (to time its forward at that length)."""
        return DraftContext(self.vocab, self.encode).ids_for(target_ids)


def draft_key(name: str) -> str:
    """The profile's draft_seconds key for this draft model (seconds per draft token)."""
    return f"draft:{name}"


def seconds_per_forward(costs: CostProfile, name: str) -> float | None:
    """This draft's seconds per forward (a draft token), None where the profile has not measured it."""
    return costs.draft_seconds.get(draft_key(name))


class CountedDraft:
    """The draft's cached model with its forwards counted: what a step pays for drafting."""

    def __init__(self, inner: CachedLogits) -> None:
        self.inner = inner
        self.forwards = 0

    @property
    def device(self) -> Any:
        return self.inner.device

    @property
    def arrays(self) -> str:
        return self.inner.arrays

    @property
    def seen(self) -> list[int]:
        return self.inner.seen

    @property
    def prefill_chunk(self) -> int | None:
        return self.inner.prefill_chunk

    @property
    def exact_rows(self) -> int | None:
        return self.inner.exact_rows

    def reset(self) -> None:
        self.inner.reset()

    def logits(self, token_ids: Sequence[int], num_rows: int) -> Any:
        self.forwards += 1
        return self.inner.logits(token_ids, num_rows)

    def prefill(self, token_ids: Sequence[int], stop: Callable[[], bool]) -> bool:
        return self.inner.prefill(token_ids, stop)


@dataclass
class CrossArm(ArmResult):
    """A cross-vocabulary draft at one rule and k; JSON marks the rule and the pair's overlap."""

    vocab: str = "tli"  # --vocab: tli, slem or auto
    overlap: float = 0.0  # the share of the draft's tokens the target holds
    kept: str | None = None  # auto: the rule its trial kept ("tli", "slem"); None while still trying both
    draft_seconds: float = 0.0  # drafting's share of seconds

    @property
    def per_target_token(self) -> float | None:
        """The draft's seconds per target token it drafted (as -k auto measures a draft's cost)."""
        return self.draft_seconds / self.drafted if self.drafted else None

    def as_dict(self) -> dict:
        return {**super().as_dict(), "vocab": self.vocab, "draft_vocabulary_shared": self.overlap,
                "auto_kept": self.kept, "draft_seconds_per_target_token": self.per_target_token}


def replay_cross_reply(reply: ReplayInput, proposer: Proposer, counted: CountedDraft, k: int, per_forward: float,
                       costs: CostProfile) -> tuple[list[ReplayedStep], float]:
    """The reply's steps at a fixed k as the loop runs the proposer (prefill, then one propose a
    step over the true prefix), and the drafting's seconds; the first step is the prefill's."""
    ids, prompt = reply.reply_ids, list(reply.prompt_ids)
    if not ids:
        return [], 0.0
    whole = prompt + list(ids)
    budget = len(ids) if reply.finish_reason == "length" else None
    if min(k, budget - 1 if budget is not None else k) > 0:  # the loop's prefill: only where the first step could draft
        proposer.prefill(prompt)
    steps = [ReplayedStep(0, 0, 0, 1, 0.0)]
    drafting = 0.0
    position = 1
    while position < len(ids):
        step_k = min(k, budget - position - 1) if budget is not None else k
        before = counted.forwards
        drafted = list(proposer.propose(whole[:len(prompt) + position], step_k, 0.0, 1.0, None).drafted) if step_k > 0 else []
        draft_seconds = (counted.forwards - before) * per_forward
        accepted = common_prefix_len(drafted, list(ids[position:]))
        emitted = min(accepted + 1, len(ids) - position)
        verify_steps, _ = costs.verify_steps(len(drafted), accepted)
        seconds = draft_seconds + verify_steps * costs.plain_seconds + costs.overhead_seconds
        steps.append(ReplayedStep(step_k, len(drafted), accepted, emitted, seconds))
        drafting += draft_seconds
        position += emitted
    return steps, drafting


def replay_cross_arm(replies: Sequence[ChatReply], pair: CrossPair, draft: CachedLogits, rule: str, k: int,
                     costs: CostProfile, progress: Callable[[int], None] | None = None,
                     steps_out: list[list[ReplayedStep]] | None = None) -> CrossArm:
    """One rule × k over every reply in order, on one proposer over `draft` (its cache reset at
    each conversation's start); steps_out, when given, gets each reply's steps."""
    from spectui.engines.speculative.slem import SlemProposer, vocab_proposer

    per_forward = seconds_per_forward(costs, pair.name)
    if per_forward is None:
        raise ValueError(f"the cost profile has no draft cost for {pair.name}")
    counted = CountedDraft(draft)
    proposer = vocab_proposer(counted, pair.target_width, pair.vocab, pair.encode, pair.target_encode, rule)
    arm = CrossArm(f"{pair.name} ({RULES[rule]})", k, vocab=rule, overlap=pair.vocab.draft_overlap)
    conversation = None
    for done, reply in enumerate(replies):
        if reply.conversation_id != conversation:
            proposer.reset()
            conversation = reply.conversation_id
        steps, drafting = replay_cross_reply(reply, proposer, counted, k, per_forward, costs)
        arm.add(steps)
        arm.draft_seconds += drafting
        if steps_out is not None:
            steps_out.append(steps)
        if progress is not None:
            progress(done + 1)
    if isinstance(proposer, SlemProposer) and rule == "auto" and proposer.greedy != "trial":
        arm.kept = proposer.greedy
    return arm


def cross_arms(replies: Sequence[ChatReply], pair: CrossPair, model: LlamaModel, ks: Sequence[int], costs: CostProfile,
               progress: Callable[[str, int, int], None] | None = None) -> list[CrossArm]:
    """Every rule × k over the replies on the draft's ggml model (one arm at a time: each holds
    its own cache); progress(arm, replies done, replies)."""
    from spectui.engines.ggml.cached import LlamaCached

    arms = []
    for rule in RULES:
        for k in ks:
            name = f"{pair.name} ({RULES[rule]}) k {k}"

            def report(done: int, name: str = name) -> None:
                if progress is not None:
                    progress(name, done, len(replies))

            arms.append(replay_cross_arm(replies, pair, LlamaCached(model), rule, k, costs, report))
    return arms


def with_cross_arms(advice: Advice, arms: Sequence[CrossArm]) -> Advice:
    """The advice with the cross-vocabulary arms added, each's speed over the same k = 0."""
    baseline = advice.baseline.seconds
    for arm in arms:
        arm.speedup = baseline / arm.seconds if arm.seconds else 1.0
    advice.arms.extend(arms)
    return advice


def cross_lines(pair: CrossPair, arms: Sequence[CrossArm], costs: CostProfile) -> list[str]:
    """What the table's rows rest on: the overlap, the draft's costs, and what --vocab auto keeps."""
    per_forward = seconds_per_forward(costs, pair.name) or 0.0
    lines = [f"{pair.name} drafts across vocabularies ({pair.vocab.draft_overlap:.0%} of its tokens shared), replayed "
             f"step by step with its real proposer; a draft forward {per_forward * 1000:.1f} ms"]
    costs_by = ", ".join(f"{RULES[arm.vocab]} k {arm.k} {arm.per_target_token * 1000:.1f} ms"
                         for arm in arms if arm.vocab != "auto" and arm.per_target_token is not None)
    if costs_by:
        lines.append(f"the draft's cost per target token drafted: {costs_by}")
    auto = [arm for arm in arms if arm.vocab == "auto"]
    if auto:
        kept = ", ".join(f"k {arm.k}: {RULES[arm.kept] if arm.kept else 'still trying both'}" for arm in auto)
        lines.append(f"--vocab auto (its first 8 greedy steps of each, then the one that wrote more a step) keeps {kept}")
    return lines


def parse_draft_ks(text: str) -> tuple[int, ...]:
    """--draft-k: "2,4,8" or a range "1-8"; each k 1 … 8."""
    from spectui.core.errors import UsageError

    ks: list[int] = []
    try:
        for part in text.split(","):
            low, _, high = part.strip().partition("-")
            ks += range(int(low), int(high or low) + 1)
    except ValueError:
        raise UsageError(f"--draft-k {text!r}: ks as 2,4,8 or 1-8") from None
    if not ks or min(ks) < 1 or max(ks) > 8:
        raise UsageError(f"--draft-k {text!r}: each k from 1 to 8")
    return tuple(sorted(set(ks)))
