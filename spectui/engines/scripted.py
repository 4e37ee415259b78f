"""A scripted engine: real Steps from a fixed text, no weights.

For screenshots, the token-view benchmark, tests and `spectui chat --engine scripted`
(the suite's fakes with failures on cue are tests/fake_engines.py).
Tokens are words (with their leading space); acceptance is drawn with probability α per
draft from a seeded generator, so a run is the same every time. It honours Control's k,
temperature and cancel between steps, as the embedded engine does. Its timings are
virtual (each step's pretend draft + verify time), so its numbers repeat exactly too;
the real wall time is in Done.engine_stats["wall_seconds"].
"""

from __future__ import annotations

import random
import re
import time
from dataclasses import replace
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from spectui.engines.adaptive import AdaptiveK
from spectui.core.engine import ALL_CONTROLS, Capabilities, Engine, EngineInfo, Kernels, Progress, package_version
from spectui.core.events import Control, Done, FinishReason, GenerationParams, Message, Source, Step

SCRIPT = """Speculative decoding lets a small **draft** model guess the next few tokens, and the
large **target** model checks all of them in one forward pass.

- Accepted drafts cost almost nothing: the target only verified them.
- At the first rejected draft the target puts in its own token instead: a *correction*.
- When every draft is accepted the target adds one more, the *bonus* token.

The output is exactly what the target alone would have written; only the speed changes.
With an acceptance rate near 0.8 and k = 4, each target pass yields about 3.4 tokens."""

_TOKEN = re.compile(r"\n|[ \t]*[^\s]+")


