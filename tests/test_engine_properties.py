"""The embedded loop under random k schedules: k changing mid-reply, auto k turned on and off,
a cancel at a random step, a stop token anywhere. At T = 0 the reply is transformers' greedy
reply, stop token included, and every figure recomputes from the reply's JSON record alone."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from spectui.core.events import Control, Done, GenerationParams, Source
from spectui.core.record import reply_record, step_from_record, step_record
from spectui.core.stats import summarize
from spectui.engines.speculative.proposers import NgramProposer
from spectui.engines.torch_backend.backend import torch_draft_proposer
from test_engine import PROMPTS, greedy_reference, make_engine

MAX_TOKENS = 40
REPLY_PROMPTS = PROMPTS + ["a b c a b c a b c a b"]  # one that prompt lookup copies from


@pytest.fixture(scope="module")
def replies(tiny_target, tiny_tokenizer, tiny_draft):
    """What every example needs: the engine for a method, and transformers' greedy reply
    (cached per prompt and stop tokens)."""
    references = {}

    def engine(method, stop_ids):
        proposer = {"draft": lambda: torch_draft_proposer(tiny_draft), "self": lambda: torch_draft_proposer(tiny_target),
                    "ngram": lambda: NgramProposer(1, 3)}[method]()
        engine = make_engine(tiny_target, tiny_tokenizer, proposer)
        engine.stop_ids = set(stop_ids) if stop_ids else engine.stop_ids
        return engine

    def reference(prompt_ids, stop_ids):
        key = (tuple(prompt_ids), tuple(sorted(stop_ids)))
        if key not in references:
            references[key] = greedy_reference(tiny_target, prompt_ids, MAX_TOKENS, stop_ids)
        return references[key]

    return engine, reference


def drive(engine, prompt_ids, ks, autos, cancel_at):
    """One reply; after step i the control takes ks[i] and autos[i] (cycling), and is cancelled
    after step cancel_at."""
    control = Control(k=ks[0], auto=autos[0])
    steps = []
    for item in engine.stream_ids(prompt_ids, GenerationParams(max_tokens=MAX_TOKENS), control):
        if isinstance(item, Done):
            return steps, item
        steps.append(item)
        control.live.update(k=ks[len(steps) % len(ks)], auto=autos[len(steps) % len(autos)])
        if len(steps) == cancel_at:
            control.cancel()
    raise AssertionError("the stream ended without a Done")


def recomputed(record: dict) -> dict:
    """The reply's figures from its JSON steps alone, by plain arithmetic."""
    steps = record["steps"]
    drafted = sum(step["num_drafted"] for step in steps)
    accepted = sum(step["num_accepted"] for step in steps)
    offered, kept = [], []
    for step in steps:
        for position in range(step["num_drafted"]):
            if position == len(offered):
                offered.append(0)
                kept.append(0)
            offered[position] += 1
            kept[position] += position < step["num_accepted"]
    return {
        "num_steps": len(steps),
        "num_tokens": sum(len(step["token_ids"]) for step in steps),
        "num_drafted": drafted,
        "num_accepted": accepted,
        "gamma": accepted / drafted if drafted else None,
        "per_position_acceptance": [k / o for k, o in zip(kept, offered)],
    }


def check_step(step, last_of_a_stop: bool) -> None:
    drafts = step.sources.count(Source.DRAFT)
    assert step.token_ids, "no empty steps"
    assert step.sources[:drafts] == (Source.DRAFT,) * drafts and len(step.sources) - drafts <= 1
    assert step.token_ids[:drafts] == step.drafted[:drafts]
    assert "".join(step.pieces) == step.text and len(step.pieces) == len(step.token_ids)
    # Only a step the reply stopped inside accepted more than it showed.
    assert step.num_accepted == drafts or (last_of_a_stop and step.num_accepted > drafts)
    assert step.num_accepted <= step.num_drafted


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    prompt=st.sampled_from(REPLY_PROMPTS),
    method=st.sampled_from(["draft", "self", "ngram"]),
    ks=st.lists(st.integers(0, 8), min_size=1, max_size=12),
    autos=st.lists(st.booleans(), min_size=1, max_size=12),
    cancel_at=st.none() | st.integers(1, 20),
    stop_at=st.none() | st.integers(0, MAX_TOKENS // 2),
)
def test_any_k_schedule_writes_the_greedy_reply_and_a_record_its_stats_recompute_from(
    replies, tiny_tokenizer, prompt, method, ks, autos, cancel_at, stop_at
):
    new_engine, reference = replies
    prompt_ids = tiny_tokenizer(prompt)["input_ids"]
    engine = new_engine(method, None)
    if stop_at is not None:  # stop at the token the reply would write there (or earlier, where it also is)
        free = reference(prompt_ids, engine.stop_ids)
        engine = new_engine(method, {free[min(stop_at, len(free) - 1)]})
    expected = reference(prompt_ids, engine.stop_ids)
    steps, done = drive(engine, prompt_ids, ks, autos, cancel_at)

    tokens = [token for step in steps for token in step.token_ids]
    event(done.finish_reason)
    event(f"accepted more than shown: {any(step.num_accepted > step.sources.count(Source.DRAFT) for step in steps)}")
    event(f"auto: {any(step.auto for step in steps)}")
    if done.finish_reason == "cancelled":
        assert len(steps) == cancel_at, "the cancel ends the reply before its next step"
        assert tokens == expected[: len(tokens)]
    else:
        assert tokens == expected
        assert cancel_at is None or cancel_at >= len(steps)
        if done.finish_reason == "stop":
            assert done.stop_token_id == tokens[-1] and tokens[-1] in engine.stop_ids
        else:
            assert (done.finish_reason, len(tokens), done.stop_token_id) == ("length", MAX_TOKENS, None)
    for index, step in enumerate(steps):
        check_step(step, last_of_a_stop=done.finish_reason == "stop" and index == len(steps) - 1)
        assert step_from_record(json.loads(json.dumps(step_record(step)))) == step

    stats = summarize(steps, done.seconds)
    record = json.loads(json.dumps(reply_record(steps, done, stats.as_dict())))
    assert record["token_ids"] == tokens and record["stop_token_id"] == done.stop_token_id
    again = recomputed(record)
    assert {name: record["stats"][name] for name in again} == again
    # and every other figure (τ included) is what the same steps, read back, give
    assert summarize([step_from_record(step) for step in record["steps"]], done.seconds) == stats
