"""The one contract between engines and everything above them.

Stdlib only: the CLI, the TUI, the store and every engine import this module, and
none of them should pay for torch or textual to do so.
"""

from __future__ import annotations

import enum
import threading
from dataclasses import dataclass, field
from collections.abc import Callable
from typing import Literal, Protocol, TypedDict


class Source(enum.Enum):
    """Where an emitted token came from (vLLM's RejectionSampler vocabulary)."""

    DRAFT = "draft"  # drafted and accepted by the target
    RECOVERED = "recovered"  # the target's token at the first rejected position
    BONUS = "bonus"  # the target's extra token after all k drafts were accepted
    TARGET = "target"  # a plain target token: baseline, k = 0, the first token


class Message(TypedDict):
    role: str
    content: str


# AutoChoice.reason of a plain step taken because prompt lookup found nothing to copy
NOTHING_TO_COPY = "nothing to copy: a plain step"


@dataclass(frozen=True)
class AutoChoice:
    """Why adaptive k chose this step's k (spectui.engines.adaptive)."""

    k: int
    predicted_speedup: float | None  # expected tokens/s at k over plain decoding
    realised_speedup: float | None  # what recent steps delivered, over plain decoding
    reason: str  # one line: "α 0.82, draft 0.21× target → k 5"


@dataclass(frozen=True)
class Step:
    """One verify step: one target forward pass and what it emitted."""

    token_ids: tuple[int, ...]
    sources: tuple[Source, ...]
    text: str  # decoded text delta for these tokens (may lag on partial UTF-8)
    drafted: tuple[int, ...] = ()  # every proposed id, rejected ones included
    k: int = 0  # k in force for this step (the control's value when it started)
    temperature: float = 0.0
    draft_seconds: float = 0.0
    verify_seconds: float = 0.0
    exact: bool = True  # False when provenance was inferred (vLLM chunk sizes)
    method: str = ""  # proposer that drafted this step ("draft", "ngram", "" for none)
    # How many were proposed when the ids are not known (vLLM reports counts, not ids).
    draft_count: int | None = None
    # How many drafts the target accepted, when the reply stopped inside this step (a stop
    # token, max_tokens) before all of them were emitted; None: the DRAFT tokens shown.
    accepted_count: int | None = None
    auto: AutoChoice | None = None  # set when adaptive k chose k
    # A tree step: how many drafted nodes the target verified in its one forward (drafted
    # then holds the path it took and the first candidate it turned down). None for a chain.
    tree_nodes: int | None = None
    # The text of each emitted token (joined: `text`), so every token can carry its source's
    # colour without a tokenizer where it is shown; () when the engine could not split it.
    pieces: tuple[str, ...] = ()
    rejected_text: str = ""  # the rejected drafts as text, for the ghost view
    # At T = 0, for each emitted token: the target's top logit minus its second (the margin a
    # rounding difference would have to cross to flip it); () where the engine does not know.
    margins: tuple[float, ...] = ()
    # How many drafts the target ran rows for, when it stopped before the rest: a verify run in
    # pieces ends at the piece of its first rejection. None: every draft was run.
    verified_count: int | None = None

    def __post_init__(self) -> None:
        if len(self.token_ids) != len(self.sources):
            raise ValueError("a Step needs one source per token")

    @property
    def num_drafted(self) -> int:
        return self.draft_count if self.draft_count is not None else len(self.drafted)

    @property
    def num_verified(self) -> int:
        """The drafts the verify forwards held (its cost grows with them, not with num_drafted)."""
        return self.verified_count if self.verified_count is not None else self.num_drafted

    @property
    def num_accepted(self) -> int:
        if self.accepted_count is not None:
            return self.accepted_count
        return sum(1 for s in self.sources if s is Source.DRAFT)

    @property
    def rejected(self) -> tuple[int, ...]:
        """Drafted ids the target did not keep (for the ghost view); () when only counts are known."""
        return self.drafted[self.num_accepted :]


@dataclass(frozen=True)
class Prefill:
    """A long prompt's prefill under way, before the reply's first Step: `done` of `total`
    prompt tokens the engine had not cached. An engine may send none (a server, a short
    prompt); a consumer that shows no progress skips it."""

    done: int
    total: int


