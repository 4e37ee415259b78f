"""The embedded loop on tiny random models: losslessness, the Step contract, live control."""

from __future__ import annotations

import pytest
import torch

from spectui.core.engine import EngineInfo
from spectui.engines.torch_backend.backend import torch_engine
from spectui.engines.speculative.proposers import NgramProposer, Proposal, Proposer
from spectui.engines.torch_backend.backend import torch_draft_proposer
from spectui.core.events import Control, Done, GenerationParams, Source, Step
from spectui.measure.run import run_reply
from spectui.core.stats import per_position_acceptance

PROMPTS = ["def add(a, b):", '{"name": "spectui", "tags": [', "The quick brown fox"]


def make_engine(target, tokenizer, proposer):
    info = EngineInfo("embedded", "tiny", None, proposer.method if proposer else "none", "float32", "cpu")
    return torch_engine(target, tokenizer, proposer, info)


def greedy_reference(model, prompt_ids, max_new_tokens, stop_ids):
    """transformers' greedy reply, its stop token included (stop_ids: one id or several)."""
    stop_ids = [stop_ids] if isinstance(stop_ids, int) else sorted(stop_ids)
    output = model.generate(
        torch.tensor([prompt_ids]), attention_mask=torch.ones(1, len(prompt_ids), dtype=torch.long),
        max_new_tokens=max_new_tokens, do_sample=False, eos_token_id=stop_ids, pad_token_id=stop_ids[0],
    )
    return output[0, len(prompt_ids):].tolist()


def collect(engine, prompt_ids, params, control):
    events = list(engine.stream_ids(prompt_ids, params, control))
    steps = [e for e in events if isinstance(e, Step)]
    assert isinstance(events[-1], Done) and all(isinstance(e, Step) for e in events[:-1])
    return steps, events[-1]


@pytest.fixture(scope="module")
def proposers(tiny_draft):
    return {"draft": torch_draft_proposer(tiny_draft), "ngram": NgramProposer(1, 3)}


@pytest.mark.parametrize("method", ["draft", "ngram"])
@pytest.mark.parametrize("prompt", PROMPTS)
def test_greedy_speculation_equals_plain_greedy(tiny_target, tiny_tokenizer, proposers, method, prompt):
    prompt_ids = tiny_tokenizer(prompt)["input_ids"]
    engine = make_engine(tiny_target, tiny_tokenizer, proposers[method])
    expected = greedy_reference(tiny_target, prompt_ids, 48, engine.stop_ids)
    params = GenerationParams(max_tokens=48)
    drafted_any = accepted_any = rejected_any = False
    for k in range(0, 9):
        steps, done = collect(engine, prompt_ids, params, Control(k=k, temperature=0.0))
        emitted = [t for s in steps for t in s.token_ids]
        assert emitted == expected, f"k={k} diverged from greedy"
        assert done.finish_reason in ("stop", "length")
        for step in steps:
            assert len(step.token_ids) == len(step.sources) <= k + 1
            assert len(step.drafted) <= k
            if k == 0:
                assert set(step.sources) == {Source.TARGET}
            drafted_any |= bool(step.drafted)
            accepted_any |= step.num_accepted > 0
            rejected_any |= any(s is Source.RECOVERED for s in step.sources)
    assert drafted_any and accepted_any
    if method == "draft":
        assert rejected_any, "the noisy draft should be rejected sometimes"


