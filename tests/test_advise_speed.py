"""The replay's shortcuts give what the engine's own proposers give, and the speed benchmark runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from spectui.advise.advice import COPY_DRAFTERS, replay_arm
from spectui.advise.costs import CostProfile
from spectui.advise.lookups import LookupTable, SharedLookup
from spectui.engines.speculative.proposers import NgramProposer

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from advise_speed import synthetic_history  # noqa: E402

COSTS = CostProfile("m", "test", 0.01, {1: 1.0, 2: 1.5, 3: 2.0}, piece=3, draft_seconds={"suffix": 0.0002})


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


def test_the_speed_benchmark_runs():
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "advise_speed.py"), "--tiny"],
                         capture_output=True, text=True, timeout=120, check=True)
    assert "3 chats" in run.stdout and "s of CPU; digest" in run.stdout and "for your chats:" in run.stdout
