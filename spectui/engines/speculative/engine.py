"""The speculative engine: spectui's own loop (decode_steps) given a backend that computes its
forwards (torch or ggml). Everything here is the same on both; what differs is the backend's."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import Any

from spectui.core.engine import DecodeTimings, Engine, EngineInfo, Progress, with_threads
from spectui.core.errors import REPLY_ADVICE, is_out_of_memory, out_of_memory
from spectui.core.events import Done, Event, GenerationParams, LiveControl, Message, Step
from spectui.core.pieces import StepPieces, tokenizer_decoder
from spectui.engines.adaptive import AdaptiveK, chooser_for
from spectui.engines.prompt import chat_prompt_ids, has_thinking_switch, stop_token_ids, stream_conversation
from spectui.engines.speculative.backend import Backend
from spectui.engines.speculative.cached_model import CachedLogits
from spectui.engines.speculative.cross_vocab import CrossVocabProposer
from spectui.engines.speculative.detokenize import IncrementalDetokenizer
from spectui.engines.speculative.loop import decode_steps
from spectui.engines.speculative.proposers import DraftModelProposer, Proposer


class SpeculativeEngine(Engine):
    """The loop on `backend`'s target, drafting with `proposer` (None: plain decoding)."""

    def __init__(self, backend: Backend, tokenizer: Any, proposer: Proposer | None, info: EngineInfo) -> None:
        self.backend = backend
        self.tokenizer = tokenizer
        self.proposer = proposer
        self.info = replace(info, capabilities=replace(backend.capabilities, thinking_switch=has_thinking_switch(tokenizer)))
        self.stop_ids = stop_token_ids(tokenizer, backend.generation_config)
        # V(k)/V(0) - 1 per drafted token before measuring (adaptive k's prior), and as timed here
        self.verify_slope = backend.verify_slope
        self.measured_verify_slope = backend.measured_verify_slope
        # Every proposer built so far, shared by the variants from with_method.
        self._proposers: dict[str, Proposer | None] = {info.method: proposer}
        # What info.draft names per method: the draft model, or the heads folder of medusa / eagle.
        self._draft_names: dict[str, str | None] = {info.method: info.draft}
        # Adaptive k's estimates, per proposer: they carry over from reply to reply.
        self._choosers: dict[str, AdaptiveK] = {}

    @property
    def target(self) -> CachedLogits:
        """The target as the loop drives it: told which tokens it has seen, asked for logits."""
        return self.backend.target

    def with_method(self, method: str) -> "SpeculativeEngine":
        """The same target (weights and cache shared), drafting by `method` instead.

        Prompt lookup and suffix decoding need nothing loaded; a draft model or heads must
        have been loaded with this engine. The variants must not stream at the same time:
        they share a cache.
        """
        from spectui.core.errors import UsageError
        from spectui.engines.speculative.methods import drafter, token_proposer

        if method not in self._proposers:
            try:
                needs = drafter(method)
            except ValueError as error:
                raise UsageError(str(error)) from None
            if needs != "tokens":
                raise UsageError(f"no draft model is loaded: start with --method {method} to use it")
            self._proposers[method] = token_proposer(method, self.tokenizer)
        variant = copy.copy(self)
        variant.proposer = proposer = self._proposers[method]
        variant.info = replace(self.info, method=method, draft=self._draft_names.get(method),
                               draft_vocab=proposer.vocab_words if proposer is not None else "")
        return variant

    def add_proposer(self, method: str, proposer: Proposer, name: str | None) -> None:
        """One more drafter over the same target, for with_method: a bench run compares a
        draft model, n-gram lookup and trained heads on one loaded target."""
        self._proposers[method] = proposer
        self._draft_names[method] = name

    def prompt_ids(self, messages: Sequence[Message]) -> list[int]:
        return chat_prompt_ids(self.tokenizer, messages)

    def stream(
        self, messages: Sequence[Message], params: GenerationParams, control: LiveControl
    ) -> Iterator[Event]:
        yield from stream_conversation(self, messages, params, control, self.context_length)

    @property
    def context_length(self) -> int | None:
        return self.backend.context_length

    def stream_ids(
        self, prompt_ids: Sequence[int], params: GenerationParams, control: LiveControl
    ) -> Iterator[Event]:
        """The loop on raw prompt ids: no chat template (tests, benchmarks)."""
        emitted = 0
        for event in self._decode(prompt_ids, params, control):
            if isinstance(event, Step):
                emitted += len(event.token_ids)
            elif isinstance(event, Done):
                self.backend.reply_ended(len(prompt_ids), emitted)
            yield event

    def _decode(self, prompt_ids: Sequence[int], params: GenerationParams, control: LiveControl) -> Iterator[Event]:
        detokenizer = IncrementalDetokenizer(self.tokenizer, list(prompt_ids))
        splitter = StepPieces(tokenizer_decoder(self.tokenizer), prompt_ids)
        stop_ids = self.stop_ids | set(params.stop_token_ids)
        try:
            for event in decode_steps(
                self.target, self.proposer, prompt_ids, params, control, stop_ids, detokenizer, self.chooser()
            ):
                yield splitter.fill(event) if isinstance(event, Step) else event
            if self.proposer is not None and self.proposer.vocab_words != self.info.draft_vocab:
                # --vocab auto said which of TLI and SLEM it keeps: the panel reads it here
                self.info = replace(self.info, draft_vocab=self.proposer.vocab_words)
        except Exception as error:
            # Everything already yielded stays with the caller; the reply ends marked.
            if is_out_of_memory(error):
                # Drop the caches that filled memory, so the next (shorter) reply can run.
                self.forget_prompts()
                message = str(out_of_memory(error, "generating", REPLY_ADVICE))
            else:
                message = f"{type(error).__name__}: {error}"
            yield Done("error", tuple(prompt_ids), error=message)

    def forget_prompts(self) -> None:
        """Drop the KV caches of the target and of every proposer: the next prompt is prefilled anew."""
        self.target.reset()
        for proposer in self._proposers.values():
            if proposer is not None:
                proposer.reset()

    def use_threads(self, threads: int) -> None:
        self.backend.use_threads(threads, self.draft_cached())
        self.info = with_threads(self.info, threads)

    def settle(self, stop: Callable[[], bool] = lambda: False,
               progress: Callable[[int, int], None] | None = None) -> bool:
        return self.backend.settle(self.draft_cached(), stop, progress)

    def time_decodes(self, context_ids: Sequence[int], widest: int, rounds: int,
                     progress: Progress | None = None) -> DecodeTimings:
        from spectui.engines.speculative.decode_timing import time_decodes

        return time_decodes(self.target, self.info.backend or self.info.dtype, context_ids, widest, rounds, progress,
                            self.tokenizer)

    def draft_cached(self) -> CachedLogits | None:
        """The draft model loaded with this engine, with its cache, or None (prompt lookup needs none)."""
        proposer = self._proposers.get("draft")
        # a draft with another tokenizer (TLI, SLEM) is a draft model too: closed, threaded, timed
        return proposer.draft if isinstance(proposer, (DraftModelProposer, CrossVocabProposer)) else None

    @property
    def draft_model(self) -> object | None:
        """The draft model itself (the bench's transformers runner assists with it), or None."""
        return getattr(self.draft_cached(), "model", None)

    def chooser(self) -> AdaptiveK | None:
        if self.proposer is None:
            return None
        return self._choosers.setdefault(self.proposer.method, chooser_for(
            self.verify_slope, self.measured_verify_slope is not None, self.target.exact_rows))

    def close(self) -> None:
        self.target.reset()
        if self.proposer is not None:
            self.proposer.reset()
        self.backend.close(self.draft_cached())
