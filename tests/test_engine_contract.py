"""What an engine declares: its capabilities in EngineInfo, and the Engine base's answers for
whatever an engine cannot do, so that no caller probes for methods."""

from __future__ import annotations

import pytest

from spectui.core.engine import ALL_CONTROLS, AUTO, K, TEMPERATURE, Capabilities, Engine, EngineInfo
from spectui.core.errors import UsageError
from spectui.engines.speculative.proposers import NgramProposer
from spectui.engines.scripted import ScriptedEngine
from test_engine import make_engine


class Minimal(Engine):
    info = EngineInfo("minimal", "t", None, "draft", "f32", "cpu")

    def stream(self, messages, params, control):
        yield from ()


def test_the_base_answers_for_what_an_engine_cannot_do():
    engine = Minimal()
    assert engine.capabilities == Capabilities()
    assert (engine.memory(), engine.fixed_k, engine.context_length, engine.draft_bytes) == (None, None, None, None)
    engine.set_restart_progress(lambda *stage: None)
    engine.forget_prompts()
    engine.close()
    assert engine.with_method("draft") is engine
    with pytest.raises(UsageError, match="the minimal engine drafts by draft only"):
        engine.with_method("ngram")
    with pytest.raises(UsageError, match="no tokenizer"):
        engine.prompt_ids([{"role": "user", "content": "hi"}])


def test_the_embedded_engine_declares_live_controls_a_method_switch_and_a_tokenizer(tiny_target, tiny_tokenizer):
    engine = make_engine(tiny_target, tiny_tokenizer, NgramProposer())
    expected = Capabilities(live_controls=True, exact_provenance=True, method_switch=True, tokenizer=True,
                            times_decodes=True)  # advise times its decodes between the chat's replies
    assert engine.capabilities == expected and engine.with_method("ngram").capabilities == expected
    assert engine.prompt_ids([{"role": "user", "content": "hi"}])
    assert engine.context_length == 512


def test_the_scripted_engine_declares_whether_k_is_live():
    assert ScriptedEngine().capabilities.live_controls == ALL_CONTROLS
    assert not ScriptedEngine(live_k=False).capabilities.live_controls


def test_a_server_engine_honours_the_temperature_and_never_k():
    capabilities = Capabilities(reply_controls=frozenset({TEMPERATURE}))
    assert capabilities.honours(TEMPERATURE) and not capabilities.honours(K) and not capabilities.live(TEMPERATURE)
    assert Capabilities(live_controls=True).live(AUTO)
