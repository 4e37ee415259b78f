"""Time to first token on a long prompt: spectui's engine as the chat builds it (its exact
context, the prompt prefilled at llama.cpp's defaults and its cache moved in: ggml.fast_prefill)
against llama-cpp-py-sync at its defaults on the same GGUF and prompt, and spectui with the fast
prefill off (the exact context prefilling in its 64-token chunks, as before). The arms alternate
round by round; each arm's median counts, and the ratio of the medians.

    python benchmarks/prefill.py [--model qwen2.5-coder-1.5b] [--rounds 5] \
        [--threads N] [--markdown benchmarks/reports/prefill.md]

The prompt is the bench's attached-file workload: the first turn of `chat-attached-file`
(spectui.bench.workloads), the example module attached with a question (~840 tokens on Qwen).
The Markdown starts with the command that wrote it.
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import sys
import time
from typing import Any


def spectui_first_token(engine: Any, messages: list[dict], fast: bool) -> tuple[float, int]:
    """Seconds from the request to the first token from an empty cache, and that token."""
    from spectui.core.events import Control, GenerationParams, Step

    engine.forget_prompts()
    engine.backend.target.fast_prefill = fast
    started = time.perf_counter()
    for event in engine.stream(messages, GenerationParams(max_tokens=1), Control(0, 0.0)):
        if isinstance(event, Step):
            return time.perf_counter() - started, event.token_ids[0]
    raise RuntimeError("the engine wrote no token")


def llamacpp_first_token(model: Any, prompt_ids: list[int]) -> tuple[float, int]:
    """llama.cpp at its defaults, as the bench's anchor runs it: the prompt in one decode."""
    model.clear()
    started = time.perf_counter()
    row = model.decode(list(prompt_ids), 1)[0]
    return time.perf_counter() - started, int(row.argmax())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="qwen2.5-coder-1.5b")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None,
                        help="threads for both arms (default: every core, as the chat on a quiet box)")
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

    os.environ["SPECTUI_ENGINE_PROCESS"] = "0"  # the chat's engine, in this process: its target is reachable
    config = ChatConfig().with_overrides(model=args.model)
    inner = engine_factory_for(config, models_to_run(config.engine, config.model, config.draft))(None)
    if getattr(getattr(inner, "backend", None), "name", None) != "ggml":
        sys.exit(f"{args.model} does not run on the ggml backend here: nothing to compare with llama.cpp")
    messages = [conversation_script("chat-attached-file")[0]]
    prompt_ids = list(inner.prompt_ids(messages))
    if args.threads:
        inner.use_threads(args.threads)
    defaults = LlamaModel(gguf_for(resolve(args.model)), threads=inner.backend.target.model.threads, batch_invariant=False)
    arms = {"spectui (fast prefill)": lambda: spectui_first_token(inner, messages, True),
            "llama.cpp defaults": lambda: llamacpp_first_token(defaults, prompt_ids),
            "spectui (exact prefill, before)": lambda: spectui_first_token(inner, messages, False)}
    seconds: dict[str, list[float]] = {name: [] for name in arms}
    tokens: dict[str, set[int]] = {name: set() for name in arms}
    load = []
    try:
        for round_ in range(args.rounds):
            order = list(arms) if round_ % 2 == 0 else list(reversed(arms))
            for name in order:
                load.append(os.getloadavg()[0])
                took, token = arms[name]()
                seconds[name].append(took)
                tokens[name].add(token)
            print(f"round {round_ + 1}/{args.rounds}: " + ", ".join(f"{name} {seconds[name][-1]:.2f} s" for name in arms),
                  file=sys.stderr, flush=True)
    finally:
        defaults.close()
        inner.close()
    backend = f"ggml {inner.info.dtype}, {defaults.threads} threads"
    show_report(report(args, len(prompt_ids), backend, seconds, tokens, load), args.markdown)


def report(args: argparse.Namespace, prompt_tokens: int, backend: str, seconds: dict[str, list[float]], tokens: dict[str, set[int]],
           load: list[float]) -> str:
    medians = {name: statistics.median(values) for name, values in seconds.items()}
    anchor = medians["llama.cpp defaults"]
    lines = [f"`python benchmarks/prefill.py {shlex.join(sys.argv[1:])}`", "",
             f"{args.model} ({backend}, both arms), the attached-file prompt ({prompt_tokens} tokens) from an empty cache, "
             f"first token, {args.rounds} rounds in alternating order; the 1-minute load average while it ran: "
             f"{min(load):.1f} to {max(load):.1f} on {os.cpu_count()} CPUs.", "",
             "| arm | first token, median s | each round s | / llama.cpp defaults | first token id |",
             "|---|---|---|---|---|"]
    for name, values in seconds.items():
        lines.append(f"| {name} | {medians[name]:.2f} | {', '.join(f'{v:.2f}' for v in values)} | "
                     f"{medians[name] / anchor:.2f}× | {', '.join(str(t) for t in sorted(tokens[name]))} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
