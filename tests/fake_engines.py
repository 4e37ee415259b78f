"""The suite's fake engines, one family. Each declares its Capabilities, as engines do.

    StepsEngine         replays the given Steps (and Done) as they are, every reply
    PlanEngine          chosen Steps (accepted drafts per step); k and T read from the Control
                        before each step, like a real engine; gated steps; failures on cue
    FixedKEngine        k fixed when built, sources inferred (vLLM's shape); restated records
    ContextLimitEngine  refuses a conversation over its context unless asked to truncate
    ClockedEngine       tokens by position on a virtual clock: speeds are exact numbers
    RecordingEngine     a real engine, keeping the Steps it streamed
    TextEngine          chosen text: each step a list of (piece, source), e.g. a reply with a code fence
    FixedKFactory       builds FixedKEngines for k restarts, recording each k
    ManualTimers        the engine host's timers, fired when the test says

A plain module (not a conftest) so test files import it by name.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import replace

from spectui.core.engine import Capabilities, Engine, EngineInfo
from spectui.core.events import Control, Done, GenerationParams, Message, Source, Step

LIVE = Capabilities(live_controls=True)
FIXED_K = Capabilities(restart_for_k=True, exact_provenance=False)


def fake_info(name: str, method: str, capabilities: Capabilities, target: str = "fake-target",
              draft: str | None = "fake-draft", dtype: str = "fp32", device: str = "cpu") -> EngineInfo:
    return EngineInfo(name, target, draft, method, dtype, device, capabilities)


def word_pieces(token_ids: Sequence[int]) -> tuple[str, ...]:
    return tuple(f" w{i}" for i in token_ids)


class StepsEngine(Engine):
    """Replays `events` (Steps, a Done) as given, every reply; a Done("stop") is added when
    they hold none, unless ends=False (an engine that just stops). `stream_closed` says the
    stream was closed, however it ended."""

    def __init__(self, events: Sequence[Step | Done], target: str = "fake-target", draft: str | None = "fake-draft",
                 method: str = "draft", ends: bool = True) -> None:
        self.events = list(events)
        self.ends = ends
        self.info = fake_info("fake", method, LIVE, target=target, draft=draft)
        self.stream_closed = False
        self.closed = False

    def stream(self, messages, params, control):
        try:
            yield from self.events
            if self.ends and not any(isinstance(event, Done) for event in self.events):
                yield Done("stop", seconds=0.1)
        finally:
            self.stream_closed = True

    def close(self) -> None:
        self.closed = True


class PlanEngine(Engine):
    """Yields one Step per entry of `plan` (accepted drafts that step; None = a target token).

    The k of each step is read from Control when the step starts, like the real engine.
    With gated=True every step after the first waits for `release()`, so a test can act
    between two steps. Token i reads " w<i>" (its piece); rejected drafts are 10000 + j.
    tree_nodes: per entry of `plan`, the nodes of a draft tree that step verified.
    raise_after: the step index at which it raises `error` (a RuntimeError unless given), in
    the first `failing_replies` replies (all when None). `replayed`: the first replies replay
    these events as given (an absurd Step, say); later replies follow `plan`.
    """

    def __init__(
        self,
        plan: Sequence[int | None],
        capabilities: Capabilities = LIVE,
        gated: bool = False,
        raise_after: int | None = None,
        error_after: int | None = None,
        name: str = "fake",
        tree_nodes: Sequence[int | None] | None = None,
        method: str = "draft",
        error: BaseException | None = None,
        failing_replies: int | None = None,
        replayed: Sequence[Sequence[Step | Done]] = (),
    ) -> None:
        self.plan = list(plan)
        self.error = error if error is not None else RuntimeError("boom inside stream")
        self.failing_replies = failing_replies
        self.replayed = [list(events) for events in replayed]
        self.tree_nodes = list(tree_nodes) if tree_nodes is not None else [None] * len(self.plan)
        self.method = method
        self.gated = gated
        self.raise_after = raise_after
        self.error_after = error_after
        self.info = fake_info(name, method, capabilities)
        self.steps: list[Step] = []  # what it yielded, in order, across replies
        self.messages_seen: list[list[Message]] = []
        self.params_seen: list[GenerationParams] = []
        self._gate = threading.Semaphore(0)
        self._next_id = 0
        self.closed = False
        self.margin: float | None = None  # set: every T = 0 token says the target's top-two gap was this

    def release(self, steps: int = 1) -> None:
        for _ in range(steps):
            self._gate.release()

    def decode(self, token_ids) -> str:
        return "".join(word_pieces(token_ids))

    def _ids(self, n: int) -> list[int]:
        ids = list(range(self._next_id, self._next_id + n))
        self._next_id += n
        return ids

    def k_and_temperature(self, control: Control) -> tuple[int, float]:
        return control.snapshot()

    def done(self, steps: list[Step]) -> Done:
        return Done("stop", seconds=0.5, time_to_first_token=0.05)

    def stream(self, messages, params: GenerationParams, control: Control):
        self.messages_seen.append([dict(m) for m in messages])
        self.params_seen.append(params)
        reply = len(self.messages_seen)
        if reply <= len(self.replayed):
            yield from self.replayed[reply - 1]
            return
        failing = self.failing_replies is None or reply <= self.failing_replies
        reply_steps: list[Step] = []
        for index, accepted in enumerate(self.plan):
            if self.gated and index > 0:
                self._gate.acquire(timeout=20)
            if control.cancelled:
                yield Done("cancelled")
                return
            if failing and self.raise_after is not None and index >= self.raise_after:
                raise self.error
            if self.error_after is not None and index >= self.error_after:
                yield Done("error", error="the fake engine gave up")
                return
            k, temperature = self.k_and_temperature(control)
            step = self.make_step(index, accepted, k, temperature)
            if self.margin is not None and temperature == 0:
                step = replace(step, margins=(self.margin,) * len(step.token_ids))
            self.steps.append(step)
            reply_steps.append(step)
            yield step
        yield self.done(reply_steps)

    def make_step(self, index: int, accepted: int | None, k: int, temperature: float) -> Step:
        if accepted is None or k == 0:
            ids = self._ids(1)
            return Step(tuple(ids), (Source.TARGET,), self.decode(ids), k=k, temperature=temperature,
                        draft_seconds=0.0, verify_seconds=0.01, pieces=word_pieces(ids))
        accepted = min(accepted, k)
        ids = self._ids(accepted + 1)
        last = Source.BONUS if accepted == k else Source.RECOVERED
        rejected = [10_000 + j for j in range(k - accepted)]
        return Step(
            tuple(ids), (Source.DRAFT,) * accepted + (last,), self.decode(ids),
            drafted=tuple(ids[:accepted]) + tuple(rejected), k=k, temperature=temperature,
            draft_seconds=0.001 * k, verify_seconds=0.01 * (1 + 0.1 * k), method=self.method,
            tree_nodes=self.tree_nodes[index], pieces=word_pieces(ids), rejected_text=self.decode(rejected),
        )

    def close(self) -> None:
        self.closed = True


class FixedKEngine(PlanEngine):
    """Like vLLM: k is fixed when the engine is built, sources inferred.

    `restate(steps)` gives Done.restated_steps for a reply; `approximate` sets Done.approximate;
    `memory` (a MemoryReading) makes it read its own memory, as vLLM does.
    """

    def __init__(self, plan, k: int, *, approximate: bool = False, restate=None, engine_stats=None,
                 memory=None, **options) -> None:
        capabilities = replace(FIXED_K, memory=memory is not None)
        super().__init__(plan, capabilities, name="vllm", **options)
        self.k = k
        self.approximate = approximate
        self.restate = restate
        self.engine_stats = engine_stats or {}
        self._memory = memory

    @property
    def fixed_k(self) -> int:
        return self.k

    def k_and_temperature(self, control: Control) -> tuple[int, float]:
        return self.k, control.temperature

    def done(self, steps: list[Step]) -> Done:
        restated = self.restate(steps) if self.restate is not None else None
        return Done("stop", seconds=0.5, time_to_first_token=0.05, approximate=self.approximate,
                    restated_steps=restated, engine_stats=dict(self.engine_stats))

    def memory(self):
        return self._memory


class TextEngine(PlanEngine):
    """Yields the chosen text: each step a list of (piece, source), one token per piece, with
    the draft/recovered/bonus shape the sources say. `finish` is the reply's finish reason."""

    def __init__(self, steps: Sequence[Sequence[tuple[str, Source]]], finish: str = "stop", **options) -> None:
        super().__init__([None] * len(steps), **options)
        self.text_steps = [list(step) for step in steps]
        self.finish = finish
        self.vocab: dict[int, str] = {}

    def decode(self, token_ids) -> str:
        return "".join(self.vocab[i] for i in token_ids)

    def make_step(self, index: int, accepted: int | None, k: int, temperature: float) -> Step:
        pieces = tuple(piece for piece, _ in self.text_steps[index])
        sources = tuple(source for _, source in self.text_steps[index])
        ids = self._ids(len(pieces))
        self.vocab.update(zip(ids, pieces))
        drafted = tuple(i for i, source in zip(ids, sources) if source is Source.DRAFT)
        return Step(tuple(ids), sources, "".join(pieces), drafted=drafted, k=max(k, len(drafted)),
                    temperature=temperature, draft_seconds=0.001, verify_seconds=0.01, pieces=pieces)

    def done(self, steps: list[Step]) -> Done:
        return Done(self.finish, seconds=0.5, time_to_first_token=0.05)


