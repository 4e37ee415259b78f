"""Where the fast prefill's first token goes (issue 59): the attached-file prompt from an empty
cache through the ggml target as the loop drives it (the prompt in `--chunk`-token prefill
calls, then the first token's row), each libllama call it makes timed by wall clock and by this
process's CPU (every thread's), beside llama.cpp at its defaults running the same prompt in one
decode. The arms alternate round by round; compare parts within one run (under load wall-clock
lies; process CPU lies less).

    python benchmarks/prefill_parts.py [--model qwen2.5-coder-1.5b] [--rounds 3] [--chunk 64] \
        [--threads N] [--markdown benchmarks/reports/NAME.md]
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

# libllama's calls, and the part each one's time counts in
PARTS = {"llama_init_from_model": "open the second context", "llama_state_seq_get_size": "state out",
         "llama_state_seq_get_data": "state out", "llama_memory_clear": "clear the exact cache",
         "llama_state_seq_set_data": "state in", "llama_free": "free the second context"}


class Clock:
    """Wall and process-CPU seconds per part, this round."""

    def __init__(self) -> None:
        self.parts: dict[str, list[float]] = {}

    def timed(self, part: str, call: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any) -> Any:
            wall, cpu = time.perf_counter(), time.process_time()
            try:
                return call(*args)
            finally:
                spent = self.parts.setdefault(part, [0.0, 0.0])
                spent[0] += time.perf_counter() - wall
                spent[1] += time.process_time() - cpu
        return run


class TimedLibrary:
    """libllama with the calls in PARTS timed, and each llama_decode counted as the exact
    context's or the second context's."""

    def __init__(self, lib: Any, clock: Clock, exact_context: Callable[[], Any]) -> None:
        self._lib, self._clock, self._exact = lib, clock, exact_context

    def __getattr__(self, name: str) -> Any:
        call = getattr(self._lib, name)
        if name == "llama_decode":
            exact, fast = self._clock.timed("decode in the exact context", call), self._clock.timed("prefill in the second context", call)
            return lambda context, batch: (exact if context == self._exact() else fast)(context, batch)
        return self._clock.timed(PARTS[name], call) if name in PARTS else call


def fast_first_token(target: Any, prompt: list[int], chunk: int, clock: Clock) -> int:
    """The loop's way in (spectui.engines.speculative.loop.prefill_in_chunks, then the first
    step's row), the conversion and the whole timed too."""
    from spectui.engines.ggml import fast_prefill

    target.reset()
    original = fast_prefill.values_to_bf16
    fast_prefill.values_to_bf16 = clock.timed("convert f16 -> bf16", original)
    try:
        def whole() -> Any:
            for end in range(chunk, len(prompt), chunk):
                assert target.prefill(prompt[:end], stop=lambda: False)
            return target.logits(prompt, 1)

        row = clock.timed("first token, all of it", whole)()
    finally:
        fast_prefill.values_to_bf16 = original
    return int(row[0].argmax())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="qwen2.5-coder-1.5b")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--chunk", type=int, default=None, help="prefill call size (default: what the target chooses for this prompt)")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--markdown", default=None)
    args = parser.parse_args()

    from spectui.bench.anchors.llamacpp import gguf_for
    from spectui.bench.workloads import conversation_script
    from spectui.core.files import show_report
    from spectui.engines.factory import models_to_run
    from spectui.engines.ggml.lib import LlamaModel
    from spectui.host.plan import engine_factory_for
    from spectui.models.registry import resolve
    from spectui.settings.config import ChatConfig

    os.environ["SPECTUI_ENGINE_PROCESS"] = "0"
    config = ChatConfig().with_overrides(model=args.model)
    engine = engine_factory_for(config, models_to_run(config.engine, config.model, config.draft))(None)
    if getattr(getattr(engine, "backend", None), "name", None) != "ggml":
        sys.exit(f"{args.model} does not run on the ggml backend here")
    prompt = list(engine.prompt_ids([conversation_script("chat-attached-file")[0]]))
    if args.threads:
        engine.use_threads(args.threads)
    target = engine.backend.target
    model = target.model
    clock = Clock()
    model.lib = TimedLibrary(model.lib, clock, lambda: model.context)
    defaults = LlamaModel(gguf_for(resolve(args.model)), threads=model.threads, batch_invariant=False)
    chunk = args.chunk or target.prefill_chunk_for(prompt)  # as the loop asks it
    rounds: list[dict[str, list[float]]] = []
    tokens: set[int] = set()
    load = []
    try:
        for round_ in range(args.rounds):
            clock.parts = {}
            arms = [lambda: tokens.add(fast_first_token(target, prompt, chunk, clock)),
                    lambda: tokens.add(anchor_first_token(defaults, prompt, clock))]
            for arm in arms if round_ % 2 == 0 else reversed(arms):
                load.append(os.getloadavg()[0])
                arm()
            rounds.append(clock.parts)
            print(f"round {round_ + 1}/{args.rounds}: " + ", ".join(f"{part} {wall:.3f} s" for part, (wall, _) in clock.parts.items()),
                  file=sys.stderr, flush=True)
    finally:
        clock.parts = {}  # closing is no round's
        defaults.close()
        engine.close()
    show_report(report(args, len(prompt), chunk, model.threads, rounds, tokens, load), args.markdown)


def anchor_first_token(model: Any, prompt: list[int], clock: Clock) -> int:
    model.clear()
    row = clock.timed("llama.cpp defaults, one decode", model.decode)(list(prompt), 1)
    return int(row[0].argmax())


def report(args: argparse.Namespace, prompt_tokens: int, chunk: int, threads: int, rounds: list[dict[str, list[float]]],
           tokens: set[int], load: list[float]) -> str:
    names = list(dict.fromkeys(name for parts in rounds for name in parts))
    lines = [f"`python benchmarks/prefill_parts.py {shlex.join(sys.argv[1:])}`", "",
             f"{args.model}, {threads} threads, the attached-file prompt ({prompt_tokens} tokens) from an empty cache in "
             f"{chunk}-token prefill calls, {len(rounds)} rounds alternating with llama.cpp's defaults; first token id(s) "
             f"{', '.join(str(t) for t in sorted(tokens))}; the 1-minute load average {min(load):.1f} to {max(load):.1f} "
             f"on {os.cpu_count()} CPUs.", "",
             "| part | wall s, median | process CPU s, median | wall s, each round |", "|---|---|---|---|"]
    for name in names:
        walls = [parts.get(name, [0.0, 0.0])[0] for parts in rounds]
        cpus = [parts.get(name, [0.0, 0.0])[1] for parts in rounds]
        lines.append(f"| {name} | {statistics.median(walls):.3f} | {statistics.median(cpus):.3f} | "
                     f"{', '.join(f'{w:.3f}' for w in walls)} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
