"""An engine in a process of its own, behind the same Engine protocol.

Why a process: in the chat, the UI and the engine then share no interpreter lock, and a
hard crash of the engine (a segfault in a kernel, the OOM killer) ends a reply instead of
the app: the chat, its history and the screen stay, and the next message starts the engine
again. The child runs the engine on its main thread, as `spectui generate` does.

Parent and child speak over one pipe; the live knobs (k, temperature, auto, cancel) cross in
shared memory, so a key press reaches the step that starts next without a message round.
The slots are a transport, not a second holder: one watcher of the reply's Control (the
chat's LiveSettings and the reply's cancel) writes them, and the child only reads.
Steps carry their per-token pieces from the child's engine: the UI process never loads a
tokenizer.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, MutableSequence, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, cast

from spectui.core.engine import DecodeTimings, Engine, EngineInfo, MemoryReading, Progress
from spectui.core.errors import SpectuiError
from spectui.core.events import Control, Done, Event, GenerationParams, LiveControl, Message

if TYPE_CHECKING:
    from multiprocessing.connection import Connection
    from multiprocessing.process import BaseProcess

Build = Callable[[Progress], Engine]  # build(progress) -> Engine; picklable (a module-level function or partial)
# The live knobs' shared doubles (a multiprocessing Array without a lock), indexed by the slots below.
Slots = MutableSequence[float]

# Shared slots for the live knobs.
K, TEMPERATURE, AUTO, CANCELLED = range(4)
START_SECONDS = 600.0  # a first load may convert weights: minutes on a slow disk


class EngineProcessDied(SpectuiError):
    pass


class SharedControl:
    """The child's view of the parent's Control: read before every step, like Control."""

    def __init__(self, values: Slots) -> None:
        self._values = values

    @property
    def k(self) -> int:
        return int(self._values[K])

    @property
    def temperature(self) -> float:
        return float(self._values[TEMPERATURE])

    @property
    def auto(self) -> bool:
        return bool(self._values[AUTO])

    @property
    def cancelled(self) -> bool:
        return bool(self._values[CANCELLED])

    def snapshot(self) -> tuple[int, float]:
        return self.k, self.temperature


def write_slots(control: Control, values: Slots) -> None:
    """The slots, from what the control reads now (the one writer of them while a reply runs)."""
    live = control.values
    values[K] = live.k
    values[TEMPERATURE] = live.temperature
    values[AUTO] = float(live.auto)
    values[CANCELLED] = float(control.cancelled)


def ready_reply(engine: Engine) -> tuple:
    """What the parent learns of the loaded engine: its info, its context, and the v(k) slope
    it timed here (ggml at load), which the parent cannot read otherwise (the first screen's cost)."""
    return ("ready", engine.info, engine.context_length, engine.measured_verify_slope)


def serve(connection: Connection, values: Slots, build: Build) -> None:
    """The child's main loop: build the engine, then answer one request at a time."""
    import signal

    from spectui.core.errors import one_line

    # The app decides when this process ends: a Ctrl+C meant for the app's process group
    # must not kill a reply here.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    app = leave_with_parent()

    def progress(stage: str, done: int, total: int) -> None:
        connection.send(("progress", stage, done, total))

    try:
        engine = build(progress)
    except BaseException as error:  # SystemExit from a library too: the parent shows it
        connection.send(("failed", one_line(error)))
        return
    connection.send(ready_reply(engine))
    answer_requests(connection, engine, SharedControl(values), app)
    try:
        engine.close()
    except Exception:
        pass


def answer_requests(connection: Connection, engine: Engine, control: LiveControl, app: int) -> None:
    """One request at a time until the parent closes or leaves: a method's info, or a reply
    streamed back event by event (its failure as one line)."""
    from spectui.core.errors import REPLY_ADVICE, is_out_of_memory, one_line, out_of_memory

    variants = {engine.info.method: engine}

    def variant(method: str) -> Engine:
        # A view made before a restart asks the new process for its method by name.
        if method not in variants:
            variants[method] = engine.with_method(method)
        return variants[method]

    settled = False
    while True:
        try:
            if not settled:  # idle: finish what loading put off, until a request comes
                settled = settle_while_idle(engine, connection)
            request = connection.recv()
        except (EOFError, OSError):  # the parent is gone
            break
        if request[0] == "close":
            break
        try:
            if request[0] == "method":
                connection.send(("info", variant(request[1]).info))
                continue
            if request[0] == "time_decodes":
                connection.send(("timed", timed_decodes(engine, connection, app, *request[1:])))
                continue
            _, method, messages, params = request
            drafting = variant(method)
            for event in measured_stream(drafting, messages, params, cast(Control, control), app):  # engines read its LiveControl part
                # A Prefill crosses as a step does: the parent yields both as they come.
                connection.send(("done" if isinstance(event, Done) else "step", event))
        except (BrokenPipeError, EOFError):
            break
        except Exception as error:
            if is_out_of_memory(error):
                error = out_of_memory(error, "generating", REPLY_ADVICE)
            connection.send(("error", one_line(error)))


def measured_stream(engine: Engine, messages: Sequence[Message], params: GenerationParams, control: Control,
                    app: int) -> Iterator[Event]:
    """The reply on the cores the other processes leave free (the app's own CPU is ours);
    its Done says what share of the cores they took meanwhile: its timings' worth."""
    from spectui.engines.threads import cpu_sample, free_cores, others_share

    engine.use_threads(free_cores(also_ours=app))
    started = cpu_sample(also_ours=app)
    for event in engine.stream(messages, params, control):
        if isinstance(event, Done):
            event = replace(event, neighbour_share=others_share(started, cpu_sample(also_ours=app)))
        yield event


def timed_decodes(engine: Engine, connection: Connection, app: int, context_ids: list[int], widest: int,
                  rounds: int) -> DecodeTimings:
    """engine.time_decodes on the cores the other processes leave free, its progress sent as it
    goes; the share of the cores they took meanwhile, the app's own CPU not counted."""
    from spectui.engines.threads import cpu_sample, free_cores, others_share

    engine.use_threads(free_cores(also_ours=app))
    started = cpu_sample(also_ours=app)
    timings = engine.time_decodes(context_ids, widest, rounds,
                                  lambda stage, done, total: connection.send(("progress", stage, done, total)))
    return replace(timings, neighbour_share=others_share(started, cpu_sample(also_ours=app)))


def settle_while_idle(engine: Engine, connection: Connection) -> bool:
    """engine.settle() until a request is waiting; True once settled. A failure here only
    leaves the engine as it loaded (as fast as before), so it ends the settling, not the engine."""
    try:
        return engine.settle(stop=connection.poll)
    except (EOFError, OSError):
        raise
    except Exception:
        return True


def leave_with_parent() -> int:
    """Exit when the app's process is gone, even mid-load or mid-reply (a SIGKILLed app
    runs no cleanup): a daemon thread watches the parent pid, which is returned. prctl's parent-death signal
    would fire when the thread that started this process ends, which is the loading thread."""
    import os
    import time

    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=watch, name="spectui-parent-watch", daemon=True).start()
    return parent


