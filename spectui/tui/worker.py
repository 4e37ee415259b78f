"""The generation thread's body: pull Steps from the engine, save each, queue each.

The engine host runs it in a plain daemon thread (spectui.host.waits): a model forward pass
cannot be interrupted, and quitting must not wait for one to finish.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from textual.message import Message as TextualMessage

from spectui.core.engine import Engine
from spectui.core.errors import REPLY_ADVICE, is_out_of_memory, one_line, out_of_memory
from spectui.core.events import Control, GenerationParams, Message, Step
from spectui.host.loading import throttled
from spectui.measure.run import MeasuredReply, run_reply
from spectui.tui.messages import EngineRestarting, PrefillArrived, ReplyEnded, StepArrived, StoreFailed
from spectui.core.pieces import step_pieces
from spectui.store import HistoryQueue, RowId

Post = Callable[[TextualMessage], object]  # a screen's post_message, from the reply's thread


def spectui_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("spectui-") and t.is_alive()]


def restated_arrivals(
    reply_id: int, streamed: Sequence[StepArrived], steps: Sequence[Step]
) -> list[StepArrived] | None:
    """The restated steps, each with its streamed step's arrival time; None if they do not pair up."""
    if len(steps) != len(streamed):
        return None
    restated = []
    for step, before in zip(steps, streamed):
        if step.token_ids != before.step.token_ids:
            return None
        pieces, ghost = step_pieces(step)
        restated.append(StepArrived(reply_id, step, pieces, ghost, before.arrived))
    return restated


def save_restated(store: HistoryQueue, message_id: int | RowId, restated: Sequence[StepArrived], started: float) -> None:
    from spectui.store import StoredStep

    store.replace_steps(
        message_id, [StoredStep(a.step, tuple(a.pieces), a.ghost, a.arrived - started) for a in restated]
    )


def stream_reply(
    engine: Engine,
    messages: Sequence[Message],
    params: GenerationParams,
    control: Control,
    reply_id: int,
    post: Post,
    on_step: Callable[[StepArrived | PrefillArrived], object],
    clock: Callable[[], float] = time.monotonic,
    store: HistoryQueue | None = None,
    message_id: int | RowId | None = None,
    first_index: int = 0,
) -> None:
    """Run one reply to its end: each Step goes to on_step (the screen's inbox), a long
    prompt's prefill progress before them, then exactly one ReplyEnded is posted, whatever happened.
    first_index: the row's steps before these (a reply continued in place)."""
    streamed: list[StepArrived] = []
    if engine.info.capabilities.restarts_itself:  # an engine in its own process, which may have to start again
        engine.set_restart_progress(throttled(lambda stage, done, total: post(EngineRestarting(reply_id, stage, done, total))))

    def arrived(step: Step, reply: MeasuredReply) -> None:
        nonlocal store
        when = reply.arrivals[-1]
        pieces, ghost = step_pieces(step)
        if store is not None and message_id is not None:
            try:
                store.add_step(message_id, first_index + len(streamed), step, pieces, ghost, when - reply.started)
            except Exception as error:  # a full disk must not stop the reply
                post(StoreFailed(one_line(error)))
                store = None
        streamed.append(StepArrived(reply_id, step, pieces, ghost, when))
        on_step(streamed[-1])

    try:
        reply = run_reply(engine, list(messages), params, control, arrived, clock,
                          lambda progress: on_step(PrefillArrived(reply_id, progress.done, progress.total, clock())))
        done = reply.done
        if done is None:
            ended = ReplyEnded(reply_id, None, "the engine ended the reply without saying why", reply.ended)
        else:
            restated = None
            if done.restated_steps is not None:
                restated = restated_arrivals(reply_id, streamed, done.restated_steps)
            if restated is not None and store is not None and message_id is not None:
                try:
                    save_restated(store, message_id, restated, reply.started)
                except Exception as error:
                    post(StoreFailed(one_line(error)))
            ended = ReplyEnded(reply_id, done, None, reply.ended, restated)
    except Exception as error:
        if is_out_of_memory(error):
            error = out_of_memory(error, "generating", REPLY_ADVICE)
        ended = ReplyEnded(reply_id, None, one_line(error), clock())
    post(ended)
