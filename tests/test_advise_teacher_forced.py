"""The draft model's teacher-forced pass (spectui.advise.draft_model): the replies of one
conversation share their prompts' prefix, and all_predictions decodes it once, batch by batch
with progress, giving every reply the predictions a pass from an empty cache gives."""

from __future__ import annotations

from dataclasses import replace

import numpy
import pytest

from spectui.advise.draft_model import all_predictions, greedy_predictions
from spectui.advise.replay import ReplayInput

VOCAB = 50


class CacheDraft:
    """A LlamaModel's decode/keep/clear over a list of cached ids: each row's argmax is a
    function of the whole context it follows, so a row computed on a wrong cache shows."""

    def __init__(self, batch: int) -> None:
        self.batch = batch
        self.ids: list[int] = []
        self.decoded: list[int] = []  # tokens per decode call
        self.restored: list[int] = []  # positions of each saved cache restored

    @property
    def cached(self) -> int:
        return len(self.ids)

    def decode(self, tokens: list[int], rows: int) -> numpy.ndarray:
        assert len(tokens) <= self.batch or rows == 0
        out = numpy.zeros((rows, VOCAB), dtype=numpy.float32)
        for index, token in enumerate(tokens):
            self.ids.append(token)
            row = index - (len(tokens) - rows)
            if row >= 0:
                out[row, hash(tuple(self.ids)) % VOCAB] = 1.0
        self.decoded.append(len(tokens))
        return out

    def decode_argmax(self, tokens: list[int], width: int | None) -> list[int]:
        assert len(tokens) <= self.batch
        return self.decode(tokens, len(tokens))[:, :width].argmax(axis=1).tolist()

    def save_state(self) -> tuple[list[int], int]:
        return list(self.ids), len(self.ids)

    def load_state(self, saved: tuple[list[int], int]) -> None:
        self.ids = list(saved[0])
        self.restored.append(saved[1])

    def keep(self, positions: int) -> None:
        del self.ids[positions:]

    def clear(self) -> None:
        self.ids.clear()


def conversation() -> list[ReplayInput]:
    """Three turns of one chat (each prompt the last prompt, its reply and a question), then another chat."""
    prompt, replies = [1, 2, 3, 4, 5], []
    for turn in range(3):
        reply = tuple(10 + (turn * 7 + i) % 30 for i in range(9 + turn))
        replies.append(ReplayInput(tuple(prompt), reply))
        prompt = [*prompt, *reply, 40 + turn, 41]
    replies.append(ReplayInput((1, 2, 9, 9), (12, 13, 14)))
    return replies


@pytest.mark.parametrize("batch", [1, 4, 512])
def test_a_conversation_decoded_on_one_cache_predicts_what_each_reply_alone_predicts(batch):
    replies = conversation()
    fresh = [greedy_predictions(CacheDraft(batch), r.prompt_ids, r.reply_ids) for r in replies]
    assert [len(p) for p in fresh] == [len(r.reply_ids) for r in replies]
    draft, seen = CacheDraft(batch), []
    shared = all_predictions(draft, replies, None, lambda done, total: seen.append((done, total)))
    assert shared == fresh
    # each later turn decoded only what followed the last one's prompt and reply, the other chat
    # what followed their common start
    ids = [[*r.prompt_ids, *r.reply_ids[:-1]] for r in replies]
    expected = len(ids[0]) + sum(len(ids[i]) - (len(ids[i - 1]) if i < 3 else 2) for i in range(1, 4))
    assert sum(draft.decoded) == expected
    assert seen[-1] == (expected, expected)
    assert len(seen) == len(draft.decoded) and all(b[0] > a[0] for a, b in zip(seen, seen[1:], strict=False))


def test_a_prompt_that_begins_as_an_earlier_conversations_restores_its_cache_not_the_last_ones():
    """One-reply chats on two turns' prompts in turn (advise_speed's synthetic history): the
    second turn's prompt holds the first's and its true reply, which the chat before (a first
    turn with another reply) does not; its cache, saved the first time, is restored."""
    first, question = (1, 2, 3, 4, 5), (40, 41)
    true_reply = tuple(range(10, 22))
    second = (*first, *true_reply, *question)
    replies = [ReplayInput(first, (10, 30, 12, 13)), ReplayInput(second, (20, 21, 22)),
               ReplayInput(first, (10, 31, 12, 13)), ReplayInput(second, (23, 24, 25))]
    fresh = [greedy_predictions(CacheDraft(4), r.prompt_ids, r.reply_ids) for r in replies]
    draft, seen = CacheDraft(4), []
    assert all_predictions(draft, replies, None, lambda done, total: seen.append((done, total))) == fresh
    assert draft.restored == [len(second) - 1]  # the last chat's prompt: restored once, not decoded again
    # decoded: the first chat; the second past the first's prompt and reply's first token; the
    # third's prompt's last token and reply; the fourth's (its prompt restored) likewise
    expected = (len(first) + 3) + (len(second) + 2 - len(first) - 1) + (1 + 3) + (1 + 2)
    assert sum(draft.decoded) == expected and seen[-1] == (expected, expected)


def test_a_cache_cleared_behind_the_pass_is_decoded_again_not_trusted():
    replies = conversation()[:2]
    draft, cached = CacheDraft(8), []
    greedy_predictions(draft, replies[0].prompt_ids, replies[0].reply_ids, None, cached)
    draft.clear()  # e.g. the draft's cost measured on the same model between two passes
    second = greedy_predictions(draft, replies[1].prompt_ids, replies[1].reply_ids, None, cached)
    assert second == greedy_predictions(CacheDraft(8), replies[1].prompt_ids, replies[1].reply_ids)


@pytest.mark.real_weights
@pytest.mark.usefixtures("fetched_ggufs")
def test_smollm2_teacher_forced_on_one_cache_equals_each_reply_from_an_empty_cache():
    """The real kernels: rows after a kept prefix, in other batch boundaries, or after a saved
    cache restored, are the rows a fresh decode computes (LlamaModel's batch_invariant), so the
    argmax is the same."""
    pytest.importorskip("llama_cpp_py_sync")
    from spectui.advise.measure import cached_gguf
    from spectui.engines.ggml.lib import LlamaModel
    from spectui.models.registry import resolve

    rng = numpy.random.default_rng(5)
    prompt, replies = [int(t) for t in rng.integers(100, 20_000, 40)], []
    for _ in range(2):
        reply = tuple(int(t) for t in rng.integers(100, 20_000, 30))
        replies.append(ReplayInput(tuple(prompt), reply))
        prompt = [*prompt, *reply, *(int(t) for t in rng.integers(100, 20_000, 5))]
    # the same two prompts with other replies: the second's cache is restored (PromptStates)
    replies += [replace(r, reply_ids=tuple(int(t) for t in rng.integers(100, 20_000, 30))) for r in replies]
    model = LlamaModel(cached_gguf(resolve("smollm2-135m")).gguf, threads=1, batch=16)
    try:
        fresh = [greedy_predictions(model, r.prompt_ids, r.reply_ids) for r in replies]
        shared = all_predictions(model, replies, None)
    finally:
        model.close()
    assert shared == fresh
