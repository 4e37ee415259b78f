"""vLLM in-process: AsyncLLM with a speculative_config, streamed as Steps.

vLLM runs on an asyncio loop in a thread of its own; `stream` is the synchronous
iterator every spectui engine offers. Each DELTA output is one engine step for our
request, and a stat logger hands over vLLM's own counters for the same step, so the
colouring comes from the engine's counts, not from a guess at chunk sizes.
"""

from __future__ import annotations

import asyncio
import itertools
import queue
import threading
import time
from collections.abc import Coroutine, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from spectui.core.engine import Capabilities, Engine, EngineInfo
from spectui.core.pieces import StepPieces, tokenizer_decoder
from spectui.engines.prompt import chat_prompt_ids, has_thinking_switch, stop_token_ids, stream_conversation
from spectui.engines.provenance import StepCount, counted_step, is_unambiguous, rebuild, restate, split_chunk
from spectui.core.events import Control, Done, Event, FinishReason, GenerationParams, Message, Step
from spectui.measure.metrics import MemoryReading

FINISH_REASONS: dict[str, FinishReason] = {"stop": "stop", "length": "length", "abort": "cancelled"}
POLL_SECONDS = 0.05  # how often a waiting stream looks at the cancel flag
CAPABILITIES = Capabilities(exact_provenance=False, restart_for_k=True, memory=True, tokenizer=True, exclusive_device=True)


@dataclass
class StepCounter:
    """What vLLM's stat logger saw, one StepCount per engine step, in order.

    Written on the engine's loop thread (the logger) and read on the same thread (the
    request's coroutine), so it needs no lock. spectui runs one request at a time, so an
    engine step's counters are that request's.
    """

    pending: list[StepCount] = field(default_factory=list)

    def take(self) -> list[StepCount]:
        taken, self.pending = self.pending, []
        return taken


def stat_logger_factory(counter: StepCounter):
    """A vLLM per-engine stat logger factory that appends each step's counts to `counter`."""
    from vllm.v1.metrics.loggers import StatLoggerBase

    class StepCountLogger(StatLoggerBase):
        def __init__(self, vllm_config: Any, engine_index: int = 0) -> None:
            pass

        def record(self, scheduler_stats: Any, iteration_stats: Any, mm_cache_stats: Any = None, engine_idx: int = 0) -> None:
            generated = iteration_stats.num_generation_tokens if iteration_stats is not None else 0
            spec = scheduler_stats.spec_decoding_stats if scheduler_stats is not None else None
            if spec is None:
                counter.pending.append(StepCount(generated, 0, 0))
            else:
                counter.pending.append(StepCount(generated, spec.num_draft_tokens, spec.num_accepted_tokens))

        def log_engine_initialized(self) -> None:
            pass

    return lambda vllm_config, engine_index=0: StepCountLogger(vllm_config, engine_index)


