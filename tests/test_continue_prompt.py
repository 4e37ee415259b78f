"""A conversation that ends with the assistant's message continues that reply (issue 59):
the prompt is the turns before it, the template's generation prompt and the reply so far,
with no end of turn between; truncation never drops the message it answers."""

from __future__ import annotations

import pytest

from spectui.engines.prompt import chat_prompt_ids, fit_prompt, has_thinking_switch
from spectui.engines.server.request import request_body
from spectui.core.events import Control, GenerationParams


class TemplateTokenizer:
    """A chat template in miniature: one character per token id."""

    chat_template = "yes"

    def apply_chat_template(self, messages, add_generation_prompt: bool, tokenize: bool) -> str:
        text = "".join(f"<{m['role']}>{m['content']}<end>" for m in messages)
        return text + ("<assistant>" if add_generation_prompt else "")

    def __call__(self, text: str, add_special_tokens: bool = True) -> dict:
        return {"input_ids": [ord(c) for c in text]}


def as_text(ids: list[int]) -> str:
    return "".join(chr(i) for i in ids)


def test_a_trailing_assistant_message_is_continued_not_closed():
    turns = [{"role": "user", "content": "add types"}]
    whole = as_text(chat_prompt_ids(TemplateTokenizer(), turns))
    partial = [*turns, {"role": "assistant", "content": "def f(x"}]
    continued = as_text(chat_prompt_ids(TemplateTokenizer(), partial))
    assert continued == whole + "def f(x"  # the prompt as it was, the reply so far after it
    assert not continued.endswith("<end>")


def test_truncation_keeps_the_message_a_continued_reply_answers():
    def words(messages):
        return [0] * sum(len(m["content"].split()) for m in messages)

    messages = [{"role": "user", "content": "old " * 30}, {"role": "assistant", "content": "old " * 30},
                {"role": "user", "content": "q " * 10}, {"role": "assistant", "content": "a " * 10}]
    fitted = fit_prompt(words, messages, max_tokens=40, context_length=100, truncate=True)
    assert fitted.dropped == 2 and len(fitted.ids) == 20  # the old turn went; the question and its reply so far stayed
    fitted = fit_prompt(words, messages[2:], max_tokens=40, context_length=30, truncate=True)
    assert fitted.dropped == 0 and fitted.max_tokens == 10  # nothing older to drop: the room there is


def test_a_server_is_asked_to_continue_the_final_message():
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hel"}]
    body = request_body("m", messages, GenerationParams(), 0.0, vllm_extensions=True)
    assert body["continue_final_message"] is True and body["add_generation_prompt"] is False
    plain = request_body("m", messages[:1], GenerationParams(), 0.0, vllm_extensions=True)
    assert "continue_final_message" not in plain


@pytest.mark.slow
@pytest.mark.real_weights
def test_a_reply_continued_on_ggml_is_the_reply_that_did_not_stop(smollm2_ggml):
    """At T = 0 a reply cut at 20 tokens and continued is the reply made in one go: the
    assistant prefix puts the model where it stopped."""
    from test_ggml_backend import MESSAGES, reply_tokens

    engine = smollm2_ggml.with_method("ngram")
    engine.forget_prompts()
    whole, _ = reply_tokens(engine, MESSAGES, Control(4, 0.0), max_tokens=48)
    first, _ = reply_tokens(engine, MESSAGES, Control(4, 0.0), max_tokens=20)
    partial = engine.tokenizer.decode(first, skip_special_tokens=True)
    rest, _ = reply_tokens(engine, [*MESSAGES, {"role": "assistant", "content": partial}], Control(4, 0.0), max_tokens=28)
    decode = engine.tokenizer.decode
    assert decode(first + rest, skip_special_tokens=True) == decode(whole, skip_special_tokens=True)


class ThinkingTokenizer(TemplateTokenizer):
    chat_template = "{% if enable_thinking is false %}<no-think>{% endif %}"

    def apply_chat_template(self, messages, add_generation_prompt: bool, tokenize: bool, **variables) -> str:
        text = super().apply_chat_template(messages, add_generation_prompt, tokenize)
        return text + ("<no-think>" if variables.get("enable_thinking") is False else "")


def test_the_thinking_switch_reaches_a_template_that_has_it_only():
    turns = [{"role": "user", "content": "hi"}]
    assert as_text(chat_prompt_ids(ThinkingTokenizer(), turns, thinking=False)).endswith("<no-think>")
    assert not as_text(chat_prompt_ids(ThinkingTokenizer(), turns, thinking=True)).endswith("<no-think>")
    # A template without the switch is never handed it (transformers would pass it through silently).
    assert as_text(chat_prompt_ids(TemplateTokenizer(), turns, thinking=False)) == as_text(chat_prompt_ids(TemplateTokenizer(), turns))


def test_the_json_tokenizer_renders_enable_thinking(tmp_path):
    """The ggml engine's tokenizer hands the switch to the template, as transformers does."""
    import json

    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel

    from spectui.models.tokenizer_json import JsonTokenizer

    Tokenizer(WordLevel({"a": 0}, unk_token="a")).save(str(tmp_path / "tokenizer.json"))
    template = "{{ messages[0]['content'] }}{% if enable_thinking is defined and not enable_thinking %} /no_think{% endif %}"
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": template}))
    tokenizer = JsonTokenizer(tmp_path)
    turns = [{"role": "user", "content": "hi"}]
    assert has_thinking_switch(tokenizer)
    assert tokenizer.apply_chat_template(turns, enable_thinking=False) == "hi /no_think"
    assert tokenizer.apply_chat_template(turns) == "hi"
