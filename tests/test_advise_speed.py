"""The replay's shortcuts give what the engine's own proposers give, and the speed benchmark runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dataclasses import replace

from spectui.advise.advice import COPY_DRAFTERS, KS, Drafter, advise, replay_arm
from spectui.advise.costs import CostProfile
from spectui.advise.lookups import LookupTable, SharedLookup
from spectui.advise.replay import ReplyTotals, replay_fixed, replay_reply
from spectui.advise import shared_history
from spectui.advise import suffixes as shared_suffixes
from spectui.advise.suffixes import ConversationWalks, SharedHistory, SharedSuffix
from spectui.engines.speculative import suffix
from spectui.engines.speculative.proposers import NgramProposer
from spectui.engines.speculative.suffix import SuffixProposer

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from advise_speed import synthetic_history  # noqa: E402

COSTS = CostProfile("m", "test", 0.01, {1: 1.0, 2: 1.5, 3: 2.0}, piece=3, draft_seconds={"suffix": 0.0002})
# every part of a step's seconds, in amounts whose sum depends on its order
UNEVEN = CostProfile("m", "test", 0.0376, {1: 1.0, 2: 1.77, 3: 2.49}, piece=3, draft_seconds={"suffix": 0.0002, "ngram": 0.00003},
                     overhead_seconds=0.2)


@pytest.mark.parametrize("lookup", [(1, 8), (3, 8), (2, 4)])
def test_a_shared_lookup_drafts_what_prompt_lookup_drafts_at_every_k(lookup):
    reply = synthetic_history(1).replies[0]
    table = LookupTable(lookup[1])
    shared, own = SharedLookup(table, lookup[0]), NgramProposer(*lookup)
    for position in range(0, len(reply.reply_ids), 7):
        context = list(reply.prompt_ids) + list(reply.reply_ids[:position])
        for k in (3, 1, 8, 12, 0):  # narrower first, then wider than the table holds
            mine, theirs = shared.propose(context, k, 0.0, 1.0, None), own.propose(context, k, 0.0, 1.0, None)
            assert (mine.drafted, mine.evidence) == (theirs.drafted, theirs.evidence)


def test_arms_sharing_lookups_replay_as_arms_that_look_up_alone():
    replies = synthetic_history(1).replies
    lookups: dict[int, LookupTable] = {}
    for drafter in COPY_DRAFTERS[2:]:
        for k in (2, "auto"):
            shared, alone = replay_arm(replies, drafter, k, COSTS, lookups), replay_arm(replies, drafter, k, COSTS)
            assert shared == alone
    assert lookups[8].found  # they did share


@pytest.mark.parametrize("history", [True, False])
def test_a_shared_suffix_drafts_what_suffix_decoding_drafts_at_every_k(history):
    replies = synthetic_history(3).replies
    walks = ConversationWalks(replies)
    shared, own = SharedSuffix(walks, history), SuffixProposer(use_history=history)
    differs = 0
    for index, reply in enumerate(replies):
        shared.reply = index
        shared.prefill(list(reply.prompt_ids))
        own.prefill(list(reply.prompt_ids))
        for position in range(0, len(reply.reply_ids), 5):
            context = list(reply.prompt_ids) + list(reply.reply_ids[:position])
            for k in (3, 1, 8, 12, 2):  # narrower first, then wider than the walks were walked at
                mine, theirs = shared.propose(context, k, 0.0, 1.0, None), own.propose(context, k, 0.0, 1.0, None)
                assert (mine.drafted, mine.evidence) == (theirs.drafted, theirs.evidence)
                differs += k < 8 and mine.drafted != own.propose(context, 8, 0.0, 1.0, None).drafted[:k]
    assert differs  # some narrower drafts are not the first k of the wider one: each k was cut on its own


@pytest.mark.parametrize("window", [None, 30])
def test_arms_that_read_replies_to_different_depths_draft_from_one_history_what_each_drafts_from_its_own(window, monkeypatch):
    """SharedHistory against each arm's own SuffixProposer: arms that stop reading each reply at
    another step (their histories differ in every reply's last tokens) draft the same at every k,
    also where a token's occurrences pass the window of the last MAX_OCCURRENCES (30 here: an
    arm lacking some of the latest reaches further back)."""
    if window is not None:
        for module in (shared_history, shared_suffixes, suffix):
            monkeypatch.setattr(module, "MAX_OCCURRENCES", window)
    replies = [replace(reply, reply_ids=reply.reply_ids[:140]) for reply in synthetic_history(5).replies]
    walks, history = ConversationWalks(replies), SharedHistory(replies)
    arms = [(SharedSuffix(walks, True, history), SuffixProposer()) for _ in range(4)]
    for index, reply in enumerate(replies):
        for arm, ((shared, own), stop) in enumerate(zip(arms, (1, 4, 9, 2), strict=True)):
            shared.reply = index
            shared.prefill(list(reply.prompt_ids))
            own.prefill(list(reply.prompt_ids))
            for position in range(arm % 3, len(reply.reply_ids) - stop, 3):
                context = list(reply.prompt_ids) + list(reply.reply_ids[:position])
                for k in (8, 1, 3):
                    mine, theirs = shared.propose(context, k, 0.0, 1.0, None), own.propose(context, k, 0.0, 1.0, None)
                    assert (mine.drafted, mine.evidence) == (theirs.drafted, theirs.evidence), (index, arm, position, k)
    assert history.differ and not history.alone  # the histories did differ, and were shared
    if window is not None:
        assert any(len(places) > window for places in history.index.occurrences.values())


@pytest.mark.parametrize("k", [0, 1, 3, 8])
def test_a_fixed_k_summed_without_its_steps_sums_what_the_steps_replayed_by_the_engines_proposers_sum(k):
    """replay_fixed (advise's fixed k: shared drafts read in place, no step objects) against
    replay_reply over the engine's own proposers, step sums and seconds bit for bit, a reply
    cut by its budget among them."""
    selection = synthetic_history(3)
    selection.replies[:] = [replace(reply, reply_ids=reply.reply_ids[:150]) for reply in selection.replies]
    selection.replies[1] = replace(selection.replies[1], reply_ids=selection.replies[1].reply_ids[:60], finish_reason="length")
    replies = selection.replies
    suffixes = (ConversationWalks(replies), SharedHistory(replies))
    for drafter in [*COPY_DRAFTERS, Drafter("ngram 2-4", "ngram", lookup=(2, 4))]:
        shared, own, charges = drafter.build({}, suffixes), drafter.build(), {}
        for index, reply in enumerate(replies):
            shared.reply = index
            totals = replay_fixed(reply, shared if k else None, k, UNEVEN, charges)
            steps = replay_reply(reply, own, k, UNEVEN)[1:]
            assert totals == ReplyTotals(sum(s.emitted for s in steps), len(steps), sum(s.drafted for s in steps),
                                         sum(s.accepted for s in steps), sum(s.coloured for s in steps),
                                         sum(s.seconds for s in steps), len(steps) + 1), (drafter.name, index)
            assert k == 0 or totals.drafted


@pytest.mark.slow
def test_the_replay_of_every_arm_equals_each_arm_replayed_alone_by_the_engines_proposers():
    """advise's shortcuts (shared lookups and walks, reply by reply) against every arm replayed on
    its own with NgramProposer and SuffixProposer, over chats whose replies repeat earlier ones
    (suffix's history drafts), one of them cut by its budget."""
    selection = synthetic_history(4)
    selection.replies[:] = [replace(reply, reply_ids=reply.reply_ids[:180]) for reply in selection.replies]
    selection.replies[2] = replace(selection.replies[2], reply_ids=selection.replies[2].reply_ids[:120], finish_reason="length")
    drafters = [*COPY_DRAFTERS, Drafter("ngram 2-4", "ngram", lookup=(2, 4))]
    advice = advise(selection, COSTS, drafters)
    baseline = replay_arm(selection.replies, None, 0, COSTS)
    assert advice.baseline == baseline
    alone = [replay_arm(selection.replies, drafter, k, COSTS) for drafter in drafters for k in KS]
    for arm in alone:
        arm.speedup = baseline.seconds / arm.seconds
    assert [arm.name for arm in advice.arms] == [arm.name for arm in alone]
    assert advice.arms == alone
    assert any(arm.accepted for arm in alone if arm.drafter == "suffix")


def test_the_speed_benchmark_runs():
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "advise_speed.py"), "--tiny"],
                         capture_output=True, text=True, timeout=120, check=True)
    assert "3 chats" in run.stdout and "s of CPU; digest" in run.stdout and "for your chats:" in run.stdout