FinishReason = Literal["stop", "length", "cancelled", "error"]


@dataclass(frozen=True)
class Done:
    """End of one reply: why it ended, and engine-side numbers to reconcile with."""

    finish_reason: FinishReason
    prompt_token_ids: tuple[int, ...] = ()
    seconds: float = 0.0  # first step start to last step end (prefill included)
    time_to_first_token: float = 0.0
    error: str | None = None  # one line, for finish_reason == "error"
    engine_stats: dict = field(default_factory=dict)
    # Provenance was inferred and some of it could not be paired with the engine's counters.
    approximate: bool = False
    # The whole reply's steps again, coloured from the engine's final per-step record, when
    # that record corrected what was streamed (same tokens, other sources).
    restated_steps: tuple[Step, ...] | None = None
    # (prompt tokens, the model's context) when the conversation did not fit: the UI can
    # offer to resend it with GenerationParams.truncate.
    context_overflow: tuple[int, int] | None = None
    dropped_messages: int = 0  # the oldest messages left out so that the conversation fits
    # The share of the CPU's cores (0..1) other processes kept busy while the reply ran, where
    # the engine measured it: timings from a busy machine are not comparable with others
    neighbour_share: float | None = None
    stop_token_id: int | None = None  # the token that ended a "stop" reply (the last of token_ids)


# What Engine.stream yields: Prefill progress (maybe), one Step per target forward, one Done.
Event = Prefill | Step | Done


@dataclass(frozen=True)
class GenerationParams:
    """What is fixed for one reply. k and temperature are live: LiveSettings, read through `Control`."""

    max_tokens: int = 256
    top_p: float = 1.0
    seed: int | None = 0
    stop_token_ids: tuple[int, ...] = ()
    # Leave out the oldest turns when the conversation is longer than the model's context.
    truncate: bool = False
    # A template with a thinking switch (Capabilities.thinking_switch): on, off, or None for its default.
    thinking: bool | None = None


K_MAX = 16
TEMPERATURE_MAX = 2.0  # as vLLM and the OpenAI API cap it
TEMPERATURE_STEP = 0.1  # one key press


class LiveControl(Protocol):
    """The live knobs as an engine reads them before every step: Control, and
    spectui.engines.process.SharedControl (a child process's view of one)."""

    @property
    def k(self) -> int: ...

    @property
    def temperature(self) -> float: ...

    @property
    def auto(self) -> bool: ...

    @property
    def cancelled(self) -> bool: ...

    def snapshot(self) -> tuple[int, float]: ...


@dataclass(frozen=True)
class LiveValues:
    k: int
    auto: bool  # adaptive k: the engine picks each step's k, starting from `k`
    temperature: float

    def __post_init__(self) -> None:
        check_k(self.k)
        check_temperature(self.temperature)


@dataclass(frozen=True)
class Changes:
    """How many times each live setting has changed: a reply that started from other values
    than the live ones (a regenerated reply) keeps each until that setting changes."""

    k: int = 0
    auto: int = 0
    temperature: int = 0


LiveWatcher = Callable[[LiveValues, LiveValues], None]  # (before, after)