class ScriptedEngine(Engine):
    def __init__(
        self,
        alpha: float = 0.8,
        seed: int = 0,
        tokens_per_s: float | None = None,
        step_delay: float = 0.0,
        live_k: bool = True,
        method: str = "draft",
        script: str = SCRIPT,
        echo_prompt: bool = True,
        target_seconds: float = 0.02,  # pretend one target decode step takes this long
        draft_cost: float = 0.1,  # and one draft token this fraction of it
        verify_slope: float = 0.1,
        sleep_virtual: float = 0.0,  # also sleep each step's virtual time × this (compare, sweeps)
    ) -> None:
        self.alpha = alpha
        self.seed = seed
        self.tokens_per_s = tokens_per_s
        self.step_delay = step_delay
        self.script = script
        self.echo_prompt = echo_prompt
        self.target_seconds = target_seconds
        self.draft_cost = draft_cost
        self.verify_slope = verify_slope
        self.sleep_virtual = sleep_virtual
        self.vocab: list[str] = []
        self.chooser = AdaptiveK()  # adaptive k, when the control asks for it
        self._ids: dict[str, int] = {}
        self.closed = False
        self.info = EngineInfo(
            name="scripted",
            target="scripted-target",
            draft="scripted-draft" if method == "draft" else None,
            method=method,
            dtype="n/a",
            device="cpu",
            capabilities=Capabilities(live_controls=ALL_CONTROLS if live_k else frozenset()),
            kernels=Kernels("scripted", None, "spectui", package_version("spectui")),  # no kernels: a script
        )
        self.encode(script)

    def encode(self, text: str) -> list[int]:
        ids = []
        for piece in _TOKEN.findall(text):
            if piece not in self._ids:
                self._ids[piece] = len(self.vocab)
                self.vocab.append(piece)
            ids.append(self._ids[piece])
        return ids

    def decode(self, token_ids: Sequence[int]) -> str:
        return "".join(self.vocab[i] for i in token_ids)

    def reply_ids(self, messages: Sequence[Message]) -> list[int]:
        prompt = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
        text = self.script
        if self.echo_prompt and prompt.strip():
            turn = sum(1 for m in messages if m["role"] == "user")
            text = f"Turn {turn}. You asked: *{prompt.strip()}*\n\n{self.script}"
        return self.encode(text)

    def stream(
        self, messages: Sequence[Message], params: GenerationParams, control: Control
    ) -> Iterator[Step | Done]:
        target_ids = self.reply_ids(messages)
        limit = min(len(target_ids), params.max_tokens)
        rng = random.Random(self.seed)
        started = time.perf_counter()
        emitted = 0
        num_steps = 0
        virtual = {"seconds": 0.0, "first_token": 0.0}
        while emitted < limit:
            if control.cancelled:
                yield self._done("cancelled", started, virtual)
                return
            k, temperature = control.snapshot()
            auto = self.chooser.choose() if control.auto and num_steps > 0 else None
            if auto is not None:
                k = auto.k
            if num_steps == 0:
                k = 0  # the first token comes from prefill
            step = self._step(target_ids, emitted, limit, k, temperature, rng)
            if auto is not None:
                step = replace(step, auto=auto)
            if control.auto:
                self.chooser.observe(step, prefill=num_steps == 0)
            emitted += len(step.token_ids)
            num_steps += 1
            if self.sleep_virtual:
                time.sleep((step.draft_seconds + step.verify_seconds) * self.sleep_virtual)
            self._pace(started, emitted)
            virtual["seconds"] += step.draft_seconds + step.verify_seconds
            if num_steps == 1:
                virtual["first_token"] = virtual["seconds"]
            yield step
        yield self._done("stop" if limit == len(target_ids) else "length", started, virtual)

    def _step(self, target_ids: Sequence[int], emitted: int, limit: int, k: int, temperature: float,
              rng: random.Random) -> Step:
        k = min(k, len(target_ids) - emitted - 1)  # no drafting past the script's end
        correct = target_ids[emitted : emitted + k + 1]
        if k == 0:
            ids, sources, drafted = correct[:1], (Source.TARGET,), ()
        else:
            num_accepted = 0
            while num_accepted < k and rng.random() < self.alpha:
                num_accepted += 1
            drafted = list(correct[:num_accepted])
            while len(drafted) < k:
                drafted.append(rng.randrange(len(self.vocab)))  # a wrong guess
            if num_accepted < k and drafted[num_accepted] == correct[num_accepted]:
                drafted[num_accepted] = (drafted[num_accepted] + 1) % len(self.vocab)
            if num_accepted == k:
                ids = correct[: k + 1]
                sources = (Source.DRAFT,) * k + (Source.BONUS,)
            else:
                ids = correct[: num_accepted + 1]
                sources = (Source.DRAFT,) * num_accepted + (Source.RECOVERED,)
            drafted = tuple(drafted)
        room = limit - emitted
        accepted = sources.count(Source.DRAFT)
        ids, sources = list(ids)[:room], tuple(sources)[: min(room, len(ids))]
        rejected = drafted[accepted:]
        return Step(
            token_ids=tuple(ids),
            sources=sources,
            text=self.decode(ids),
            pieces=tuple(self.vocab[i] for i in ids),
            rejected_text=self.decode(rejected),
            drafted=drafted,
            # max_tokens cut the step inside its accepted drafts: they count as accepted all the same
            accepted_count=accepted if sources.count(Source.DRAFT) < accepted else None,
            k=k,
            temperature=temperature,
            draft_seconds=k * self.draft_cost * self.target_seconds,
            verify_seconds=self.target_seconds * (1 + self.verify_slope * k),
            method=self.info.method if k else "",
        )

    def _pace(self, started: float, emitted: int) -> None:
        if self.step_delay:
            time.sleep(self.step_delay)
        if self.tokens_per_s:
            wait = started + emitted / self.tokens_per_s - time.perf_counter()
            if wait > 0:
                time.sleep(wait)

    def _done(self, reason: FinishReason, started: float, virtual: dict[str, float]) -> Done:
        return Done(
            reason,
            seconds=virtual["seconds"],
            time_to_first_token=virtual["first_token"],
            engine_stats={"wall_seconds": round(time.perf_counter() - started, 6)},
        )

    def close(self) -> None:
        self.closed = True


def build_scripted_engine(progress: Progress | None = None, **options: Any) -> ScriptedEngine:
    """progress(stage, done, total) is reported once; module-level, so an engine process
    can be given it by name."""
    if progress is not None:
        progress("scripted engine", 1, 1)
    return ScriptedEngine(**options)


def scripted_engine_factory(**options: Any) -> Callable[[Progress | None], ScriptedEngine]:
    """An engine_factory for SpectuiApp."""
    return lambda progress: build_scripted_engine(progress, **options)
