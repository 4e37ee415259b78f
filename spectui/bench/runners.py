"""The runners a bench case times: spectui's own engines and transformers' `generate`.

transformers runs on the very model objects the embedded engine loaded (same weights,
same dtype, same prompt ids, same stop tokens), so a ratio between them measures the
decoding loop and nothing else.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from spectui.bench.runs import Arm, ArmReply
from spectui.core.engine import Engine
from spectui.core.events import Control, GenerationParams, Message
from spectui.measure.run import run_reply

Clock = Callable[[], float]


def engine_for(engine: Engine, arm: Arm) -> Engine:
    """The engine variant that drafts by arm.method (the embedded engine shares its target;
    an engine without capabilities.method_switch refuses another method in one line)."""
    if arm.method in ("none", engine.info.method):
        return engine
    return engine.with_method(arm.method)


def run_engine(
    engine: Engine,
    arm: Arm,
    messages: Sequence[Message],
    params: GenerationParams,
    temperature: float,
    clock: Clock = time.perf_counter,
) -> ArmReply:
    """One reply from a spectui engine (embedded or vLLM) at arm.k."""
    # The prompt's prefill is paid again, as the anchors pay it (they keep nothing between calls).
    engine.forget_prompts()
    control = Control(arm.k, temperature, auto=arm.auto)
    reply = run_reply(engine_for(engine, arm), list(messages), params, control, clock=clock)
    if reply.done is not None and reply.done.finish_reason == "error":
        raise RuntimeError(f"{arm.label}: {reply.done.error}")
    return ArmReply.of(arm, reply)


class TransformersRunner:
    """transformers `generate` on the embedded engine's models: plain (greedy or sampled),
    assisted generation with the same draft model, and prompt lookup."""

    def __init__(self, engine: Any) -> None:
        from transformers.utils import logging

        # assisted generation warns about its own internal arguments on every call
        logging.set_verbosity_error()
        self.engine = engine
        self.target = engine.target.model
        self.draft = engine.draft_model

    def run(
        self,
        arm: Arm,
        messages: Sequence[Message],
        params: GenerationParams,
        temperature: float,
        clock: Clock = time.perf_counter,
    ) -> ArmReply:
        import torch

        prompt_ids = self.engine.prompt_ids(list(messages))
        input_ids = torch.tensor([prompt_ids], dtype=torch.long, device=self.engine.target.device)
        timer = FirstTokenTimer(clock)
        kwargs = self._method_kwargs(arm)
        if temperature > 0:
            # top_k=0: transformers samples from its top 50 by default; spectui from all of them.
            kwargs.update(do_sample=True, temperature=temperature, top_p=params.top_p, top_k=0)
            torch.manual_seed(params.seed or 0)
        else:
            kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        stop_ids = sorted(self.engine.stop_ids | set(params.stop_token_ids))
        # inference_mode, as the engine runs: the int8 layers' scratch buffers were made in it.
        with self._assistant_settings(arm), torch.inference_mode():
            timer.start()
            output = self.target.generate(
                input_ids,
                attention_mask=torch.ones_like(input_ids),
                max_new_tokens=params.max_tokens,
                eos_token_id=stop_ids,
                pad_token_id=stop_ids[0],
                streamer=timer,
                **kwargs,
            )
            wall = clock() - timer.started
        token_ids = output[0, len(prompt_ids):].tolist()
        finish = "stop" if token_ids and token_ids[-1] in stop_ids else "length"
        return ArmReply(arm, token_ids, wall, timer.first_token_seconds, [], finish, timer.first_chunk_tokens)

    def _method_kwargs(self, arm: Arm) -> dict:
        if arm.method == "none":
            return {}
        if arm.method == "assisted":
            if self.draft is None:
                raise ValueError("assisted generation needs the engine's draft model: run with --method draft")
            return {"assistant_model": self.draft}
        if arm.method == "prompt-lookup":
            return {"prompt_lookup_num_tokens": arm.k}
        raise ValueError(f"transformers has no method {arm.method!r}")

    def _assistant_settings(self, arm: Arm):
        """The draft drafts exactly k tokens per step, as spectui's does: transformers'
        defaults change k as it goes (+2/−1) and stop drafting below a confidence."""
        from contextlib import nullcontext

        if arm.method != "assisted":
            return nullcontext()
        return overridden(self.draft.generation_config, num_assistant_tokens=arm.k,
                          num_assistant_tokens_schedule="constant", assistant_confidence_threshold=0.0)


class overridden:
    """Set attributes for the duration of a with block, then put the old values back."""

    def __init__(self, target: object, **values: object) -> None:
        self.target, self.values, self.saved = target, values, {}

    def __enter__(self):
        for name, value in self.values.items():
            self.saved[name] = getattr(self.target, name, None)
            setattr(self.target, name, value)
        return self.target

    def __exit__(self, *exc: object) -> None:
        for name, value in self.saved.items():
            setattr(self.target, name, value)


class FirstTokenTimer:
    """A transformers streamer that notes when the first generated token arrives
    (generate hands it the prompt first, then the new tokens)."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.started = 0.0
        self.first_token_seconds: float | None = None
        self.first_chunk_tokens = 1
        self._seen_prompt = False

    def start(self) -> None:
        self.started = self.clock()

    def put(self, value: Any) -> None:
        if not self._seen_prompt:
            self._seen_prompt = True
            return
        if self.first_token_seconds is None:
            self.first_token_seconds = self.clock() - self.started
            # Assisted generation and prompt lookup hand over a whole verified step at once.
            self.first_chunk_tokens = max(1, int(value.numel()))

    def end(self) -> None:
        pass