class ContextLimitEngine(PlanEngine):
    """Refuses every conversation as too long unless asked to truncate, then drops 2 messages."""

    def __init__(self) -> None:
        super().__init__([None, 2])
        self.truncate_asked: list[bool] = []

    def stream(self, messages, params, control):
        self.truncate_asked.append(params.truncate)
        if not params.truncate:
            self.messages_seen.append([dict(m) for m in messages])
            yield Done("error", error="the conversation is 600 tokens; the model holds 512", context_overflow=(600, 512))
            return
        for event in super().stream(messages, params, control):
            yield replace(event, dropped_messages=2) if isinstance(event, Done) else event


class FixedKFactory:
    """Builds FixedKEngines, one per k asked for, recording every k it builds with.

    `hold()` makes builds wait until `release()`; `failures` are raised by the next builds.
    """

    def __init__(self, plan, **engine_options) -> None:
        self.plan = plan
        self.engine_options = engine_options
        self.built_k: list[int] = []
        self.engines: list[FixedKEngine] = []
        self.failures: list[str] = []
        self._gate = threading.Event()
        self._gate.set()

    def hold(self) -> None:
        self._gate.clear()

    def release(self) -> None:
        self._gate.set()

    def for_k(self, k: int) -> Callable:
        def build(progress):
            progress("starting vLLM", 0, 1)
            self._gate.wait(20)
            self.built_k.append(k)
            if self.failures:
                raise RuntimeError(self.failures.pop(0))
            engine = FixedKEngine(self.plan, k, **self.engine_options)
            self.engines.append(engine)
            progress("starting vLLM", 1, 1)
            return engine

        return build


