"""A draft model replayed teacher-forced: one forward pass over prompt + reply gives the draft's
greedy token after every true prefix, and that is all a T = 0 replay needs.

Draft j of a step matters only while drafts 1 … j−1 matched the reply, so its context is the
reply's own prefix: the step at position p keeps the run of positions p, p+1, … where the
draft's argmax equals the reply's token, up to k. Every step drafts k (the loop's fixed k asks
the draft model for k tokens) and pays k draft tokens at the profile's cost per token. Adaptive
k is not replayed for a draft model: its confidence floor reads the draft's probabilities
chain by chain, which the one pass does not keep.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from spectui.advise.costs import CostProfile
from spectui.advise.replay import ReplayedStep, ReplayInput

if TYPE_CHECKING:
    from spectui.engines.ggml.lib import LlamaModel


def greedy_predictions(draft: LlamaModel, prompt: Sequence[int], reply: Sequence[int],
                       target_width: int | None = None, cached: list[int] | None = None,
                       progress: Callable[[int], None] | None = None, states: PromptStates | None = None) -> list[int]:
    """The draft's argmax after prompt + reply[:i] for every i in 0 … len(reply)−1: one decode of
    prompt + reply, a batch at a time, the prompt's rows not read and the reply's argmax read in
    place (LlamaModel.decode_argmax). cached: the ids the draft's cache holds (this updates it),
    kept where they begin this prompt (a conversation's replies share their prefix; rows are exact
    whatever the cache before them, LlamaModel's batch_invariant); None: an empty cache. states:
    earlier prompts' caches, one restored where it keeps more (this adds the prompt's).
    progress(tokens): after each batch, how many tokens it decoded."""
    ids = [*prompt, *reply[:-1]]
    first = len(prompt) - 1  # the first row read: after the prompt's last token
    kept = 0 if cached is None else kept_prefix(cached, ids, first, draft.cached)
    saved, restored = states.best(ids, first) if states is not None else (None, 0)
    if saved is not None and restored > kept:
        draft.load_state(saved)
        kept = restored
    if kept:
        draft.keep(kept)
    else:
        draft.clear()
    for start in range(kept, first, draft.batch):  # the prompt's rest: no rows read
        chunk = ids[start:min(start + draft.batch, first)]
        draft.decode(chunk, 0)
        if progress is not None:
            progress(len(chunk))
    if states is not None and kept < first:
        states.add(ids[:first], draft.save_state())
    predictions: list[int] = []
    for start in range(first, len(ids), draft.batch):
        chunk = ids[start:start + draft.batch]
        predictions += draft.decode_argmax(chunk, target_width)
        if progress is not None:
            progress(len(chunk))
    if cached is not None:
        cached[:] = ids
    return predictions


class PromptStates:
    """The draft's cache as it was after a few recent prompts (LlamaModel.save_state), so that a
    reply whose prompt begins as an earlier one's rather than as the last reply's (another
    conversation on the same system prompt and attached file) restores it instead of decoding
    it again. state: None where only the ids are followed (all_predictions counting its work)."""

    def __init__(self, most: int = 4) -> None:
        self.most = most
        self.saved: list[tuple[list[int], Any]] = []  # (the ids cached, the state), the latest last

    def best(self, ids: Sequence[int], first: int) -> tuple[Any, int]:
        """(the state that keeps most of ids, the positions it keeps); (None, 0): none keeps any."""
        best, kept = None, 0
        for held, state in self.saved:
            same = kept_prefix(held, ids, first, len(held))
            if same > kept:
                best, kept = state, same
        return best, kept

    def add(self, ids: list[int], state: Any) -> None:
        self.saved.append((ids, state))
        del self.saved[:-self.most]


def kept_prefix(cached: Sequence[int], ids: Sequence[int], first: int, held: int) -> int:
    """Positions of the cache a decode of `ids` keeps: the common prefix, short of the first row
    read (that row's logits come from its own decode), within what the cache holds."""
    same = 0
    for have, want in zip(cached[:min(first, held)], ids, strict=False):
        if have != want:
            break
        same += 1
    return same


def replay_teacher_forced(reply: ReplayInput, predictions: Sequence[int], k: int,
                          costs: CostProfile) -> list[ReplayedStep]:
    """The loop's steps at a fixed k for a draft whose greedy tokens are `predictions`."""
    ids = reply.reply_ids
    budget = len(ids) if reply.finish_reason == "length" else None
    steps = [ReplayedStep(0, 0, 0, 1, 0.0)]
    position = 1
    while position < len(ids):
        room = budget - position - 1 if budget is not None else len(ids) + 64
        step_k = min(k, room)
        accepted = 0
        while accepted < step_k and position + accepted < len(ids) and predictions[position + accepted] == ids[position + accepted]:
            accepted += 1
        emitted = min(accepted + 1, len(ids) - position)
        verify_steps, _ = costs.verify_steps(step_k, accepted)
        seconds = step_k * costs.draft_cost("draft") + verify_steps * costs.plain_seconds + costs.overhead_seconds
        steps.append(ReplayedStep(step_k, step_k, accepted, emitted, seconds))
        position += emitted
    return steps


def all_predictions(draft: LlamaModel, replies: Sequence[ReplayInput], target_width: int | None,
                    progress: Callable[[int, int], None] | None = None) -> list[list[int]]:
    """Every reply's teacher-forced predictions, in order, on one cache: a reply whose prompt
    begins with the last one's prompt and reply (the next turn of its conversation) decodes only
    the rest, and one whose prompt begins as a recent earlier prompt restores that prompt's cache
    (PromptStates). progress(done, total) in tokens decoded, after every batch."""
    total, before, seen = 0, [], PromptStates()
    for reply in replies:  # the tokens each will decode, as greedy_predictions chooses, for the progress's total
        ids, first = [*reply.prompt_ids, *reply.reply_ids[:-1]], len(reply.prompt_ids) - 1
        kept = kept_prefix(before, ids, first, len(before))
        kept = max(kept, seen.best(ids, first)[1])
        if kept < first:
            seen.add(ids[:first], None)
        total += len(ids) - kept
        before = ids
    done = 0

    def decoded(tokens: int) -> None:
        nonlocal done
        done += tokens
        if progress is not None:
            progress(done, total)

    cached: list[int] = []
    states = PromptStates()
    draft.clear()
    return [greedy_predictions(draft, reply.prompt_ids, reply.reply_ids, target_width, cached, decoded, states)
            for reply in replies]


def draft_token_seconds(draft: LlamaModel, context: Sequence[int], rounds: int = 7) -> float:
    """The draft's seconds per drafted token at len(context) cached tokens (the fastest of a few:
    on a shared machine the rest measure the neighbours)."""
    import time

    ids = list(context) or [0] * 16
    draft.clear()
    draft.decode(ids[:-1] or ids, 1)
    times = []
    for _ in range(rounds):
        draft.keep(max(1, len(ids) - 1))
        started = time.perf_counter()
        draft.decode(ids[-1:], 1)
        times.append(time.perf_counter() - started)
    return min(times)
