"""What one `chat.completion.chunk` of an OpenAI-compatible stream says, as plain fields.

Shapes seen from vLLM 0.32 with return_token_ids and include_usage:
  first:  choices[0].delta = {"role": "assistant", "content": ""}, top-level prompt_token_ids
  tokens: choices[0].delta.content, choices[0].token_ids (one engine step each)
  last:   the same, plus finish_reason ("stop", "length", ...)
  usage:  choices = [], usage, metrics.speculative_decoding (the per-request record)
  error:  {"error": {"message": ..., "type": ..., "code": ...}} in place of a chunk
Other servers send no token ids (one chunk of text per token or so); some count the reply's
drafts: llama-server in `timings` (draft_n, draft_n_accepted), LM Studio in `stats` or
`usage` (total_draft_tokens_count, accepted_draft_tokens_count).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeGuard, TypeVar

from spectui.core import json_text
from spectui.engines.server.transport import message_of, one_line

T = TypeVar("T")


@dataclass(frozen=True)
class DraftCounts:
    """A whole reply's drafted and accepted tokens, as llama-server or LM Studio count them."""

    drafted: int
    accepted: int


@dataclass(frozen=True)
class ChatChunk:
    token_ids: tuple[int, ...] = ()
    text: str = ""  # the answer's text (delta.content)
    finish_reason: str | None = None
    prompt_token_ids: tuple[int, ...] | None = None
    speculative_decoding: dict | None = None  # metrics.speculative_decoding, when the server sends it
    usage: dict | None = None
    error: str | None = None  # one line, when the server reported an error in the stream
    draft_counts: DraftCounts | None = None  # the reply's drafts, counted by a non-vLLM server
    reasoning: str = ""  # a reasoning parser's field (reasoning_content, or vLLM's newer `reasoning`)


def parse_chunk(data: str) -> ChatChunk:
    """One SSE payload as a ChatChunk; a payload that is not a chunk is an error chunk."""
    try:
        value = json_text.loads(data)
    except ValueError:
        return ChatChunk(error=f"the server sent a chunk that is not JSON: {one_line(data, 80)}")
    if not isinstance(value, dict):
        return ChatChunk(error=f"the server sent an unexpected chunk: {one_line(data, 80)}")
    if "error" in value or value.get("object") == "error":
        return ChatChunk(error=one_line(message_of(value)) or "the server reported an error")
    try:
        return chunk_fields(value)
    except (TypeError, ValueError):
        # A server that garbles its chunks must not crash the chat: the reply ends, named.
        return ChatChunk(error=f"the server sent a chunk of an unexpected shape: {one_line(data, 80)}")


def chunk_fields(value: dict) -> ChatChunk:
    """The fields of a chunk, each checked for its type (TypeError when one is wrong)."""
    choices = of_type(value.get("choices"), list, [])
    # One request, n = 1: the first choice is the reply.
    choice = of_type(choices[0] if choices else None, dict, {})
    delta = of_type(choice.get("delta"), dict, {})
    # A reasoning parser splits the text into two fields; the token ids cover both. The
    # engine keeps the reasoning in the step's text between <think> tags (spectui.core.reasoning).
    reasoning = "".join(of_type(delta.get(name), str, "") for name in ("reasoning", "reasoning_content"))
    text = of_type(delta.get("content"), str, "")
    prompt_ids = value.get("prompt_token_ids")
    metrics = of_type(value.get("metrics"), dict, {})
    return ChatChunk(
        token_ids=token_ids(choice.get("token_ids")),
        text=text,
        finish_reason=of_type(choice.get("finish_reason"), str, None),
        prompt_token_ids=token_ids(prompt_ids) if prompt_ids is not None else None,
        speculative_decoding=of_type(metrics.get("speculative_decoding"), dict, None),
        usage=of_type(value.get("usage"), dict, None),
        draft_counts=draft_counts(value),
        reasoning=reasoning,
    )


# (table, drafted key, accepted key): llama-server's timings, LM Studio's stats and usage.
DRAFT_COUNT_FIELDS = (
    ("timings", "draft_n", "draft_n_accepted"),
    ("stats", "total_draft_tokens_count", "accepted_draft_tokens_count"),
    ("usage", "total_draft_tokens_count", "accepted_draft_tokens_count"),
)


def draft_counts(value: dict) -> DraftCounts | None:
    """The reply's draft counts where the chunk carries them and they make sense."""
    for table, drafted_key, accepted_key in DRAFT_COUNT_FIELDS:
        fields = value.get(table)
        if not isinstance(fields, dict):
            continue
        drafted, accepted = fields.get(drafted_key), fields.get(accepted_key)
        if is_count(drafted) and is_count(accepted) and accepted <= drafted:
            return DraftCounts(drafted, accepted)
    return None


def is_count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def of_type(value: object, kind: type[T], default: T) -> T:
    """value when it is a `kind`, default when absent (None); anything else is a TypeError."""
    if value is None:
        return default
    if not isinstance(value, kind):
        raise TypeError(f"expected {kind.__name__}, got {type(value).__name__}")
    return value


def token_ids(value: object) -> tuple[int, ...]:
    ids = of_type(value, list, [])
    if not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in ids):
        raise ValueError("token ids must be non-negative integers")
    return tuple(ids)
