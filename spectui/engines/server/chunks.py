"""What one `chat.completion.chunk` of vLLM's stream says, as plain fields.

Shapes seen from vLLM 0.32 with return_token_ids and include_usage:
  first:  choices[0].delta = {"role": "assistant", "content": ""}, top-level prompt_token_ids
  tokens: choices[0].delta.content, choices[0].token_ids (one engine step each)
  last:   the same, plus finish_reason ("stop", "length", ...)
  usage:  choices = [], usage, metrics.speculative_decoding (the per-request record)
  error:  {"error": {"message": ..., "type": ..., "code": ...}} in place of a chunk
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from spectui.engines.server.transport import message_of, one_line


@dataclass(frozen=True)
class ChatChunk:
    token_ids: tuple[int, ...] = ()
    text: str = ""
    finish_reason: str | None = None
    prompt_token_ids: tuple[int, ...] | None = None
    speculative_decoding: dict | None = None  # metrics.speculative_decoding, when the server sends it
    usage: dict | None = None
    error: str | None = None  # one line, when the server reported an error in the stream


def parse_chunk(data: str) -> ChatChunk:
    """One SSE payload as a ChatChunk; a payload that is not a chunk is an error chunk."""
    try:
        value = json.loads(data)
    except ValueError:
        return ChatChunk(error=f"the server sent a chunk that is not JSON: {one_line(data, 80)}")
    if not isinstance(value, dict):
        return ChatChunk(error=f"the server sent an unexpected chunk: {one_line(data, 80)}")
    if "error" in value or value.get("object") == "error":
        return ChatChunk(error=one_line(message_of(value)) or "the server reported an error")
    prompt_ids = value.get("prompt_token_ids")
    metrics = value.get("metrics") or {}
    choices = value.get("choices") or []
    # One request, n = 1: the first choice is the reply.
    choice = choices[0] if choices else {}
    delta = choice.get("delta") or {}
    # A reasoning parser splits the text into two fields; the token ids cover both, so the
    # text of a step keeps both, reasoning first as it was generated.
    text = (delta.get("reasoning") or delta.get("reasoning_content") or "") + (delta.get("content") or "")
    return ChatChunk(
        token_ids=tuple(choice.get("token_ids") or ()),
        text=text,
        finish_reason=choice.get("finish_reason"),
        prompt_token_ids=tuple(prompt_ids) if prompt_ids is not None else None,
        speculative_decoding=metrics.get("speculative_decoding"),
        usage=value.get("usage"),
    )
