"""How long `spectui advise` takes to replay a history: N synthetic chats built from real token ids.

    python benchmarks/advise_speed.py [--chats 100] [--tiny] [--draft MODEL [--fresh]]

Each chat is one reply to one of the attached-file chat's prompts (benchmarks/bench/chat-ids.json,
qwen2.5-coder-1.5b's ids), its reply two of that chat's real replies joined, a few tokens in
twenty changed at random (a fixed seed per chat) so the chats are alike but not copies. Every
copy drafter × k (0 … 8 and auto) is replayed over them in order, as `spectui advise` does
(spectui.advise.advice.advise), at the quiet 2-core box's Q4_K_M costs. It prints the replay's
CPU seconds (time.process_time: the box is shared, wall-clock measures the neighbours) and a
digest of every arm's numbers, so a faster replay can be shown to give the same advice.
--tiny: 3 chats, for the test that keeps this script running.

--draft MODEL (a cached GGUF sharing the target's tokens, e.g. qwen2.5-coder-0.5b): also the
draft's teacher-forced pass over the same chats (spectui.advise.draft_model.all_predictions, what
`spectui advise --draft` runs), its CPU and wall seconds, the tokens it decoded (prompts
included), CPU seconds per 1,000 of them, and a digest of the predictions; --fresh decodes every
reply from an empty cache (no prompt kept from the reply before): the digest must not change.
With --tiny, two chats cut to their prompts' last 48 tokens and replies' first 24.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
import time
from dataclasses import replace
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


def tiny_draft_history() -> Selection:
    """Two chats short enough for a test to teacher-force on a real model in a few seconds."""
    selection = synthetic_history(2)
    selection.replies[:] = [replace(reply, prompt_ids=reply.prompt_ids[-48:], reply_ids=reply.reply_ids[:24])
                            for reply in selection.replies]
    return selection


def teacher_forced(name: str, selection: Selection, fresh: bool) -> None:
    """The draft's teacher-forced pass over the selection, timed, with its progress on stderr."""
    from spectui.advise.draft_model import all_predictions, greedy_predictions
    from spectui.advise.measure import cached_gguf
    from spectui.engines.ggml.lib import LlamaModel
    from spectui.models.registry import resolve

    draft = LlamaModel(cached_gguf(resolve(name)).gguf)
    decoded = [0]

    def progress(done: int, total: int) -> None:
        decoded[0] = done
        print(f"\r  teacher-forcing: {done:,}/{total:,} tokens", end="", file=sys.stderr, flush=True)

    try:
        cpu, wall = time.process_time(), time.perf_counter()
        if fresh:
            predictions = []
            for reply in selection.replies:
                predictions.append(greedy_predictions(draft, reply.prompt_ids, reply.reply_ids))
                decoded[0] += len(reply.prompt_ids) + len(reply.reply_ids) - 1
        else:
            predictions = all_predictions(draft, selection.replies, None, progress)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    finally:
        draft.close()
    print(file=sys.stderr)
    tokens = decoded[0]
    hashed = hashlib.sha256(json.dumps(predictions).encode()).hexdigest()[:16]
    print(f"draft {name} teacher-forced ({'every reply from an empty cache' if fresh else 'prompts kept'}, "
          f"{draft.threads} threads, batch {draft.batch}): {tokens:,} tokens decoded, {cpu:.1f} s of CPU "
          f"({1000 * cpu / max(1, tokens):.2f} s per 1,000 tokens), {wall:.1f} s wall; digest {hashed}")


def digest(advice: Advice) -> str:
    """Every arm's numbers, hashed: equal digests, equal advice."""
    arms = [arm.as_dict() | {"per_reply": arm.per_reply} for arm in [advice.baseline, *advice.arms]]
    return hashlib.sha256(json.dumps(arms, sort_keys=True).encode()).hexdigest()[:16]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chats", type=int, default=100, help="synthetic conversations (default 100)")
    parser.add_argument("--tiny", action="store_true", help="3 chats: a quick check that it runs")
    parser.add_argument("--draft", metavar="MODEL", help="also time this cached draft model's teacher-forced pass")
    parser.add_argument("--fresh", action="store_true", help="--draft: every reply from an empty cache")
    args = parser.parse_args()
    selection = synthetic_history(3 if args.tiny else args.chats)
    tokens = sum(len(reply.reply_ids) for reply in selection.replies)
    start = time.process_time()
    advice = advise(selection, COSTS)
    cpu = time.process_time() - start
    print(f"{len(selection.replies)} chats, {tokens:,} reply tokens, {len(advice.arms) + 1} arms: "
          f"{cpu:.2f} s of CPU; digest {digest(advice)}")
    print(advice.recommendation())
    if args.draft:
        teacher_forced(args.draft, tiny_draft_history() if args.tiny else selection, args.fresh)


if __name__ == "__main__":
    main()