def test_the_draft_model_reads_the_prompt_in_the_first_step_not_the_second(tiny_target, tiny_draft, tiny_tokenizer):
    # As in vLLM: the draft's prefill lands in the time to first token, so the first
    # drafting step runs the draft over the one new token, not the whole prompt.
    proposer = torch_draft_proposer(tiny_draft)
    engine = make_engine(tiny_target, tiny_tokenizer, proposer)
    prompt_ids = tiny_tokenizer(PROMPTS[1])["input_ids"]
    stream = engine.stream_ids(prompt_ids, GenerationParams(max_tokens=16), Control(k=3))
    first = next(stream)
    assert first.drafted == () and proposer.draft.seen == prompt_ids
    second = next(stream)
    assert len(second.drafted) == 3
    assert proposer.draft.seen == prompt_ids + list(first.token_ids) + list(second.drafted[:2])
    stream.close()
    # a plain reply (k = 0) leaves the draft alone
    proposer.reset()
    collect(engine, prompt_ids, GenerationParams(max_tokens=4), Control(k=0))
    assert proposer.draft.seen == []


def test_sources_describe_the_verify(tiny_target, tiny_tokenizer, proposers):
    engine = make_engine(tiny_target, tiny_tokenizer, proposers["draft"])
    prompt_ids = tiny_tokenizer(PROMPTS[0])["input_ids"]
    steps, _ = collect(engine, prompt_ids, GenerationParams(max_tokens=64), Control(k=4))
    assert steps[0].sources == (Source.TARGET,) and steps[0].drafted == ()
    for step in steps[1:]:
        n = step.num_accepted
        # Accepted drafts are a prefix of what was drafted, then one target token.
        assert step.token_ids[:n] == step.drafted[:n]
        assert all(s is Source.DRAFT for s in step.sources[:n])
        if len(step.token_ids) == n + 1:
            last = step.sources[-1]
            assert last is (Source.BONUS if n == len(step.drafted) else Source.RECOVERED)
            if last is Source.RECOVERED:
                assert step.token_ids[n] != step.drafted[n]


def test_stats_match_steps(tiny_target, tiny_tokenizer, proposers):
    engine = make_engine(tiny_target, tiny_tokenizer, proposers["draft"])
    prompt_ids = tiny_tokenizer(PROMPTS[1])["input_ids"]
    control = Control(k=3)
    reply = run_reply_ids(engine, prompt_ids, GenerationParams(max_tokens=40), control)
    stats = reply.stats
    drafted = sum(len(s.drafted) for s in reply.steps)
    accepted = sum(s.sources.count(Source.DRAFT) for s in reply.steps)
    assert stats.num_drafted == drafted and stats.num_accepted == accepted
    assert stats.gamma == pytest.approx(accepted / drafted)
    assert stats.tau == pytest.approx(1 + accepted / sum(1 for s in reply.steps if s.drafted))
    assert stats.num_tokens == len(reply.token_ids) <= 40
    per_position = per_position_acceptance(reply.steps)
    assert len(per_position) == 3 and all(0.0 <= a <= 1.0 for a in per_position)


def run_reply_ids(engine, prompt_ids, params, control):
    class RawPrompt:
        info = engine.info

        def stream(self, messages, params, control):
            return engine.stream_ids(prompt_ids, params, control)

    return run_reply(RawPrompt(), [], params, control)


def test_k_and_temperature_change_applies_to_the_next_step(tiny_target, tiny_tokenizer, proposers):
    engine = make_engine(tiny_target, tiny_tokenizer, proposers["draft"])
    control = Control(k=6, temperature=0.0)
    prompt_ids = tiny_tokenizer(PROMPTS[2])["input_ids"]
    stream = engine.stream_ids(prompt_ids, GenerationParams(max_tokens=200, seed=3), control)
    next(stream)
    second = next(stream)
    assert second.k == 6 and len(second.drafted) == 6
    control.live.update(k=2, temperature=0.9)
    third = next(stream)
    assert third.k == 2 and len(third.drafted) == 2 and third.temperature == 0.9
    control.live.update(k=0)
    fourth = next(stream)
    assert fourth.drafted == () and fourth.sources == (Source.TARGET,)
    control.cancel()
    assert isinstance(next(stream), Done)


