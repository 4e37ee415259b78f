"""Fakes and helpers for the TUI tests: engines that yield chosen Steps, a poller.

A plain module (not conftest) so test files can import it by name."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace

from spectui.settings.config import ChatConfig
from spectui.core.engine import EngineInfo
from spectui.core.events import Control, Done, GenerationParams, Message, Source, Step
from spectui.measure.metrics import MemoryReading


class PlanEngine:
    """Yields one Step per entry of `plan` (accepted drafts that step; None = a target token).

    The k of each step is read from Control when the step starts, like the real engine.
    With gated=True every step after the first waits for `release()`, so a test can act
    between two steps. Token i decodes to " w<i>". tree_nodes: per entry of `plan`, the
    nodes of a draft tree that step verified (Step.tree_nodes; None: a chain), with `method`.
    """

    def __init__(
        self,
        plan: Sequence[int | None],
        live_k: bool = True,
        gated: bool = False,
        raise_after: int | None = None,
        error_after: int | None = None,
        name: str = "fake",
        tree_nodes: Sequence[int | None] | None = None,
        method: str = "draft",
    ) -> None:
        self.plan = list(plan)
        self.tree_nodes = list(tree_nodes) if tree_nodes is not None else [None] * len(self.plan)
        self.method = method
        self.gated = gated
        self.raise_after = raise_after
        self.error_after = error_after
        self.info = EngineInfo(name, "fake-target", "fake-draft", method, "fp32", "cpu", live_k)
        self.steps: list[Step] = []  # what it yielded, in order, across replies
        self.messages_seen: list[list[Message]] = []
        self._gate = threading.Semaphore(0)
        self._next_id = 0
        self.closed = False

    def release(self, steps: int = 1) -> None:
        for _ in range(steps):
            self._gate.release()

    def decode(self, token_ids) -> str:
        return "".join(f" w{i}" for i in token_ids)

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
        reply_steps: list[Step] = []
        for index, accepted in enumerate(self.plan):
            if self.gated and index > 0:
                self._gate.acquire(timeout=20)
            if control.cancelled:
                yield Done("cancelled")
                return
            if self.raise_after is not None and index >= self.raise_after:
                raise RuntimeError("boom inside stream")
            if self.error_after is not None and index >= self.error_after:
                yield Done("error", error="the fake engine gave up")
                return
            k, temperature = self.k_and_temperature(control)
            if accepted is None or k == 0:
                ids = self._ids(1)
                step = Step(tuple(ids), (Source.TARGET,), self.decode(ids), k=k, temperature=temperature,
                            draft_seconds=0.0, verify_seconds=0.01)
            else:
                accepted = min(accepted, k)
                ids = self._ids(accepted + 1)
                last = Source.BONUS if accepted == k else Source.RECOVERED
                rejected = [10_000 + j for j in range(k - accepted)]
                step = Step(
                    tuple(ids), (Source.DRAFT,) * accepted + (last,), self.decode(ids),
                    drafted=tuple(ids[:accepted]) + tuple(rejected), k=k, temperature=temperature,
                    draft_seconds=0.001 * k, verify_seconds=0.01 * (1 + 0.1 * k), method=self.method,
                    tree_nodes=self.tree_nodes[index],
                )
            self.steps.append(step)
            reply_steps.append(step)
            yield step
        yield self.done(reply_steps)

    def close(self) -> None:
        self.closed = True


class FixedKEngine(PlanEngine):
    """Like vLLM: k is fixed when the engine is built (live_k False), sources inferred.

    `restate(steps)` gives Done.restated_steps for a reply; `approximate` sets Done.approximate.
    """

    def __init__(self, plan, k: int, *, approximate: bool = False, restate=None, engine_stats=None, **options) -> None:
        super().__init__(plan, live_k=False, name="vllm", **options)
        self.info = replace(self.info, exact=False)
        self.k = k
        self.approximate = approximate
        self.restate = restate
        self.engine_stats = engine_stats or {}

    def k_and_temperature(self, control: Control) -> tuple[int, float]:
        return self.k, control.temperature

    def done(self, steps: list[Step]) -> Done:
        restated = self.restate(steps) if self.restate is not None else None
        return Done("stop", seconds=0.5, time_to_first_token=0.05, approximate=self.approximate,
                    restated_steps=restated, engine_stats=dict(self.engine_stats))


class FixedKFactory:
    """engine_factory_for_k for FixedKEngines: records every k it builds with.

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


def factory_for(engine) -> Callable:
    return lambda progress: engine


def fixed_memory(device: str) -> MemoryReading:
    return MemoryReading("RSS", 100 * 2**20, 8 * 2**30, "psutil")


async def wait_for(pilot, condition: Callable[[], bool], timeout: float = 20.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        assert loop.time() < deadline, "timed out waiting for the app"
        await pilot.pause(0.02)


async def send(pilot, text: str) -> None:
    app = pilot.app
    prompt = app.chat_screen.query_one("#prompt")
    prompt.value = text
    prompt.focus()
    await pilot.press("enter")


async def ready(pilot) -> None:
    await wait_for(pilot, lambda: pilot.app.engine is not None or pilot.app.engine_status == "failed")
    await pilot.pause()


async def reply_done(pilot) -> None:
    chat = pilot.app.chat_screen
    await wait_for(pilot, lambda: chat.current is None and not chat.pending)
    await pilot.pause()


def make_app_fixture(tmp_path):
    from spectui.store import Store
    from spectui.tui.app import SpectuiApp

    stores = []

    def make(engine_factory, config: ChatConfig | None = None, store=True, **options):
        the_store = None
        if store:
            the_store = Store(tmp_path / "history.sqlite3")
            stores.append(the_store)
        options.setdefault("memory_probe", fixed_memory)
        options.setdefault("screenshot_dir", tmp_path / "shots")
        options.setdefault("cursor_blink", False)
        return SpectuiApp(engine_factory, config or ChatConfig(), the_store, **options)

    yield make
    for the_store in stores:
        the_store.close()


def shown_kinds(token_view) -> list[str]:
    """One kind per displayed token, read back from the widget's wrapped lines.

    Fake tokens decode to " w<i>", so each token is one word: split runs into words.
    """
    kinds = []
    for line in token_view.rendered_lines():
        for text, kind in line:
            kinds += [kind] * text.count("w")
    return kinds