class VllmEngine(Engine):
    """One vLLM engine; k is fixed at start (a different k means a new engine)."""

    def __init__(self, engine_args: Any, tokenizer: Any, generation_config: Any, info: EngineInfo, k: int, pool_bytes: int | None = None) -> None:
        self.info = replace(info, capabilities=replace(CAPABILITIES, thinking_switch=has_thinking_switch(tokenizer)))
        self.k = k
        self.tokenizer = tokenizer
        self.stop_ids = stop_token_ids(tokenizer, generation_config)
        self.pool_bytes = pool_bytes
        self._counter = StepCounter()
        self._request_ids = itertools.count()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="vllm-loop", daemon=True)
        self._thread.start()
        try:
            self._llm = self._call(self._start(engine_args))
        except BaseException:
            self._stop_loop()
            raise

    async def _start(self, engine_args: Any):
        from vllm.v1.engine.async_llm import AsyncLLM

        # Built on our loop so vLLM's output handler runs there, beside the stat logger.
        return AsyncLLM.from_engine_args(engine_args, stat_loggers=[stat_logger_factory(self._counter)])

    def _running(self):  # the AsyncLLM (vLLM's types stay out of the checked code)
        assert self._llm is not None, "a closed engine is asked for no replies"
        return self._llm

    def _call(self, coroutine: Coroutine[Any, Any, Any]):
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    @property
    def fixed_k(self) -> int:
        return self.k

    def prompt_ids(self, messages: Sequence[Message]) -> list[int]:
        return chat_prompt_ids(self.tokenizer, messages)

    def stream(self, messages: Sequence[Message], params: GenerationParams, control: Control) -> Iterator[Event]:
        yield from stream_conversation(self, messages, params, control, self.context_length)

    @property
    def context_length(self) -> int | None:
        return getattr(getattr(self._llm, "model_config", None), "max_model_len", None)

    def stream_ids(self, prompt_ids: Sequence[int], params: GenerationParams, control: Control) -> Iterator[Step | Done]:
        """One request on raw prompt ids; Steps as vLLM's outputs arrive, then one Done."""
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        temperature = control.temperature  # fixed for the request, like k
        stop_ids = self.stop_ids | set(params.stop_token_ids)
        sampling = SamplingParams(
            max_tokens=params.max_tokens,
            temperature=temperature,
            top_p=params.top_p,
            seed=params.seed,
            stop_token_ids=sorted(stop_ids),
            output_kind=RequestOutputKind.DELTA,
        )
        request_id = f"spectui-{next(self._request_ids)}"
        events: queue.Queue = queue.Queue()
        started = time.perf_counter()
        future = asyncio.run_coroutine_threadsafe(
            self._generate(request_id, list(prompt_ids), sampling, events), self._loop
        )
        reply = _ReplyState(k=self.k, temperature=temperature, method=self.info.method, started=started,
                            splitter=StepPieces(tokenizer_decoder(self.tokenizer), prompt_ids), stop_ids=stop_ids)
        while True:
            try:
                kind, payload = events.get(timeout=POLL_SECONDS)
            except queue.Empty:
                if control.cancelled and not reply.abort_sent:
                    reply.abort_sent = True
                    asyncio.run_coroutine_threadsafe(self._running().abort(request_id), self._loop)
                continue
            if kind == "output":
                yield from reply.steps_for(*payload)
            elif kind == "error":
                yield Done("error", tuple(prompt_ids), seconds=time.perf_counter() - started,
                           time_to_first_token=reply.time_to_first_token, error=payload)
                return
            else:  # "end"
                future.result()
                yield reply.done(tuple(prompt_ids), payload, cancelled=control.cancelled)
                return

    async def _generate(self, request_id: str, prompt_ids: list[int], sampling: Any, events: queue.Queue) -> None:
        self._counter.take()  # counts from before this request are not ours
        final = None
        try:
            async for output in self._running().generate({"prompt_token_ids": prompt_ids}, sampling, request_id=request_id):
                completion = output.outputs[0]
                # The counters of every step whose tokens this output carries are in by now:
                # vLLM's output handler records stats right after queueing the outputs.
                events.put(("output", (list(completion.token_ids), completion.text, self._counter.take(), time.perf_counter())))
                final = completion
        except Exception as error:  # the engine core died, a bad request: end the reply, keep the chat
            events.put(("error", _one_line(error)))
            return
        events.put(("end", final))

    def memory(self) -> MemoryReading | None:
        """VRAM (NVML) on a GPU; on CPU the RSS of this process and vLLM's engine processes."""
        from spectui.measure.metrics import read_memory, tree_rss

        if self.info.device.startswith("cuda"):
            reading = read_memory(self.info.device)
            if reading is not None:
                return MemoryReading(reading.kind, reading.used_bytes, reading.total_bytes, reading.source, pool_bytes=self.pool_bytes)
        return tree_rss(pool_bytes=self.pool_bytes)

    def close(self) -> None:
        if self._llm is not None:
            try:
                self._llm.shutdown()
            finally:
                self._llm = None
                self._stop_loop()

    def _stop_loop(self) -> None:
        # vLLM's output tasks are cancelled and awaited first: a loop stopped under them
        # prints "Task was destroyed but it is pending!" at exit.
        try:
            self._call(_cancel_tasks())
        except Exception:
            pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)


