"""Run one reply to the end, timed, and keep what it produced. Stdlib only.

`run_reply` is the one way a reply is run and timed: `generate`, compare (CLI and view),
bench and the chat's reply thread all call it; `reply_json` writes a reply in the one shape of
spectui.core.record.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from spectui.core.engine import Engine
from spectui.core.errors import SpectuiError
from spectui.core.events import Control, Done, GenerationParams, Message, Prefill, Step
from spectui.core.record import model_record, reply_record
from spectui.core.stats import ReplyStats, summarize
from spectui.measure.speed import decode_tokens_per_s, tokens_per_s

Clock = Callable[[], float]
# Far above any k (K_MAX) or draft tree: a step claiming more drafts comes from a broken
# engine, and counting it would size per-position lists by it (1e11 was a MemoryError).
MAX_STEP_DRAFTS = 1024


def check_step(step: Step) -> None:
    """Refuse a Step whose numbers no engine can mean: one line that ends the reply."""
    drafted = step.num_drafted
    if not 0 <= drafted <= MAX_STEP_DRAFTS or not 0 <= step.num_accepted <= max(drafted, len(step.token_ids)):
        raise SpectuiError(
            f"the engine sent a step of {drafted} drafted and {step.num_accepted} accepted tokens"
            f" (at most {MAX_STEP_DRAFTS}): the reply ends here"
        )


def prompt_messages(prompt: str, system: str | None = None) -> list[Message]:
    """One user turn, after the system message when there is one."""
    messages: list[Message] = [{"role": "system", "content": system}] if system else []
    messages.append({"role": "user", "content": prompt})
    return messages


def settle_before_timing(engine: Engine, progress: Callable[[str, int, int], None]) -> None:
    """Timed replies measure the engine as a chat runs it once idle (Engine.settle)."""
    engine.settle(progress=lambda done, total: progress("repack", done, total))


@dataclass
class MeasuredReply:
    """One reply's record: its steps, its Done, and when things happened on the caller's clock.
    (Not the loop's reply in progress, LoopReply, nor a bench arm's reply, ArmReply, nor a llama.cpp
    anchor's, AnchorReply.)"""

    steps: list[Step] = field(default_factory=list)
    done: Done | None = None
    started: float = 0.0  # just before engine.stream was called
    ended: float = 0.0  # when the Done arrived (or the stream ended without one)
    arrivals: list[float] = field(default_factory=list)  # when each step arrived
    first_token_at: float | None = None  # when the first step with tokens arrived
    first_chunk_tokens: int = 1  # how many tokens that step brought

    def add(self, step: Step, arrived: float) -> None:
        self.steps.append(step)
        self.arrivals.append(arrived)
        if step.token_ids and self.first_token_at is None:
            self.first_token_at = arrived
            self.first_chunk_tokens = len(step.token_ids)

    def finish(self, done: Done) -> None:
        """Keep the Done; an engine's restated colouring replaces what was streamed."""
        self.done = done
        if done.restated_steps is not None:
            self.steps = list(done.restated_steps)

    @property
    def text(self) -> str:
        return "".join(step.text for step in self.steps)

    @property
    def token_ids(self) -> list[int]:
        return [t for step in self.steps for t in step.token_ids]

    @property
    def stats(self) -> ReplyStats:
        return summarize(self.steps, self.done.seconds if self.done else 0.0)

    @property
    def finish_reason(self) -> str | None:
        return self.done.finish_reason if self.done else None

    @property
    def num_tokens(self) -> int:
        return sum(len(step.token_ids) for step in self.steps)

    @property
    def wall_seconds(self) -> float:
        return self.ended - self.started

    @property
    def first_token_seconds(self) -> float | None:
        return None if self.first_token_at is None else self.first_token_at - self.started

    @property
    def tokens_per_s(self) -> float | None:
        """Wall-clock speed, prefill and any engine overhead included."""
        return tokens_per_s(self.num_tokens, self.wall_seconds)

    @property
    def decode_tokens_per_s(self) -> float | None:
        """Speed after the first token (measure.speed.decode_tokens_per_s): what speedups divide."""
        return decode_tokens_per_s(self.num_tokens, self.wall_seconds, self.first_token_seconds, self.first_chunk_tokens)


def reply_json(reply: MeasuredReply, engine: Engine, k: int | None) -> dict:
    """The reply's record (spectui.core.record.reply_record), timed, and the engine and k that
    wrote it: `generate --json`, each path of `compare --json` and benchmarks/gpu_vllm.py."""
    record = reply_record(reply.steps, reply.done, reply.stats.as_dict(), reply.tokens_per_s)
    return {**record, "model": model_record(engine.info, k)}


def run_reply(
    engine: Engine,
    messages: Sequence[Message],
    params: GenerationParams,
    control: Control,
    on_step: Callable[[Step, MeasuredReply], object] | None = None,
    clock: Clock = time.perf_counter,
    on_prefill: Callable[[Prefill], object] | None = None,
) -> MeasuredReply:
    """Stream one reply to its Done, timing it on `clock`: on_step(step, reply) as each step
    arrives (reply.arrivals[-1] is when), on_prefill(progress) as a long prompt prefills.
    An engine's exception propagates to the caller."""
    reply = MeasuredReply(started=clock())
    stream = iter(engine.stream(messages, params, control))
    try:
        for event in stream:
            if isinstance(event, Done):
                reply.ended = clock()
                for step in event.restated_steps or ():
                    check_step(step)
                reply.finish(event)
                break
            if isinstance(event, Prefill):
                if on_prefill is not None:
                    on_prefill(event)
                continue
            check_step(event)
            reply.add(event, clock())
            if on_step is not None:
                on_step(event, reply)
        else:  # an engine that forgot its Done still ran until now
            reply.ended = clock()
    finally:
        close = getattr(stream, "close", None)
        if close is not None:
            close()
    return reply