def test_cancel_ends_the_reply_and_keeps_steps(tiny_target, tiny_tokenizer, proposers):
    engine = make_engine(tiny_target, tiny_tokenizer, proposers["ngram"])
    control = Control(k=3)
    events = []
    for event in engine.stream_ids(tiny_tokenizer("hello")["input_ids"], GenerationParams(max_tokens=100), control):
        events.append(event)
        if len(events) == 3:
            control.cancel()
    assert [type(e) for e in events] == [Step, Step, Step, Done]
    assert events[-1].finish_reason == "cancelled"


def test_a_crash_inside_the_engine_ends_the_reply_with_an_error(tiny_target, tiny_tokenizer):
    class Exploding(Proposer):
        method = "draft"
        calls = 0

        def propose(self, token_ids, k, temperature, top_p, generator):
            self.calls += 1
            if self.calls == 3:
                raise RuntimeError("draft worker died")
            return Proposal([token_ids[-1]] * k, None)

    engine = make_engine(tiny_target, tiny_tokenizer, Exploding())
    steps, done = collect(engine, tiny_tokenizer("hi")["input_ids"], GenerationParams(max_tokens=50), Control(k=2))
    assert len(steps) == 3  # the prefill step and two drafted steps survive
    assert done.finish_reason == "error" and "draft worker died" in done.error


@pytest.mark.parametrize("stop_at", [0, 1, 3])
def test_a_stop_token_is_the_last_token_of_its_step_and_the_drafts_accepted_after_it_still_count(
    tiny_target, tiny_tokenizer, stop_at
):
    # The target drafting for itself accepts every draft, so the stop token lands where we put
    # it: the prefill's token (0), a step's first draft (1), inside a step's drafts (3).
    prompt_ids = tiny_tokenizer(PROMPTS[0])["input_ids"]
    engine = make_engine(tiny_target, tiny_tokenizer, torch_draft_proposer(tiny_target))
    free = greedy_reference(tiny_target, prompt_ids, 12, engine.stop_ids)
    stop = free[stop_at]
    assert stop not in free[:stop_at], "the stop token must first appear where it is put"
    engine.stop_ids = {stop}
    steps, done = collect(engine, prompt_ids, GenerationParams(max_tokens=40), Control(k=8))
    assert [t for s in steps for t in s.token_ids] == free[: stop_at + 1] == greedy_reference(tiny_target, prompt_ids, 40, stop)
    assert all(step.token_ids for step in steps), "no empty steps"
    assert (done.finish_reason, done.stop_token_id) == ("stop", stop)
    last = steps[-1]
    if stop_at == 0:
        assert len(steps) == 1 and last.sources == (Source.TARGET,)
    else:
        # Every one of the 8 drafts was accepted; the reply showed those up to the stop token.
        assert len(steps) == 2 and last.sources == (Source.DRAFT,) * stop_at
        assert last.num_drafted == 8 and last.num_accepted == 8
    assert all("".join(step.pieces) == step.text and len(step.pieces) == len(step.token_ids) for step in steps)


def test_max_tokens_is_exact(tiny_target, tiny_tokenizer, proposers):
    engine = make_engine(tiny_target, tiny_tokenizer, proposers["ngram"])
    for max_tokens in (1, 2, 7):
        steps, done = collect(engine, tiny_tokenizer("abc abc abc")["input_ids"], GenerationParams(max_tokens=max_tokens), Control(k=8))
        total = sum(len(s.token_ids) for s in steps)
        assert total <= max_tokens
        assert done.finish_reason == "stop" or total == max_tokens


def test_sampling_is_reproducible_with_a_seed(tiny_target, tiny_tokenizer, proposers):
    engine = make_engine(tiny_target, tiny_tokenizer, proposers["draft"])
    prompt_ids = tiny_tokenizer(PROMPTS[0])["input_ids"]
    params = GenerationParams(max_tokens=30, seed=11)
    runs = [collect(engine, prompt_ids, params, Control(k=3, temperature=1.0))[0] for _ in range(2)]
    assert [s.token_ids for s in runs[0]] == [s.token_ids for s in runs[1]]
    other = collect(engine, prompt_ids, GenerationParams(max_tokens=30, seed=12), Control(k=3, temperature=1.0))[0]
    assert [s.token_ids for s in other] != [s.token_ids for s in runs[0]]