@dataclass
class _ReplyState:
    """One reply's Steps so far and how sure their colouring is."""

    k: int
    temperature: float
    method: str
    started: float
    splitter: StepPieces = field(default_factory=lambda: StepPieces(None))  # fills each Step's pieces
    stop_ids: set[int] = field(default_factory=set)
    steps: list[Step] = field(default_factory=list)
    counts: list[StepCount] = field(default_factory=list)
    approximate: bool = False
    abort_sent: bool = False
    time_to_first_token: float = 0.0
    last_arrival: float = 0.0

    def steps_for(self, token_ids: list[int], text: str, counts: list[StepCount], arrived: float) -> Iterator[Step]:
        if not token_ids:
            return
        if not self.steps:
            self.time_to_first_token = arrived - self.started
        previous = self.last_arrival or self.started
        self.last_arrival = arrived
        split = split_chunk(len(token_ids), counts)
        if split is None:  # counters that do not add up to the output: say so, guess by size
            self.approximate = True
            yield self._step(token_ids, text, None, arrived - previous)
            return
        # Several steps in one output (the consumer lagged): one Step each, text on the last.
        position = 0
        for index, count in enumerate(split):
            ids = token_ids[position : position + count.num_tokens]
            position += count.num_tokens
            last = index == len(split) - 1
            yield self._step(ids, text if last else "", count, (arrived - previous) if last else 0.0)

    def _step(self, token_ids: list[int], text: str, count: StepCount | None, seconds: float) -> Step:
        step = self.splitter.fill(counted_step(token_ids, text, count, k=self.k, temperature=self.temperature,
                                               method=self.method, first=not self.steps, seconds=seconds))
        self.steps.append(step)
        self.counts.append(count or StepCount(len(token_ids), step.num_drafted, step.num_accepted))
        return step

    def done(self, prompt_ids: tuple[int, ...], final: Any, cancelled: bool) -> Done:
        reason = getattr(final, "finish_reason", None)
        finish = "cancelled" if cancelled else FINISH_REASONS.get(reason or "", "stop")
        record = getattr(final, "spec_decode_metrics", None)
        stats: dict = {
            "num_drafted": sum(c.num_drafted for c in self.counts),
            "num_accepted": sum(c.num_accepted for c in self.counts if c.num_drafted),
        }
        restated = None
        approximate = self.approximate
        if record is not None and record.per_step_accepted:
            stats["per_step_accepted"] = list(record.per_step_accepted)
            stats["per_step_drafted"] = list(record.per_step_drafted)
            shown = [c.num_accepted for c in self.counts if c.num_drafted]
            stats["reconciled"] = shown == list(record.per_step_accepted)
            chunk_sizes = [len(s.token_ids) for s in self.steps]
            if not stats["reconciled"]:
                rebuilt = rebuild(chunk_sizes, record.per_step_accepted, record.per_step_drafted)
                if rebuilt is None:
                    approximate = True
                else:
                    restated = restate(self.steps, rebuilt)
                    approximate = False
                    if not is_unambiguous(chunk_sizes, record.per_step_accepted):
                        stats["recovered_ambiguous"] = True
        end = self.last_arrival or time.perf_counter()
        last = self.steps[-1].token_ids[-1] if self.steps else None
        stop_token_id = last if finish == "stop" and last in self.stop_ids else None
        return Done(finish, prompt_ids, seconds=end - self.started, time_to_first_token=self.time_to_first_token,
                    engine_stats=stats, approximate=approximate, restated_steps=restated, stop_token_id=stop_token_id)


async def _cancel_tasks() -> None:
    current = asyncio.current_task()
    tasks = [task for task in asyncio.all_tasks() if task is not current]
    for task in tasks:
        task.cancel()
    await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), timeout=5)


def _one_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return f"vLLM: {type(error).__name__}: {lines[0] if lines else ''}".rstrip(": ")
