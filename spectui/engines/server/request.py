"""The body of one streamed chat request, and how a strict server's refusal of vLLM's
extensions reads."""

from __future__ import annotations

from collections.abc import Sequence

from spectui.core.events import GenerationParams, Message

VLLM_EXTENSIONS = ("return_token_ids", "stop_token_ids", "continue_final_message")


def request_body(
    model: str | None,
    messages: Sequence[Message],
    params: GenerationParams,
    temperature: float,
    *,
    vllm_extensions: bool,
) -> dict:
    body: dict = {
        "model": model,
        "messages": [dict(message) for message in messages],
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": params.max_tokens,
        "temperature": temperature,
        "top_p": params.top_p,
    }
    if vllm_extensions:
        body["return_token_ids"] = True  # one chunk's ids = one engine step
        if params.stop_token_ids:
            body["stop_token_ids"] = list(params.stop_token_ids)
        if messages and messages[-1]["role"] == "assistant":  # a reply continued in place, not a new turn
            body["continue_final_message"], body["add_generation_prompt"] = True, False
    if params.seed is not None:
        body["seed"] = params.seed
    return body


def refuses_extensions(message: str) -> bool:
    return any(name in message for name in VLLM_EXTENSIONS)
