"""A reasoning model's thinking, kept apart from its answer.

Models such as Qwen3 or DeepSeek-R1 write `<think>…</think>` before the answer; a server
with a reasoning parser sends it in a separate field (`reasoning_content`), which the server
engine wraps in the same tags. The reply's text keeps it (history holds what was generated);
what the user reads, copies, exports and sends back as context is split here. Stdlib only.
"""

from __future__ import annotations

import re

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
_BLOCK = re.compile(re.escape(THINK_OPEN) + r"(.*?)(?:" + re.escape(THINK_CLOSE) + r"|\Z)", re.DOTALL)


def split_reasoning(text: str) -> tuple[str, str]:
    """(reasoning, answer) of a reply's text. Every `<think>` block is reasoning, one left
    open runs to the end (the reply is still thinking, or was cut off there); a `</think>`
    with no `<think>` before it closes thinking the chat template began in the prompt."""
    head, close, tail = text.partition(THINK_CLOSE)
    if close and THINK_OPEN not in head:
        reasoning, rest = [head], tail
    else:
        reasoning, rest = [], text
    reasoning += _BLOCK.findall(rest)
    if not reasoning:
        return "", text
    answer = _BLOCK.sub("", rest).lstrip("\n")  # the blank line a model leaves after </think>
    return "\n\n".join(part.strip("\n") for part in reasoning if part.strip()), answer


def answer_of(text: str) -> str:
    """The reply without its reasoning: what is copied and sent back as the conversation."""
    return split_reasoning(text)[1]
