"""A reasoning model's thinking, kept apart from its answer.

Models such as Qwen3 or DeepSeek-R1 write `<think>…</think>` before the answer; a server
with a reasoning parser sends it in a separate field (`reasoning_content`), which the server
engine wraps in the same tags. The reply's text keeps it (history holds what was generated);
what the user reads, copies, exports and sends back as context is split here. Stdlib only.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from spectui.core.events import Step
from spectui.core.stats import AcceptanceCounts, count_acceptance

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


def reasoning_spans(text: str) -> list[tuple[int, int]]:
    """Where split_reasoning finds thinking in `text`: (start, end) offsets, tags included."""
    head, close, _ = text.partition(THINK_CLOSE)
    spans, rest_at = [], 0
    if close and THINK_OPEN not in head:
        rest_at = len(head) + len(close)
        spans.append((0, rest_at))
    spans += [(rest_at + found.start(), rest_at + found.end()) for found in _BLOCK.finditer(text, rest_at)
              if found.end() > found.start()]
    return spans


def acceptance_apart(steps: Sequence[Step]) -> tuple[AcceptanceCounts, AcceptanceCounts] | None:
    """Acceptance of the steps that began inside the reply's thinking, and of the answer's;
    None when the reply has no thinking. Drafts fare differently in the two (a model's
    reasoning repeats the prompt less than its answer quotes it), so one γ would hide both."""
    spans = reasoning_spans("".join(step.text for step in steps))
    if not spans:
        return None
    thinking, answer, offset = [], [], 0
    for step in steps:
        (thinking if any(start <= offset < end for start, end in spans) else answer).append(step)
        offset += len(step.text)
    return count_acceptance(thinking), count_acceptance(answer)


def acceptance_apart_text(steps: Sequence[Step]) -> str:
    """" · thinking γ 0.62 τ 2.10 · answer γ 0.41 τ 1.52" for a reply that thought and drafted; else ""."""
    apart = acceptance_apart(steps)
    if apart is None or not any(counts.num_drafts for counts in apart):
        return ""
    return "".join(f" · {name} {_figures(counts)}" for name, counts in zip(("thinking", "answer"), apart))


def _figures(counts: AcceptanceCounts) -> str:
    if counts.gamma is None:
        return "no drafts"
    return f"γ {counts.gamma:.2f} τ {counts.mean_acceptance_length:.2f}"
