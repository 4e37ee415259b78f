"""A reply's budget in the chat: what the model's context leaves, unless the user caps it
(`max_tokens` in the config, `--max-tokens`, `/max N`); and what a reply that stopped at
its budget says. No textual here.
"""

from __future__ import annotations

from spectui.core.words import counted

# An engine that does not say its context (a server) gets this much when the user set no cap:
# the server still stops a reply at its own context.
UNKNOWN_CONTEXT_BUDGET = 2048
# The compare view runs a prompt twice, side by side: without a user cap it keeps to
# `spectui compare`'s default.
COMPARE_BUDGET = 512


def reply_budget(cap: int | None, context_length: int | None) -> int:
    """The max_tokens a reply is sent with: the cap, else the whole context (the engine cuts it
    to the room the prompt leaves, spectui.engines.prompt.fit_prompt)."""
    if cap is not None:
        return cap
    return context_length if context_length is not None else UNKNOWN_CONTEXT_BUDGET


def binding_cap(cap: int | None, context_length: int | None) -> int | None:
    """The number a reply stops at that is not the context's end: the user's cap, or the
    stand-in for a context the engine does not say; None when only the context stops it."""
    if cap is not None:
        return cap
    return UNKNOWN_CONTEXT_BUDGET if context_length is None else None


def length_note(cap: int | None, tokens: int, continue_key: str, context_known: bool = True) -> str:
    """What a reply that ended at its budget (finish_reason "length") says: at a cap, or at
    a limit the engine did not say, the key that continues it; else the context is full,
    which no continuation can help."""
    go_on = f"{continue_key} or /continue goes on"
    if cap is not None and tokens >= cap:
        return f"stopped at the {cap:,}-token cap: {go_on} (/max N sets the cap)"
    if not context_known:
        return f"stopped at the engine's length limit: {go_on}"
    return "stopped: the model's context is full (/clear starts a new chat)"


def parse_max(text: str) -> int | None:
    """`/max`'s argument: a whole number of tokens from 1, or `off` / `context` for no cap
    (None). ValueError says why not."""
    word = text.strip().lower()
    if word in ("off", "context", "none"):
        return None
    if not word.isdigit() or int(word) < 1 or len(word) > 9:
        raise ValueError(f"/max takes a number of tokens from 1 (or off: what the context leaves), not {text.strip()[:40]!r}")
    return int(word)


def context_line(used: int | None, context_length: int | None, cap: int | None, approximate: bool = False) -> str:
    """`/ctx`: the context used and left (≈ where counted from the text, not the model's
    tokens), and the reply's cap."""
    budget = f"replies capped at {counted(cap, 'token', thousands=True)}" if cap is not None else "a reply may fill what is left (/max N caps it)"
    if context_length is None:
        return f"This engine does not say its context; {budget}."
    if used is None:
        return f"The model holds {context_length:,} tokens; nothing sent yet; {budget}."
    left, about = max(0, context_length - used), "≈" if approximate else ""
    return (f"Context: {about}{used:,} of {context_length:,} tokens used ({100 * used / context_length:.0f}%), "
            f"{about}{left:,} left; {budget}.")
