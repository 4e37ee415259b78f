"""The advise screen's work, outside Textual: the chat's saved replies replayed by spectui.advise
(in a worker thread: seconds on a long history) at this machine's costs, kept or measured once,
and what applying the recommendation changes in the running chat.

    advice = run_advice(model, history_path, data_dir, conversation_id, progress)
    choice = recommended(advice)           # the drafter and k of the best arm (k 0: plain)
    apply_problem(choice, host, config)    # why the apply key would not act, or None
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from spectui.core.engine import AUTO, DecodeTimings, Engine
from spectui.core.errors import UsageError
from spectui.core.words import counted

if TYPE_CHECKING:
    from spectui.advise.advice import Advice
    from spectui.host.host import EngineHost
    from spectui.settings.config import ChatConfig
    from spectui.store.history import Store

Progress = Callable[[str, int, int], None]  # progress(what, done, total); total 0: not known yet
IDLE_POLL_SECONDS = 0.1  # how often the measurement looks whether the chat's reply has ended
ENOUGH_REPLIES = 3  # the first screen's card links to advise from this many saved T = 0 replies


def run_advice(model: str | None, history: Path, data_dir: Path, conversation_id: int | None,
               progress: Progress, host: EngineHost | None = None) -> Advice:
    """Every copy drafter × k over the history's replies (one conversation's, or all), charged at
    this machine's profile for the target (the kept one, else measured now, on the chat's engine
    where it runs that target: ChatMeasure, and kept).
    UsageError / StoreError say in one line why there is nothing to show."""
    from spectui.advise.advice import advise
    from spectui.advise.chats import chat_replies, read_conversations
    from spectui.advise.measure import cached_gguf, median_context_ids, this_machine_profile
    from spectui.models.registry import resolve_pair
    from spectui.models.tokenizer_json import JsonTokenizer

    progress("reading your chats", 0, 0)
    target = cached_gguf(resolve_pair(model, None).target)
    conversations = read_conversations(history, conversation_id=conversation_id)
    tokenizer = JsonTokenizer(target.tokenizer)
    selection = chat_replies(conversations, tokenizer, max(tokenizer.get_vocab().values()) + 1)
    if not selection.replies:
        left = ", ".join(f"{count} {why}" for why, count in selection.skipped.items())
        raise UsageError(f"No reply to replay{' in this chat' if conversation_id is not None else ''}"
                         + (f" (left out: {left})" if left else "") + f": advise replays finished T = 0 replies of {target.name}.")

    engine, where = chat_engine_for(host, target.name)

    def measuring(stage: str, done: int, total: int) -> None:
        progress(f"measuring this machine's costs for {target.name} {where}, once (kept for next time): {stage}", done, total)

    costs, _ = this_machine_profile(target, data_dir, median_context_ids(selection.replies), progress=measuring,
                                    engine=ChatMeasure(host, engine) if host is not None and engine is not None else None)
    tokens = sum(len(reply.reply_ids) for reply in selection.replies)
    what = f"replaying {counted(len(selection.replies), 'reply', 'replies')} ({counted(tokens, 'token', thousands=True)}) for every drafter and k"
    return advise(selection, costs, progress=lambda done, total: progress(what, done, total))


def chat_engine_for(host: EngineHost | None, target: str) -> tuple[Engine | None, str]:
    """(the chat's engine, if its costs can be measured on it, and where they are measured, in
    words): a second copy of the target is loaded only where the chat's cannot be used."""
    engine = host.engine if host is not None else None
    if engine is None:
        return None, "on a copy of it loaded for this (the chat's engine is not ready)"
    if engine.info.target != target:
        return None, f"on a copy of it loaded for this (the chat runs {engine.info.target})"
    if not engine.capabilities.times_decodes:
        return None, f"on a copy of it loaded for this (the {engine.info.name} engine cannot time its decodes)"
    return engine, "on the chat's engine"


class ChatMeasure(Engine):
    """The chat's engine as the measurement uses it: it waits for the reply in flight to end (the
    advise screen, modal, lets no other start), then times the decodes between replies."""

    def __init__(self, host: EngineHost, engine: Engine) -> None:
        self.host, self.engine, self.info = host, engine, engine.info

    def time_decodes(self, context_ids: Sequence[int], widest: int, rounds: int,
                     progress: Progress | None = None) -> DecodeTimings:
        report = progress or (lambda stage, done, total: None)
        while self.host.uses.replying:  # a reply holds the engine: the timings would be its neighbours'
            report("waiting for the reply to end", 0, 0)
            time.sleep(IDLE_POLL_SECONDS)
        return self.engine.time_decodes(context_ids, widest, rounds, progress)


