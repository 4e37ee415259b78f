"""Real replies recorded into a history file as the chat saves them (spectui.store's Store):
what tests/test_advise_*.py replay and compare with."""

from __future__ import annotations

from pathlib import Path

from spectui.advise.costs import CostProfile
from spectui.core.events import Control, Done, GenerationParams, Source, Step
from spectui.store.history import Store

CHATS = (
    ("Write a Python function that reverses a list, then the same function with type hints.",
     "Now rename the function to flip and show it again."),
    ("List the numbers one to twelve in words, one per line.", "Again, in reverse order."),
)


MAX_TOKENS = 32
# A module both the CLI and bench --history tests save into a chat, and a quick profile to charge it at.
CODE = "def area(width, height):\n    return width * height\n"
COSTS = CostProfile("smollm2-135m", "test", 0.01, {1: 1.0, 2: 1.3, 3: 1.6}, piece=3,
                    draft_seconds={"suffix": 0.0001, "ngram": 0.0001})


def record_chat(store: Store, engine, turns: tuple[str, ...], control: Control,
                max_tokens: int = MAX_TOKENS) -> list[tuple[list[int], list[Step]]]:
    """One conversation of `turns` through `engine`, every message and step saved; each reply's
    prompt ids (as the engine built them) and steps."""
    conversation = store.new_conversation({})
    messages: list[dict] = []
    replies = []
    settings = {"k": control.k, "temperature": control.temperature, "seed": 0, "method": engine.info.method}
    if control.auto:
        settings["auto_k"] = True
    for text in turns:
        store.add_message(conversation, "user", text)
        messages.append({"role": "user", "content": text})
        reply_id = store.add_message(conversation, "assistant", "", settings=settings)
        events = list(engine.stream(messages, GenerationParams(max_tokens=max_tokens, top_p=1.0, seed=0), control))
        done = events[-1]
        assert isinstance(done, Done) and done.finish_reason in ("stop", "length"), done
        steps = [event for event in events if isinstance(event, Step)]
        for index, step in enumerate(steps):
            store.add_step(reply_id, index, step, step.pieces, "", 0.0)
        content = "".join(step.text for step in steps)
        store.finish_message(reply_id, content, done.finish_reason)
        messages.append({"role": "assistant", "content": content})
        replies.append((engine.prompt_ids(messages[:-1]), steps))
    return replies


def recorded_history(path: Path, engine, controls: dict[str, Control],
                     chats: tuple[tuple[str, ...], ...] = CHATS) -> dict[str, list[tuple[list[int], list[Step]]]]:
    """Every chat under each method's control, into one history at `path`: method -> (prompt ids, steps) per reply."""
    store = Store(path)
    out: dict[str, list[tuple[list[int], list[Step]]]] = {}
    try:
        for method, control in controls.items():
            drafting = engine.with_method(method)
            for turns in chats:
                drafting.forget_prompts()
                out.setdefault(method, []).extend(record_chat(store, drafting, turns, control))
    finally:
        store.close()
    return out


def save_chat(path: Path, tokenizer, question: str, answer: str, temperature: float = 0.0) -> int:
    """A conversation whose reply was plain decoding, one token a step, as the chat saves it."""
    store = Store(path)
    try:
        conversation = store.new_conversation({})
        store.add_message(conversation, "user", question)
        reply = store.add_message(conversation, "assistant", "", settings={"k": 0, "temperature": temperature})
        ids = tokenizer(answer, add_special_tokens=False)["input_ids"]
        text = ""
        for index, token in enumerate(ids):
            piece = tokenizer.decode(ids[: index + 1])[len(text):]
            text += piece
            store.add_step(reply, index, Step((token,), (Source.TARGET,), piece, temperature=temperature), (piece,), "", 0.0)
        store.finish_message(reply, text, "stop")
        return conversation
    finally:
        store.close()