def start_resource_tracker() -> None:
    """Every spawn needs multiprocessing's resource tracker, and the tracker is started with
    `sys.stderr.fileno()`: under Textual that is a capture whose fileno() is -1, and the
    spawn fails ("bad value(s) in fds_to_keep"). Then the tracker gets /dev/null instead."""
    import os
    import sys
    from multiprocessing import resource_tracker

    try:
        usable = sys.stderr.fileno() >= 0
    except Exception:
        usable = False
    if usable:
        resource_tracker.ensure_running()
        return
    saved = sys.stderr
    with open(os.devnull, "w") as devnull:
        sys.stderr = devnull
        try:
            resource_tracker.ensure_running()
        finally:
            sys.stderr = saved


def process_info(info: EngineInfo) -> EngineInfo:
    """The child engine's info as the parent offers it: the process restarts itself and reads
    its memory; prompt ids are the child's own business."""
    return replace(info, capabilities=replace(info.capabilities, restarts_itself=True, memory=True, tokenizer=False))


class ProcessEngine(Engine):
    """The parent's side: an Engine whose stream() relays what the child's engine yields."""

    def __init__(self, build: Build, progress: Progress | None = None) -> None:
        import multiprocessing

        self._build = build
        self._context = multiprocessing.get_context("spawn")  # fork would copy the UI's threads
        self._lock = threading.Lock()  # one request on the pipe at a time
        self._process: BaseProcess | None = None
        # progress(stage, done, total) while a reply starts the process again (set_restart_progress)
        self._restart_progress: Progress | None = None
        self.info: EngineInfo
        self._context_length: int | None = None
        self._start(progress)

    def _start(self, progress: Progress | None) -> None:
        start_resource_tracker()
        self._values: Slots = self._context.Array("d", 4, lock=False)
        self._connection, child_end = self._context.Pipe()
        self._process = process = self._context.Process(
            target=serve, args=(child_end, self._values, self._build), name="spectui-engine", daemon=True
        )
        process.start()
        child_end.close()
        while True:
            reply = self._receive(START_SECONDS, "loading")
            if reply[0] == "progress":
                if progress is not None:
                    progress(*reply[1:])
            elif reply[0] == "ready":
                self.info, self._context_length = process_info(reply[1]), reply[2]
                self.measured_verify_slope = reply[3]
                return
            else:
                self._stop()
                raise SpectuiError(reply[1])

    def _receive(self, timeout: float | None, doing: str):
        try:
            if timeout is not None and not self._connection.poll(timeout):
                raise EngineProcessDied(f"the engine process did not answer within {timeout:.0f} s while {doing}")
            return self._connection.recv()
        except (EOFError, OSError):
            process = self._started()
            process.join(5)
            raise EngineProcessDied(f"the engine process ended while {doing} ({exit_description(process.exitcode)})")

    def _started(self) -> BaseProcess:
        assert self._process is not None, "__init__ starts the process before anything talks to it"
        return self._process

    @property
    def context_length(self) -> int | None:
        return self._context_length

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.is_alive()

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def with_method(self, method: str) -> "MethodView":
        """A view drafting by `method` (the child keeps the variant, sharing its target)."""
        with self._lock:
            self._connection.send(("method", method))
            reply = self._receive(60.0, "switching method")
        if reply[0] == "error":
            raise SpectuiError(reply[1])
        return MethodView(self, process_info(reply[1]))

    def stream(self, messages: Sequence[Message], params: GenerationParams, control: Control) -> Iterator[Event]:
        return self.stream_method(self.info.method, messages, params, control)

    def time_decodes(self, context_ids: Sequence[int], widest: int, rounds: int,
                     progress: Progress | None = None) -> DecodeTimings:
        """The child's engine times them, after the reply in flight (one request at a time). A
        progress that raises (its screen closed) is raised once the child has answered."""
        failed: BaseException | None = None
        with self._lock:
            if not self.alive:
                raise EngineProcessDied("the engine process had ended: the next message starts it again")
            self._connection.send(("time_decodes", list(context_ids), widest, rounds))
            while True:
                reply = self._receive(None, "timing decodes")
                if reply[0] != "progress":
                    break
                if progress is not None and failed is None:
                    try:
                        progress(*reply[1:])
                    except BaseException as error:  # the pipe is read to the answer all the same
                        failed = error
        if failed is not None:
            raise failed
        if reply[0] == "error":
            raise SpectuiError(reply[1])
        return reply[1]

    def set_restart_progress(self, progress: Progress | None) -> None:
        """Who hears progress(stage, done, total) when a reply must start the process again:
        a reload of the weights is seconds to minutes the UI should not call streaming."""
        self._restart_progress = progress

    def stream_method(
        self, method: str, messages: Sequence[Message], params: GenerationParams, control: Control
    ) -> Iterator[Event]:
        with self._lock:
            if not self.alive:
                # The last reply saw it die: this message starts it again, as promised then.
                if self._restart_progress is not None:
                    self._restart_progress("starting the engine process", 0, 0)
                self._start(self._restart_progress)
            write_slots(control, self._values)
            stop_writing = control.watch(lambda: write_slots(control, self._values))
            ended = False
            try:
                self._connection.send(("stream", method, list(messages), params))
                while True:
                    try:
                        reply = self._receive(None, "generating")
                    except EngineProcessDied as error:
                        ended = True
                        yield Done("error", error=f"{error}; it starts again with the next message")
                        return
                    if reply[0] == "step":
                        yield reply[1]
                    else:
                        ended = True
                        if reply[0] == "done":
                            yield reply[1]
                            return
                        raise SpectuiError(reply[1])
            finally:
                stop_writing()
                if not ended:
                    self._abandon()

    def _abandon(self) -> None:
        """The caller stopped reading mid-reply: end the child's reply so that the next
        request does not read this one's leftovers."""
        self._values[CANCELLED] = 1.0
        try:
            while True:
                reply = self._receive(30.0, "cancelling")
                if reply[0] in ("done", "error"):
                    return
        except EngineProcessDied:
            process = self._started()
            process.kill()
            process.join(5)

    def memory(self) -> MemoryReading | None:
        from spectui.measure.metrics import tree_rss

        return tree_rss()

    def close(self) -> None:
        if self._process is None:
            return
        try:
            self._connection.send(("close",))
        except (BrokenPipeError, OSError):
            pass
        self._stop()

    def _stop(self) -> None:
        process = self._started()
        process.join(10)
        if process.is_alive():
            process.kill()
            process.join(5)
        self._connection.close()


class MethodView(Engine):
    """ProcessEngine.with_method's result: the same child, another proposer."""

    def __init__(self, base: ProcessEngine, info: EngineInfo) -> None:
        self._base = base
        self.info = info
        self.measured_verify_slope = base.measured_verify_slope  # one target: one v(k)

    @property
    def context_length(self) -> int | None:
        return self._base.context_length

    def stream(self, messages: Sequence[Message], params: GenerationParams, control: Control) -> Iterator[Event]:
        return self._base.stream_method(self.info.method, messages, params, control)

    def with_method(self, method: str) -> MethodView:
        return self._base.with_method(method)

    def set_restart_progress(self, progress: Progress | None) -> None:
        self._base.set_restart_progress(progress)

    def time_decodes(self, context_ids: Sequence[int], widest: int, rounds: int,
                     progress: Progress | None = None) -> DecodeTimings:
        return self._base.time_decodes(context_ids, widest, rounds, progress)

    def memory(self) -> MemoryReading | None:
        return self._base.memory()

    def close(self) -> None:
        pass  # the base engine owns the process


def exit_description(exitcode: int | None) -> str:
    import signal

    if exitcode is None:
        return "still running"
    if exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exit code {exitcode}"