@dataclass(frozen=True)
class Choice:
    """What the recommendation sets: a method and its settings, and k (0: plain decoding, the
    method left as it is)."""

    k: int | str
    method: str | None = None
    history_drafting: bool = True
    lookup: tuple[int, int] | None = None

    @property
    def words(self) -> str:
        if self.method is None:
            return "k 0 (plain decoding)"
        drafting = "" if self.history_drafting else " without your history"
        lookup = f" {self.lookup[0]}-{self.lookup[1]}" if self.lookup and self.method == "ngram" else ""
        return f"{self.method}{lookup}{drafting}, k {self.k}"


def recommended(advice: Advice) -> Choice | None:
    """The best arm as the chat runs it; None for one it cannot switch to (a draft model's arm)."""
    from spectui.advise.advice import COPY_DRAFTERS, SAME_SPEED

    best = advice.best
    if best.speedup < 1 + SAME_SPEED:
        return Choice(0)
    drafter = next((d for d in COPY_DRAFTERS if d.name == best.drafter), None)
    if drafter is None:
        return None
    return Choice(best.k, drafter.method, drafter.history, drafter.lookup if drafter.method == "ngram" else None)


def config_for(choice: Choice, config: ChatConfig) -> ChatConfig:
    """The chat's config with the choice's method and settings (k 0 keeps the method)."""
    k = choice.k
    if choice.method is None:
        return replace(config, k=k)
    lookup = choice.lookup or (config.lookup_min, config.lookup_max)
    return replace(config, method=choice.method, k=k, history_drafting=choice.history_drafting,
                   lookup_min=lookup[0], lookup_max=lookup[1])


def kept_values(choice: Choice) -> dict[str, object]:
    """The config file's lines that keep the choice for the next chat."""
    if choice.method is None:
        return {"k": 0}
    values: dict[str, object] = {"method": choice.method, "k": choice.k}
    if choice.method == "suffix":
        values["history_drafting"] = choice.history_drafting
    if choice.lookup is not None:
        values |= {"lookup_min": choice.lookup[0], "lookup_max": choice.lookup[1]}
    return values


def method_changes(choice: Choice, host: EngineHost, config: ChatConfig) -> bool:
    """The choice drafts another way than the engine that runs (its method or that method's settings)."""
    info = host.info
    if choice.method is None or info is None:
        return False
    wanted = config_for(choice, config)
    settings = (wanted.history_drafting,) if choice.method == "suffix" else (wanted.lookup_min, wanted.lookup_max)
    running = (config.history_drafting,) if choice.method == "suffix" else (config.lookup_min, config.lookup_max)
    return info.method != choice.method or settings != running


def k_changes(choice: Choice, host: EngineHost) -> bool:
    live = host.live
    if choice.k == "auto":
        return not live.auto
    return live.auto or live.k != choice.k


def apply_problem(choice: Choice, host: EngineHost, config: ChatConfig) -> str | None:
    """Why applying would not act (the apply key is hidden then), as the screen says it, or None."""
    engine = host.engine
    if engine is None:
        return "Not applied here: the engine is not ready."
    changes_method = method_changes(choice, host, config)
    if not changes_method and not k_changes(choice, host):
        return f"The chat already runs {choice.words}."
    if changes_method and not engine.capabilities.method_switch:
        return f"Not applied here: the {engine.info.name} engine cannot switch method (the model screen, F11, picks another engine)."
    if choice.k == "auto" and not engine.capabilities.live(AUTO):
        return f"Not applied here: the {engine.info.name} engine cannot run adaptive k."
    if host.k_from_engine or host.k_fixed_elsewhere:
        return f"Not applied here: the {engine.info.name} engine sets its own k."
    return None


def advise_link(store: Store | None, keys: dict[str, str]) -> str | None:
    """The first screen's line to the advise screen, once the history (`store`, None: off) holds
    ENOUGH_REPLIES replies it can replay (finished, at T = 0); None before."""
    from spectui.store.records import StoreError
    from spectui.tui.keys import key_display

    if store is None:
        return None
    try:
        count = store.replies_at_greedy()
    except StoreError:
        return None
    if count < ENOUGH_REPLIES:
        return None
    return (f"▸ Which drafter and k pay for your chats? Your {count} saved replies can say: "
            f"{key_display(keys['advise'])} or /advise")
