"""What a reply is made with (k, T, seed, method), recorded in its history row and read
back to regenerate it as it was; and the text a message box sends. No textual here."""

from __future__ import annotations

import re

from typing import TYPE_CHECKING

from spectui.core.engine import EngineInfo
from spectui.core.events import LiveValues

if TYPE_CHECKING:
    from spectui.host.host import EngineHost

_LEADING_BLANK_LINES = re.compile(r"^(?:[ \t]*\n)+")


def message_text(typed: str) -> str:
    """What the message box sends: the text without blank lines before it or whitespace
    after it; the first line's indentation stays (a pasted block keeps its shape)."""
    return _LEADING_BLANK_LINES.sub("", typed.rstrip())


def engine_k(host: EngineHost) -> int | str | None:
    """The k an engine that sets its own runs (a server's; "?" while it has not said it), which
    history records in place of the chat's; None where the chat's k is what runs."""
    if not host.k_from_engine:
        return None
    return host.reported_k if host.reported_k is not None else "?"


def reply_settings(values: LiveValues, seed: int | None, info: EngineInfo | None, own_k: int | str | None = None,
                   vocab: str | None = None) -> dict:
    """What a reply is made with: its history row's settings, and regenerate's. own_k: the
    engine's own k (engine_k), recorded instead of the chat's, which it does not run. vocab: the
    chat's --vocab rule, recorded with the draft's name where the draft has another tokenizer
    (TLI, SLEM or auto: `spectui advise` pairs the reply with the replay's arm for that rule)."""
    settings = {"k": values.k if own_k is None else own_k, "temperature": values.temperature, "seed": seed}
    if values.auto and own_k is None:
        settings["auto_k"] = True
    if info is not None:
        settings["method"] = info.method
        if info.draft_vocab and info.draft and vocab:
            settings |= {"draft": info.draft, "vocab": vocab}
    return settings


def made_with(settings: dict, live: LiveValues, seed: int | None, info: EngineInfo | None) -> tuple[LiveValues, int | None, str]:
    """The k, T and seed a reply was made with (`live` and `seed` stand in for what an older
    row did not record), and a note when the engine now runs another method."""
    k = settings.get("k", live.k)
    values = LiveValues(k if isinstance(k, int) else live.k, bool(settings.get("auto_k")),
                        float(settings.get("temperature", live.temperature)))
    method = settings.get("method")
    note = ""
    if info is not None and method not in (None, info.method):
        note = f" · it was made with {method}; this engine runs {info.method}"
    return values, settings.get("seed", seed), note


def describe_values(values: LiveValues, seed: int | None) -> str:
    k = "auto" if values.auto else str(values.k)
    return f"k {k}, T {values.temperature:.2f}, seed {seed if seed is not None else 'none'}"
