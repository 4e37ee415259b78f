"""Esc during a long prompt's prefill on ggml, with the real SmolLM2 GGUF: the reply ends
while the prompt is still going in, instead of after all of it (an 8k-token paste was ~110 s
of "cancelling" on 2 cores)."""

from __future__ import annotations

import pytest

from spectui.settings.config import ChatConfig

from fake_engines import factory_for
from tiny_gguf import count_decodes
from tui_helpers import ready, reply_done, send, wait_for

pytestmark = [pytest.mark.real_weights, pytest.mark.slow]


@pytest.fixture
def smollm2_ggml():
    pytest.importorskip("llama_cpp_py_sync")
    from spectui.bench.anchors.llamacpp import gguf_for
    from spectui.engines.ggml.load import load_ggml_engine
    from spectui.models.load import load_tokenizer
    from spectui.models.registry import resolve

    tokenizer, gguf = load_tokenizer(resolve("smollm2-135m")), gguf_for(resolve("smollm2-135m"))
    engine = load_ggml_engine(gguf, tokenizer, "suffix", threads=1)
    engine.decoded = count_decodes(engine)  # tokens per llama_decode call
    model = engine.target.model
    yield engine
    if model.context is not None:  # the app closes the engine it ran: a second close would free it twice
        engine.close()


def long_paste(engine, tokens: int) -> str:
    lines = [f"{i:04d} ERROR worker-{i % 13} request {i * 7919 % 10007} timed out after {i % 90} s" for i in range(2000)]
    text = "\n".join(lines[: tokens // 20])
    while len(engine.prompt_ids([{"role": "user", "content": text}])) < tokens:
        text += "\n" + "\n".join(lines[:50])
    return text


async def test_esc_during_a_long_prefill_on_ggml_ends_the_reply_before_the_prompt_is_in(make_app, smollm2_ggml):
    engine = smollm2_ggml
    engine.forget_prompts()
    message = long_paste(engine, 6000) + "\nWhich worker failed most?"
    prompt_tokens = len(engine.prompt_ids([{"role": "user", "content": message}]))
    assert 6000 <= prompt_tokens < engine.context_length - 300
    engine.decoded.clear()
    app = make_app(factory_for(engine), ChatConfig(k=4), store=False)
    async with app.run_test(size=(140, 30)) as pilot:
        await ready(pilot)
        chat = app.chat_screen
        await send(pilot, message)
        # done/total, then the rate: reported once a chunk is in (512 tokens where the second
        # context takes a fresh paste), not while its first decode runs ("prefill 0/7228")
        await wait_for(pilot, lambda: sum(engine.decoded) >= 256 and f"/{prompt_tokens} · " in chat.param_bar.plain,
                       timeout=120)
        assert "● prefill" in chat.param_bar.plain
        await pilot.press("escape")
        await reply_done(pilot)
        assert chat.session.last_reply.done.finish_reason == "cancelled"
        assert chat.session.last_reply.stats().num_tokens == 0
    # The prefill stopped within a chunk or two of the Esc, far from the prompt's end.
    assert sum(engine.decoded) < prompt_tokens / 2, (sum(engine.decoded), prompt_tokens)
    assert max(engine.decoded) <= engine.target.fast_chunk  # a fresh long paste goes in llama.cpp's batches


async def test_ctrl_q_during_a_long_prefill_on_ggml_leaves_before_the_prompt_is_in(make_app, smollm2_ggml):
    engine = smollm2_ggml
    engine.forget_prompts()
    message = long_paste(engine, 6000)
    prompt_tokens = len(engine.prompt_ids([{"role": "user", "content": message}]))
    engine.decoded.clear()
    app = make_app(factory_for(engine), ChatConfig(k=4), store=False)
    async with app.run_test(size=(140, 30)) as pilot:
        await ready(pilot)
        await send(pilot, message)
        await wait_for(pilot, lambda: sum(engine.decoded) >= 256, timeout=120)
        await pilot.press("ctrl+q")
        await pilot.pause()
    # Leaving cancelled the reply and closed the engine after the chunk in flight.
    assert engine.target.model.context is None
    assert sum(engine.decoded) < prompt_tokens / 2, (sum(engine.decoded), prompt_tokens)
