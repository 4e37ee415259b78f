"""A conversation as prompt ids, and where a reply ends: the same for every local engine.

No torch here: the vLLM engine uses these with its own tokenizer.
"""

from __future__ import annotations

from collections.abc import Sequence

from spectui.events import Message

# End-of-turn markers of common chat templates. A converted generation config may list
# only one of a model's markers (Qwen GGUFs keep <|im_end|> and drop <|endoftext|>).
END_OF_TURN_TOKENS = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|end_of_text|>", "</s>")


def stop_token_ids(tokenizer, generation_config=None) -> set[int]:
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


def chat_prompt_ids(tokenizer, messages: Sequence[Message]) -> list[int]:
    if getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template(
            list(messages), add_generation_prompt=True, tokenize=False
        )
        return tokenizer(text, add_special_tokens=False)["input_ids"]
    # A model without a template gets the plain text of the conversation.
    text = "\n".join(m["content"] for m in messages)
    return tokenizer(text)["input_ids"]
