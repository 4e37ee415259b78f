"""The generation thread's body: pull Steps from the engine, save each, queue each.

Plain threads (daemon) rather than Textual's executor: a model forward pass cannot be
interrupted, and quitting must not wait for one to finish.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from spectui.engine import Engine
from spectui.errors import SpectuiError
from spectui.events import Control, Done, GenerationParams, Message, Step
from spectui.tui.messages import (
    EngineFailed,
    EngineProgress,
    EngineReady,
    ReplyEnded,
    StepArrived,
    StoreFailed,
)
from spectui.tui.token_pieces import StepPieces, decoder_for

Post = Callable[[object], object]


def one_line(error: BaseException) -> str:
    if isinstance(error, SpectuiError):
        return str(error)
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__


def spectui_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("spectui-") and t.is_alive()]


def join_threads(prefix: str, timeout: float) -> bool:
    """Wait up to `timeout` s in all for the threads named prefix*; True if none is left."""
    import time

    deadline = time.monotonic() + timeout
    for thread in spectui_threads():
        if thread.name.startswith(prefix):
            thread.join(max(0.0, deadline - time.monotonic()))
    return not any(t.name.startswith(prefix) for t in spectui_threads())


def start_thread(target: Callable[[], None], name: str) -> threading.Thread:
    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.start()
    return thread


def load_engine(engine_factory: Callable, post: Post, clock: Callable[[], float] = time.monotonic) -> None:
    """Call engine_factory(progress) and post EngineReady or EngineFailed."""
    started = clock()
    last: dict[str, float] = {}

    def progress(stage: str, done: int, total: int) -> None:
        fraction = done / total if total else 0.0
        # At most one message per percent per stage: loading must not flood the UI.
        if stage not in last or fraction - last[stage] >= 0.01 or done == total:
            last[stage] = fraction
            post(EngineProgress(stage, done, total))

    try:
        engine = engine_factory(progress)
    except BaseException as error:  # anything, even SystemExit from a library: show it, stay up
        post(EngineFailed(one_line(error)))
        return
    post(EngineReady(engine, clock() - started))


def stream_reply(
    engine: Engine,
    messages: Sequence[Message],
    params: GenerationParams,
    control: Control,
    reply_id: int,
    post: Post,
    on_step: Callable[[StepArrived], object],
    clock: Callable[[], float] = time.monotonic,
    store=None,
    message_id: int | None = None,
) -> None:
    """Run one reply to its end: each Step goes to on_step (the screen's inbox), then
    exactly one ReplyEnded is posted, whatever happened."""
    started = clock()
    splitter = StepPieces(decoder_for(engine))
    index = 0
    try:
        for event in engine.stream(list(messages), params, control):
            if isinstance(event, Step):
                arrived = clock()
                pieces, ghost = splitter.split(event)
                if store is not None and message_id is not None:
                    try:
                        store.add_step(message_id, index, event, pieces, ghost, arrived - started)
                    except Exception as error:  # a full disk must not stop the reply
                        post(StoreFailed(one_line(error)))
                        store = None
                on_step(StepArrived(reply_id, event, pieces, ghost, arrived))
                index += 1
            elif isinstance(event, Done):
                post(ReplyEnded(reply_id, event, None, clock()))
                return
        post(ReplyEnded(reply_id, None, "the engine ended the reply without saying why", clock()))
    except Exception as error:
        post(ReplyEnded(reply_id, None, one_line(error), clock()))
