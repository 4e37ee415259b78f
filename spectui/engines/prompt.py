"""A conversation as prompt ids, and where a reply ends: the same for every local engine.

No torch here: the vLLM engine uses these with its own tokenizer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from spectui.core.errors import UsageError
from spectui.core.events import Done, Event, GenerationParams, LiveControl, Message

# End-of-turn markers of common chat templates. A converted generation config may list
# only one of a model's markers (Qwen GGUFs keep <|im_end|> and drop <|endoftext|>).
END_OF_TURN_TOKENS = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|end_of_text|>", "</s>")


def stop_token_ids(tokenizer: Any, generation_config: Any = None) -> set[int]:
    stop: set[int] = set()
    vocab = tokenizer.get_vocab()
    candidates = [tokenizer.eos_token_id, *(vocab.get(token) for token in END_OF_TURN_TOKENS)]
    if generation_config is not None:
        candidates.append(generation_config.eos_token_id)
    for candidate in candidates:
        if isinstance(candidate, int):
            stop.add(candidate)
        elif candidate:
            stop.update(int(c) for c in candidate)
    return stop


def continues_reply(messages: Sequence[Message]) -> bool:
    """A conversation that ends with the assistant's message asks for that reply to go on."""
    return bool(messages) and messages[-1]["role"] == "assistant"


THINKING_SWITCH = "enable_thinking"  # the variable Qwen3's template reads


def has_thinking_switch(tokenizer: object) -> bool:
    """The model's chat template turns its thinking on and off (Qwen3's `enable_thinking`)."""
    return THINKING_SWITCH in (getattr(tokenizer, "chat_template", None) or "")


def chat_prompt_ids(tokenizer: Any, messages: Sequence[Message], thinking: bool | None = None) -> list[int]:
    """The prompt's ids; a conversation that ends with a (partial) assistant message is that
    reply continued in place: the turns before it, the template's generation prompt, then its
    text, with no end of turn between (an "assistant prefix"). thinking: the template's
    switch, where it has one (None: its default)."""
    if getattr(tokenizer, "chat_template", None):
        prefix = messages[-1]["content"] if continues_reply(messages) else None
        turns = list(messages[:-1]) if prefix is not None else list(messages)
        switch = {THINKING_SWITCH: thinking} if thinking is not None and has_thinking_switch(tokenizer) else {}
        text = tokenizer.apply_chat_template(turns, add_generation_prompt=True, tokenize=False, **switch)
        return tokenizer(text + (prefix or ""), add_special_tokens=False)["input_ids"]
    # A model without a template gets the plain text of the conversation (a continued reply
    # right after the text it answers, as it was made).
    turns = messages[:-1] if continues_reply(messages) else messages
    text = "\n".join(m["content"] for m in turns) + (messages[-1]["content"] if continues_reply(messages) else "")
    return tokenizer(text)["input_ids"]


class ContextOverflow(UsageError):
    def __init__(self, prompt_tokens: int, context_length: int, truncated: bool) -> None:
        self.prompt_tokens = prompt_tokens
        self.context_length = context_length
        what = "the last message alone" if truncated else "the conversation"
        over = prompt_tokens - context_length + 1  # a reply needs room for its first token
        super().__init__(f"{what} is {prompt_tokens:,} tokens; the model holds {context_length:,} "
                         f"({over:,} too many to leave room for a reply)")


@dataclass(frozen=True)
class FittedPrompt:
    ids: list[int]
    max_tokens: int  # the reply's budget, cut to the room the context leaves
    dropped: int = 0  # oldest messages left out


def _oldest_turn(messages: Sequence[Message]) -> slice | None:
    """The oldest user message with its reply; never a system message nor the last message
    (nor the message a continued reply answers)."""
    first = next((i for i, m in enumerate(messages) if m["role"] != "system"), None)
    last = len(messages) - (2 if continues_reply(messages) else 1)
    if first is None or first >= last:
        return None
    end = first + 1
    # Templates that insist on user/assistant alternation must still accept what is left.
    if messages[end]["role"] == "assistant" and end < last:
        end += 1
    return slice(first, end)


def fit_prompt(
    encode: Callable[[Sequence[Message]], list[int]],
    messages: Sequence[Message],
    max_tokens: int,
    context_length: int | None,
    truncate: bool = False,
) -> FittedPrompt:
    """The conversation's ids and the reply's room; with `truncate`, the oldest turns go
    until the reply's budget (at most half the context) fits. Raises ContextOverflow when not one token fits."""
    ids = encode(messages)
    if context_length is None:
        return FittedPrompt(ids, max_tokens)
    kept, dropped = list(messages), 0
    # A budget that may fill the context (the chat's default) keeps half of it for the reply.
    wanted = min(max_tokens, context_length // 2)
    while truncate and len(ids) + wanted > context_length and (oldest := _oldest_turn(kept)) is not None:
        dropped += oldest.stop - oldest.start
        del kept[oldest]
        ids = encode(kept)
    if len(ids) >= context_length:
        raise ContextOverflow(len(ids), context_length, truncated=truncate)
    return FittedPrompt(ids, min(max_tokens, context_length - len(ids)), dropped)


def stream_conversation(
    engine: Any, messages: Sequence[Message], params: GenerationParams, control: LiveControl, context_length: int | None
) -> Iterator[Event]:
    """`engine.stream_ids` on the conversation made to fit the model's context."""
    try:
        fitted = fit_prompt(
            lambda kept: chat_prompt_ids(engine.tokenizer, kept, params.thinking), messages, params.max_tokens, context_length,
            params.truncate,
        )
    except ContextOverflow as overflow:
        yield Done("error", error=str(overflow), context_overflow=(overflow.prompt_tokens, overflow.context_length))
        return
    except Exception as error:  # a template that rejects the messages is the user's to fix
        yield Done("error", error=f"chat template failed: {error}")
        return
    for event in engine.stream_ids(fitted.ids, replace(params, max_tokens=fitted.max_tokens), control):
        if isinstance(event, Done) and fitted.dropped:
            event = replace(event, dropped_messages=fitted.dropped)
        if isinstance(event, Done) and not event.prompt_token_ids:  # what the context holds: /ctx reads it
            event = replace(event, prompt_token_ids=tuple(fitted.ids))
        yield event
