"""A draft with another tokenizer on ggml, real weights: SmolLM2-135M (49,152 tokens) drafting
for Qwen2.5-Coder-0.5B (151,936) by TLI, and for Qwen2.5-Coder-0.5B and -1.5B by SLEM, writes
the target's plain greedy reply bit for bit, on two prompts (one whose characters are cut
between tokens) and k, with drafts accepted."""

from __future__ import annotations

import pytest

from spectui.core.events import Control, Done, GenerationParams, Step
from spectui.models.registry import resolve_pair
from spectui.settings.options import EngineOptions

pytest.importorskip("llama_cpp_py_sync")

PROMPTS = [
    "Write a Python function that checks whether a string is a palindrome.",
    "Écris une phrase en français sur les crêpes, puis traduis-la en 日本語.",  # characters cut between tokens
]


def reply(engine, prompt: str, control: Control, max_tokens: int = 24) -> tuple[list[int], list[Step]]:
    engine.forget_prompts()
    events = list(engine.stream([{"role": "user", "content": prompt}],
                                GenerationParams(max_tokens=max_tokens, top_p=1.0, seed=0), control))
    assert isinstance(events[-1], Done) and events[-1].finish_reason in ("stop", "length"), events[-1]
    steps = [event for event in events if isinstance(event, Step)]
    return [token for step in steps for token in step.token_ids], steps


@pytest.fixture(scope="module")
def smollm2_for_qwen():
    from spectui.engines.ggml.build import build_ggml_engine

    engine = build_ggml_engine(EngineOptions(model="qwen2.5-coder-0.5b", method="draft", draft="smollm2-135m", vocab="tli"),
                               resolve_pair("qwen2.5-coder-0.5b", "smollm2-135m"))
    yield engine
    engine.close()


@pytest.mark.real_weights
@pytest.mark.slow
def test_smollm2_drafting_for_qwen_writes_qwens_plain_greedy_reply(smollm2_for_qwen):
    from spectui.engines.speculative.cross_vocab import CrossVocabProposer

    engine = smollm2_for_qwen  # --vocab tli: auto would try SLEM too (SlemProposer extends TLI's)
    assert type(engine.proposer) is CrossVocabProposer
    assert engine.info.draft_vocab.endswith("% shared")
    accepted = 0
    for prompt in PROMPTS:
        plain, _ = reply(engine, prompt, Control(0, 0.0))
        for control in (Control(1, 0.0), Control(4, 0.0), Control(3, 0.0, auto=True)):
            tokens, steps = reply(engine, prompt, control)
            assert tokens == plain, (prompt, control.k, control.auto)
            accepted += sum(step.num_accepted for step in steps)
    assert accepted > 0


@pytest.mark.real_weights
@pytest.mark.slow
@pytest.mark.parametrize("target", ["qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"])
def test_slem_identity_smollm2_drafting_for_qwen_writes_qwens_plain_greedy_reply(target):
    """SLEM: SmolLM2's own text, re-tokenized by Qwen's tokenizer, verified greedily; k in Qwen's tokens."""
    from spectui.engines.ggml.build import build_ggml_engine
    from spectui.engines.speculative.slem import SlemProposer

    engine = build_ggml_engine(EngineOptions(model=target, method="draft", draft="smollm2-135m", vocab="slem"),
                               resolve_pair(target, "smollm2-135m"))
    try:
        assert isinstance(engine.proposer, SlemProposer) and "SLEM" in engine.info.draft_vocab
        accepted = 0
        for prompt in PROMPTS:
            plain, _ = reply(engine, prompt, Control(0, 0.0))
            for control in (Control(1, 0.0), Control(4, 0.0), Control(6, 0.0), Control(3, 0.0, auto=True)):
                tokens, steps = reply(engine, prompt, control)
                assert tokens == plain, (prompt, control.k, control.auto)
                assert all(len(step.drafted) <= max(control.k, 8) for step in steps)
                accepted += sum(step.num_accepted for step in steps)
        assert accepted > 0
    finally:
        engine.close()
