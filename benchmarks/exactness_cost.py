"""What T = 0 exactness costs on ggml: the engine's batch-invariant context (flash attention
on, the value cache in bf16, docs/lossless.md) against llama.cpp's defaults, on the same GGUF.
Each arm times a plain step (1 token) and a verify of 3 and 5 rows after a prompt of each
`--lengths` (past 512 cached tokens is where the defaults' split-KV path starts), and the
prefill of a `--prefill`-token prompt in the chat's 64-token chunks, the arms alternating
`--repeats` times; the medians count.

    python benchmarks/exactness_cost.py --model qwen2.5-coder-1.5b --lengths 300,700 --repeats 7 \
        --markdown benchmarks/reports/exactness-cost.md

The Markdown starts with the command that wrote it.
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys
import time


def step_seconds(model, length: int, rows: int, repeats: int) -> float:
    """Median seconds of one decode of `rows` tokens at `length` cached positions."""
    tokens = [(7919 * i) % 20000 + 100 for i in range(length + rows)]
    model.clear()
    model.decode(tokens[:length], 1)
    times = []
    for _ in range(repeats):
        model.keep(length)
        started = time.perf_counter()
        model.decode(tokens[length:], 1)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def prefill_tokens_per_s(model, length: int, chunk: int = 64) -> float:
    """A prompt of `length` tokens into an empty cache, `chunk` at a time (the chat's prefill)."""
    tokens = [(7919 * i) % 20000 + 100 for i in range(length)]
    model.clear()
    started = time.perf_counter()
    for start in range(0, length, chunk):
        model.decode(tokens[start:start + chunk], 1)
    return length / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="qwen2.5-coder-1.5b")
    parser.add_argument("--lengths", default="300,700")
    parser.add_argument("--rows", default="1,3,5")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--prefill", type=int, default=1024, help="prompt tokens for the prefill row (0: none)")
    parser.add_argument("--markdown", default=None)
    args = parser.parse_args()

    from spectui.bench.anchors.llamacpp import gguf_for
    from spectui.engines.ggml.lib import LlamaModel
    from spectui.core.files import show_report
    from spectui.models.registry import resolve

    path = gguf_for(resolve(args.model))
    arms = {"exact (engine)": LlamaModel(path, batch_invariant=True),
            "llama.cpp defaults": LlamaModel(path, batch_invariant=False)}
    lengths = [int(n) for n in args.lengths.split(",")]
    rows = [int(n) for n in args.rows.split(",")]
    seconds: dict[tuple[str, int, int], list[float]] = {}
    prefill: dict[str, list[float]] = {}
    for round_ in range(3):  # the arms alternate, so a slow minute of the machine hits both
        for name, model in arms.items():
            for length in lengths:
                for n in rows:
                    seconds.setdefault((name, length, n), []).append(step_seconds(model, length, n, args.repeats))
            if args.prefill:
                prefill.setdefault(name, []).append(prefill_tokens_per_s(model, args.prefill))
        print(f"round {round_ + 1}/3", file=sys.stderr, flush=True)
    for model in arms.values():
        model.close()
    lines = [f"`python benchmarks/exactness_cost.py {shlex.join(sys.argv[1:])}`", "",
             f"{args.model} ({next(iter(arms.values())).weight_type}), ms per decode, median of rounds:", "",
             "| cached | rows | exact (engine) | llama.cpp defaults | cost |", "|---|---|---|---|---|"]
    for length in lengths:
        for n in rows:
            exact = statistics.median(seconds[("exact (engine)", length, n)]) * 1000
            plain = statistics.median(seconds[("llama.cpp defaults", length, n)]) * 1000
            lines.append(f"| {length} | {n} | {exact:.1f} | {plain:.1f} | {100 * (exact / plain - 1):+.1f} % |")
    if prefill:
        exact, plain = (statistics.median(prefill[name]) for name in arms)
        lines += ["", f"Prefill of a {args.prefill}-token prompt in 64-token chunks: {exact:.1f} tokens/s (exact) against "
                  f"{plain:.1f} (llama.cpp defaults), {100 * (plain / exact - 1):+.1f} % time: a batch of rows with the "
                  "value cache in bf16 cannot take ggml's tiled attention, which needs keys and values of one type."]
    text = "\n".join(lines) + "\n"
    show_report(text, args.markdown)


if __name__ == "__main__":
    main()