# At T 0.2 the tiny target keeps copies of its repeating prompt; at 1.0 it is nearly flat.
@pytest.mark.parametrize(("temperature", "least_accepted"), [(0.2, 10), (1.0, 0)])
def test_a_seeded_sampled_reply_with_prompt_lookup_is_the_same_for_every_k(
    tiny_target, tiny_tokenizer, temperature, least_accepted
):
    # Copies are point masses: the target draws its own token at every position, from
    # randomness keyed by the position, and keeps a copy that equals it. How many copies a
    # step verified then changes nothing: k, auto k and k = 0 write one reply per seed.
    engine = make_engine(tiny_target, tiny_tokenizer, NgramProposer(1, 4))
    prompt_ids = tiny_tokenizer("a b c d e f a b c d e f a b c d e f a b")["input_ids"]

    def reply(control, seed=5):
        steps, _ = collect(engine, prompt_ids, GenerationParams(max_tokens=40, seed=seed), control)
        return [t for s in steps for t in s.token_ids], steps

    plain, _ = reply(Control(k=0, temperature=temperature))
    accepted = 0
    for control in (Control(k=1, temperature=temperature), Control(k=3, temperature=temperature),
                    Control(k=8, temperature=temperature), Control(k=4, temperature=temperature, auto=True)):
        tokens, steps = reply(control)
        assert tokens == plain, control
        accepted += sum(s.num_accepted for s in steps)
    assert accepted >= least_accepted  # copies were verified and kept, not only refused
    assert reply(Control(k=3, temperature=temperature), seed=6)[0] != plain


def test_text_deltas_join_to_the_decoded_reply(tiny_target, tiny_tokenizer, proposers):
    engine = make_engine(tiny_target, tiny_tokenizer, proposers["draft"])
    prompt_ids = tiny_tokenizer(PROMPTS[2])["input_ids"]
    steps, _ = collect(engine, prompt_ids, GenerationParams(max_tokens=60, seed=5), Control(k=4, temperature=1.2))
    ids = [t for s in steps for t in s.token_ids]
    assert "".join(s.text for s in steps) == tiny_tokenizer.decode(ids, skip_special_tokens=True)


def test_plain_decoding_of_a_model_without_a_preset_draft_needs_no_draft(tiny_target, tiny_tokenizer, monkeypatch):
    # `generate -m smollm2-135m -k 0` decodes; with k 4 it asks for a draft, as before.
    from spectui.engines.torch_backend.build import build_embedded_engine
    from spectui.core.errors import UsageError
    from spectui.models.registry import resolve_pair
    from spectui.settings.options import EngineOptions

    monkeypatch.setattr("spectui.models.load.load_model", lambda *args, **kwargs: (tiny_target, tiny_tokenizer))
    monkeypatch.setattr("spectui.models.load.check_same_vocab", lambda *args, **kwargs: pytest.fail("no draft to check"))
    smollm2 = resolve_pair("smollm2-135m", None)
    engine = build_embedded_engine(EngineOptions(model="smollm2-135m", method="draft", k=0, device="cpu"), smollm2)
    assert (engine.info.method, engine.info.draft) == ("ngram", None)
    reply = run_reply(engine, [{"role": "user", "content": "hello"}], GenerationParams(max_tokens=5), Control(k=0))
    assert len(reply.token_ids) == 5 and all(step.num_drafted == 0 for step in reply.steps)
    with pytest.raises(UsageError, match="smollm2-135m has no preset draft model"):
        build_embedded_engine(EngineOptions(model="smollm2-135m", method="draft", k=4, device="cpu"), smollm2)