class Ticks:
    """A clock that moves one second per reading."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


class VirtualClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class ClockedEngine(Engine):
    """Emits `max_tokens` tokens in steps of k + 1; each step costs 1 + k/6 virtual seconds.

    `overheads[path]` adds a fixed time before the first step of successive runs of that
    path, so their speeds differ and the median is a real choice. From call number
    `slow_from_call` on (1-based) every step takes `slowdown` times as long, as on a machine
    whose neighbours woke up. `diverge_at` makes the baseline emit a different token there
    (a broken engine).
    """

    def __init__(self, clock: VirtualClock, overheads: dict[str, list[float]] | None = None, diverge_at: int | None = None,
                 slow_from_call: int | None = None, slowdown: float = 1.5, promised: bool = True):
        self.clock = clock
        self.overheads = {path: list(values) for path, values in (overheads or {}).items()}
        self.diverge_at = diverge_at
        self.slow_from_call = slow_from_call
        self.slowdown = slowdown
        # promised: its kernels guarantee T = 0 identity, so a difference is a bug, not a near-tie
        self.info = fake_info("scripted", "draft", replace(LIVE, greedy_identical=promised), draft=None, dtype="float32")
        self.calls: list[tuple[int, float]] = []

    def stream(self, messages, params, control):
        k, temperature = control.snapshot()
        self.calls.append((k, temperature))
        path = "speculative" if k else "baseline"
        overhead = self.overheads.get(path, [0.0])
        self.clock.now += overhead.pop(0) if len(overhead) > 1 else overhead[0]
        slow = self.slow_from_call is not None and len(self.calls) >= self.slow_from_call
        step_seconds = (1.0 + k / 6) * (self.slowdown if slow else 1.0)
        emitted = 0
        while emitted < params.max_tokens:
            if control.cancelled:
                yield Done("cancelled")
                return
            count = min(k + 1, params.max_tokens - emitted)
            ids = [self.token_at(emitted + i, k) for i in range(count)]
            sources = [Source.DRAFT] * (count - 1) + [Source.BONUS if k else Source.TARGET]
            self.clock.now += step_seconds
            emitted += count
            margins = tuple(0.0039 if emitted - count + i == self.diverge_at else 0.5 for i in range(count))
            yield Step(tuple(ids), tuple(sources), "x" * count, drafted=tuple(ids[:k]), k=k, pieces=("x",) * count,
                       margins=margins)
        yield Done("length", seconds=0.0, time_to_first_token=0.5)

    def token_at(self, position: int, k: int) -> int:
        return 999 if (k == 0 and position == self.diverge_at) else position

    def close(self) -> None:
        pass


class RecordingEngine(Engine):
    """A real engine (the embedded one on tiny weights, say), keeping the Steps it streamed.

    raw_prompt=True sends the last message's text as token ids, past the chat template (the
    tiny tokenizer has none)."""

    def __init__(self, engine, raw_prompt: bool = False) -> None:
        self.inner = engine
        self.info = engine.info
        self.tokenizer = engine.tokenizer  # what the UI decodes per-token pieces with
        self.raw_prompt = raw_prompt
        self.steps: list[Step] = []

    def stream(self, messages, params, control):
        if self.raw_prompt:
            events = self.inner.stream_ids(self.tokenizer(messages[-1]["content"])["input_ids"], params, control)
        else:
            events = self.inner.stream(messages, params, control)
        for event in events:
            if isinstance(event, Step):
                self.steps.append(event)
            yield event

    def close(self) -> None:
        self.inner.close()


class ManualTimers:
    """set_timer for the host whose timers fire when the test says (`fire`), not after a
    wall-clock delay a busy machine stretches."""

    class Timer:
        def __init__(self, timers: "ManualTimers", callback) -> None:
            self.timers, self.callback = timers, callback

        def stop(self) -> None:
            if self in self.timers.pending:
                self.timers.pending.remove(self)

    def __init__(self) -> None:
        self.pending: list[ManualTimers.Timer] = []

    def __call__(self, seconds: float, callback) -> "ManualTimers.Timer":
        timer = ManualTimers.Timer(self, callback)
        self.pending.append(timer)
        return timer

    def fire(self) -> int:
        """Run the pending timers; returns how many ran."""
        due, self.pending = self.pending, []
        for timer in due:
            timer.callback()
        return len(due)


def factory_for(engine) -> Callable:
    return lambda progress: engine
