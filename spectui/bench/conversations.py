"""The model's own replies between a conversation's scripted turns, written before a bench run.

Each earlier reply is the target's greedy reply (k = 0, T = 0) to the chat so far, as a user
would have seen it; every arm of every runner is then measured on the same last turn. The
replies are kept in spectui's cache per model and chat, so a later run (or one cut short)
measures the same conversation without writing them again. Stdlib only, but for the engine.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from spectui.bench.workloads import CONVERSATION_REPLY_MAX_TOKENS, Workload
from spectui.core.engine import Engine

Replier = Callable[[list[dict]], str]  # a function: the chat so far -> the model's reply to its last turn


def fill_replies(workloads: Sequence[Workload], reply: Replier) -> list[Workload]:
    """The workloads with every pending reply written by `reply`, in order. A chat prefix that
    two workloads share (turn 3 holds turn 2's chat) is answered once."""
    answered: dict[str, str] = {}
    filled = []
    for workload in workloads:
        messages: list[dict] = []
        for message in workload.messages:
            if message["content"] is None:
                key = json.dumps(messages, sort_keys=True)
                if key not in answered:
                    answered[key] = reply([dict(m) for m in messages])
                message = {**message, "content": answered[key]}
            messages.append(dict(message))
        filled.append(replace(workload, messages=tuple(messages)) if workload.replies_pending else workload)
    return filled


def cached(reply: Replier, folder: Path, identity: dict) -> Replier:
    """`reply`, remembered in folder/<hash of identity and chat>.json."""

    def remembered(messages: list[dict]) -> str:
        key = hashlib.sha256(json.dumps({**identity, "messages": messages}, sort_keys=True).encode()).hexdigest()[:24]
        path = folder / f"{key}.json"
        if path.is_file():
            return json.loads(path.read_text())["reply"]
        text = reply(messages)
        folder.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial")
        partial.write_text(json.dumps({**identity, "messages": messages, "reply": text}, indent=1))
        partial.replace(path)
        return text

    return remembered


def greedy_reply(engine: Engine, max_tokens: int = CONVERSATION_REPLY_MAX_TOKENS) -> Replier:
    """The engine's plain greedy reply, as text (what the chat would have shown)."""
    from spectui.core.events import Control, Done, GenerationParams, Message, Prefill

    def reply(messages: list[dict]) -> str:
        engine.forget_prompts()
        pieces = []
        chat = [Message(**message) for message in messages]
        for event in engine.stream(chat, GenerationParams(max_tokens=max_tokens, top_p=1.0, seed=0), Control(0, 0.0)):
            if isinstance(event, Done):
                if event.finish_reason == "error":
                    raise RuntimeError(f"writing a conversation's reply: {event.error}")
                break
            if not isinstance(event, Prefill):
                pieces.append(event.text)
        return "".join(pieces).strip()

    return reply


def fill_case_replies(cases: list, engine: Engine) -> list:
    """The bench's cases with their conversations' earlier replies written by the engine's
    target (cached under spectui's cache folder, per model and dtype)."""
    from spectui.models.registry import cache_dir

    if not any(case.workload.replies_pending for case in cases):
        return cases
    identity = {"model": engine.info.target, "dtype": engine.info.dtype, "max_tokens": CONVERSATION_REPLY_MAX_TOKENS}
    reply = cached(greedy_reply(engine), cache_dir() / "bench" / "conversation-replies", identity)
    workloads = fill_replies([case.workload for case in cases], reply)
    return [replace(case, workload=workload) for case, workload in zip(cases, workloads)]
