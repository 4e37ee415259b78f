"""How long `spectui advise` takes to replay a history: N synthetic chats built from real token ids.

    python benchmarks/advise_speed.py [--chats 100] [--tiny]

Each chat is one reply to one of the attached-file chat's prompts (benchmarks/bench/chat-ids.json,
qwen2.5-coder-1.5b's ids), its reply two of that chat's real replies joined, a few tokens in
twenty changed at random (a fixed seed per chat) so the chats are alike but not copies. Every
copy drafter × k (0 … 8 and auto) is replayed over them in order, as `spectui advise` does
(spectui.advise.advice.advise), at the quiet 2-core box's Q4_K_M costs. It prints the replay's
CPU seconds (time.process_time: the box is shared, wall-clock measures the neighbours) and a
digest of every arm's numbers, so a faster replay can be shown to give the same advice.
--tiny: 3 chats, for the test that keeps this script running.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from spectui.advise.advice import Advice, advise  # noqa: E402
from spectui.advise.chats import ChatReply, Selection  # noqa: E402
from spectui.advise.costs import CostProfile  # noqa: E402

IDS = HERE / "bench" / "chat-ids.json"
# the quiet box's Q4_K_M verify for the 1.5B target (/work/shared/DESIGN.md 6b): pieces of 3
COSTS = CostProfile("qwen2.5-coder-1.5b", "ggml Q4_K_M · 2 threads", 0.0376, {1: 1.0, 2: 1.77, 3: 2.49}, piece=3,
                    draft_seconds={"suffix": 0.0002, "ngram": 0.00002})
CHANGED = 0.05  # the share of a synthetic reply's tokens replaced


def synthetic_history(chats: int, seed: int = 0) -> Selection:
    """`chats` one-reply conversations from the saved chat's prompts and replies."""
    turns = json.loads(IDS.read_text(encoding="utf-8"))["turns"]
    selection = Selection(conversations=chats)
    for chat in range(chats):
        rng = random.Random(seed * 100_003 + chat)
        turn = turns[1 + chat % 2]
        reply = list(turn["reply"]) + list(turns[0]["reply"])
        vocabulary = sorted(set(reply))
        for index in range(len(reply)):
            if rng.random() < CHANGED:
                reply[index] = rng.choice(vocabulary)
        selection.replies.append(ChatReply(tuple(turn["prompt"]), tuple(reply), "stop", conversation_id=chat + 1,
                                           message_id=chat + 1))
    return selection


def digest(advice: Advice) -> str:
    """Every arm's numbers, hashed: equal digests, equal advice."""
    arms = [arm.as_dict() | {"per_reply": arm.per_reply} for arm in [advice.baseline, *advice.arms]]
    return hashlib.sha256(json.dumps(arms, sort_keys=True).encode()).hexdigest()[:16]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chats", type=int, default=100, help="synthetic conversations (default 100)")
    parser.add_argument("--tiny", action="store_true", help="3 chats: a quick check that it runs")
    args = parser.parse_args()
    selection = synthetic_history(3 if args.tiny else args.chats)
    tokens = sum(len(reply.reply_ids) for reply in selection.replies)
    start = time.process_time()
    advice = advise(selection, COSTS)
    cpu = time.process_time() - start
    print(f"{len(selection.replies)} chats, {tokens:,} reply tokens, {len(advice.arms) + 1} arms: "
          f"{cpu:.2f} s of CPU; digest {digest(advice)}")
    print(advice.recommendation())


if __name__ == "__main__":
    main()