class LiveSettings:
    """The live settings of a chat, held once: k, adaptive k, temperature.

    A key press changes them here (the UI's thread) and the watchers hear of it there: the
    panels and bar, the k-restart logic, an engine process's shared slots. A running reply's
    engine reads them from its own thread through its Control: one frozen LiveValues at a
    time, so k and temperature are a consistent pair for a step.
    """

    def __init__(self, k: int = 4, auto: bool = False, temperature: float = 0.0) -> None:
        self._state = (LiveValues(k, bool(auto), float(temperature)), Changes())
        self._lock = threading.Lock()  # one update at a time; readers take _state whole
        self._watchers: list[LiveWatcher] = []

    @property
    def state(self) -> tuple[LiveValues, Changes]:
        return self._state

    @property
    def values(self) -> LiveValues:
        return self._state[0]

    @property
    def k(self) -> int:
        return self._state[0].k

    @property
    def auto(self) -> bool:
        return self._state[0].auto

    @property
    def temperature(self) -> float:
        return self._state[0].temperature

    def update(self, *, k: int | None = None, auto: bool | None = None, temperature: float | None = None) -> None:
        """Change some values (checked); watchers hear of it if anything changed."""
        with self._lock:
            before, changes = self._state
            after = LiveValues(before.k if k is None else k, before.auto if auto is None else bool(auto),
                               before.temperature if temperature is None else temperature)
            if after == before:
                return
            self._state = (after, Changes(changes.k + (after.k != before.k), changes.auto + (after.auto != before.auto),
                                          changes.temperature + (after.temperature != before.temperature)))
        for watcher in list(self._watchers):
            watcher(before, after)

    def watch(self, watcher: LiveWatcher) -> Callable[[], None]:
        """Call watcher(before, after) after every change; returns what stops it."""
        self._watchers.append(watcher)
        return lambda: self._watchers.remove(watcher) if watcher in self._watchers else None


class Control:
    """One run's knobs, read by its engine before every step (LiveControl): the values from
    one LiveSettings, which the control reads and never copies, and the run's own cancel."""

    def __init__(self, k: int = 4, temperature: float = 0.0, auto: bool = False) -> None:
        """A run whose settings are its own and nobody changes while it runs: the command
        line, the bench, one run of the compare view (a baseline at k = 0 beside k, a sweep's
        every k: never the chat's one k)."""
        self._read(LiveSettings(k, auto, temperature), None)

    @classmethod
    def reading(cls, live: LiveSettings, start: LiveValues | None = None) -> Control:
        """A chat reply's: reads the chat's live settings, so a key press reaches its next
        step. `start` (a regenerated reply's values) stands in for each setting until it changes."""
        control = cls.__new__(cls)
        control._read(live, start)
        return control

    def _read(self, live: LiveSettings, start: LiveValues | None) -> None:
        self.live = live
        self._start = start if start is not None and start != live.values else None
        self._since = live.state[1]
        self._cancelled = threading.Event()
        self._cancel_watchers: list[Callable[[], None]] = []

    @property
    def values(self) -> LiveValues:
        """What this run reads now: the live values, or its start values not changed since."""
        values, changes = self.live.state
        start, since = self._start, self._since
        if start is None:
            return values
        return LiveValues(
            values.k if changes.k != since.k else start.k,
            values.auto if changes.auto != since.auto else start.auto,
            values.temperature if changes.temperature != since.temperature else start.temperature,
        )

    @property
    def k(self) -> int:
        return self.values.k

    @property
    def auto(self) -> bool:
        return self.values.auto

    @property
    def temperature(self) -> float:
        return self.values.temperature

    def snapshot(self) -> tuple[int, float]:
        values = self.values
        return values.k, values.temperature

    def watch(self, callback: Callable[[], None]) -> Callable[[], None]:
        """callback() after every change of what this run reads (a setting, the cancel): an
        engine in another process writes its shared slots from here. Returns what stops it."""
        self._cancel_watchers.append(callback)
        stop_live = self.live.watch(lambda before, after: callback())

        def stop() -> None:
            stop_live()
            if callback in self._cancel_watchers:
                self._cancel_watchers.remove(callback)

        return stop

    def cancel(self) -> None:
        self._cancelled.set()
        for callback in list(self._cancel_watchers):
            callback()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()


def check_k(k: int) -> int:
    """The one rule for k, used by LiveValues, the command line, the config file and the bench."""
    if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= K_MAX:
        raise ValueError(f"k must be an integer from 0 to {K_MAX}, got {k!r}")
    return k


def check_temperature(temperature: float) -> float:
    """The one rule for temperature: a finite number from 0 to TEMPERATURE_MAX (NaN and inf fail)."""
    number = not isinstance(temperature, bool) and isinstance(temperature, (int, float))
    if not number or not 0.0 <= temperature <= TEMPERATURE_MAX:
        raise ValueError(f"temperature must be from 0 to {TEMPERATURE_MAX:g}, got {temperature!r}")
    return float(temperature)
