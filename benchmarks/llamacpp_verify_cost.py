"""llama.cpp's verify cost v(n) = t(n tokens) / t(1 token) per quantisation, and spectui's loop on
llama.cpp's kernels (spectui.engines.ggml) against that engine's own plain greedy.

    python benchmarks/llamacpp_verify_cost.py --model qwen2.5-coder-1.5b --draft qwen2.5-coder-0.5b \
        --quants Q4_K_M,Q8_0,Q4_0 --batches 1,2,3,5,9 --repeats 5 --tokens 64 --markdown verify-cost.md

Q8_0 and Q4_0 are made from the registry's Q4_K_M GGUF by llama.cpp's own quantizer (kept
beside it in spectui's cache); Q4_0 is repacked for AVX2 by llama.cpp's CPU backend at load.
The prefill column times one `--prefill`-token prompt from an empty cache (a first token's
wait); "exact verify rows" is the widest batch whose logits equal one token at a time.
Each batch is timed after the same prefilled prompt, rolled back between repeats; the
median counts. `--spectui` adds the embedded engine's int8 plain speed on the same prompt.
The Markdown starts with the command that wrote it.
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import sys
import time
from pathlib import Path

MESSAGES = [{"role": "system", "content": "You are a coding assistant. Reply with Python code only, in one fenced code block."},
            {"role": "user", "content": "Write a Python function `is_palindrome(text: str) -> bool` that ignores case and "
             "every character that is not a letter or a digit, with a docstring and three doctest examples."}]


def gguf_variant(model: str, kind: str) -> Path:
    from spectui.bench.anchors.llamacpp import gguf_for
    from spectui.engines.ggml.lib import requantize
    from spectui.models.registry import resolve

    source = gguf_for(resolve(model))
    return source if kind == "Q4_K_M" else requantize(source, kind, source.parent)


def verify_costs(path: Path, prompt_ids: list[int], batches: list[int], repeats: int, threads: int | None,
                 prefill: int) -> dict:
    from spectui.engines.ggml.lib import LlamaModel, invariant_rows

    model = LlamaModel(path, threads=threads)
    long_prompt = (prompt_ids * (prefill // len(prompt_ids) + 1))[:prefill]
    prefill_runs = []
    for _ in range(3):  # a time to first token's prefill: one batch of `prefill` tokens from an empty cache
        model.clear()
        started = time.perf_counter()
        model.decode(long_prompt, 1)
        prefill_runs.append(time.perf_counter() - started)
    rows = invariant_rows(model).rows
    model.clear()
    model.decode(prompt_ids, 1)
    base = len(prompt_ids)
    seconds = {}
    for n in batches:
        runs = []
        for _ in range(repeats + 1):  # the first is a warm-up
            model.keep(base)
            started = time.perf_counter()
            model.decode(prompt_ids[-n:], n)  # any n tokens: the cost depends on how many
            runs.append(time.perf_counter() - started)
        seconds[n] = statistics.median(runs[1:])
    load = model.load_seconds
    model.close()
    return {"load": load, "seconds": seconds, "prefill": prefill / statistics.median(prefill_runs), "rows": rows}


def engine_replies(path: Path, draft: Path | None, tokenizer, tokens: int, threads: int | None) -> dict:
    """Plain greedy, then draft k=4 and prompt lookup with adaptive k, on spectui's loop."""
    from spectui.core.events import Control, Done, GenerationParams, Prefill
    from spectui.engines.ggml.load import load_ggml_engine

    results = {}
    params = GenerationParams(max_tokens=tokens, top_p=1.0, seed=0)
    arms = [("plain", "ngram", Control(0, 0.0)), ("ngram auto", "ngram", Control(4, 0.0, auto=True))]
    if draft is not None:
        arms.insert(1, ("draft k=4", "draft", Control(4, 0.0)))
    engines = {}
    for label, method, control in arms:
        if method not in engines:
            engines[method] = load_ggml_engine(path, tokenizer, method, draft, threads)
        engine = engines[method]
        engine.forget_prompts()
        steps, first, started = [], None, time.perf_counter()
        for event in engine.stream(MESSAGES, params, control):
            if isinstance(event, Done):
                if event.finish_reason == "error":
                    raise RuntimeError(event.error)
                break
            if isinstance(event, Prefill):
                continue
            first = first or time.perf_counter() - started
            steps.append(event)
        wall = time.perf_counter() - started
        ids = [t for s in steps for t in s.token_ids]
        drafted = sum(s.num_drafted for s in steps)
        results[label] = {"ids": ids, "speed": (len(ids) - 1) / (wall - first) if len(ids) > 1 else None,
                          "gamma": sum(s.num_accepted for s in steps) / drafted if drafted else None}
    for engine in engines.values():
        engine.close()
    return results


def spectui_plain(model: str, tokens: int) -> float:
    from spectui.core.events import Control, Done, GenerationParams, Prefill
    from spectui.engines.torch_backend.build import build_embedded_engine
    from spectui.settings.options import EngineOptions

    from spectui.models.registry import resolve_pair

    engine = build_embedded_engine(EngineOptions(model=model, method="ngram", k=0), resolve_pair(model, None))
    speeds = []
    for _ in range(2):
        engine.forget_prompts()
        count, first, started = 0, None, time.perf_counter()
        for event in engine.stream(MESSAGES, GenerationParams(max_tokens=tokens, top_p=1.0, seed=0), Control(0, 0.0)):
            if isinstance(event, Done):
                break
            if isinstance(event, Prefill):
                continue
            first = first or time.perf_counter() - started
            count += len(event.token_ids)
        speeds.append((count - 1) / (time.perf_counter() - started - first))
    engine.close()
    return speeds[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="qwen2.5-coder-1.5b")
    parser.add_argument("--draft", default="qwen2.5-coder-0.5b", help="'' for none")
    parser.add_argument("--quants", default="Q4_K_M,Q8_0,Q4_0")
    parser.add_argument("--batches", default="1,2,3,5,9")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=64, help="reply length for the engine's arms (0: skip them)")
    parser.add_argument("--threads", type=int)
    parser.add_argument("--prefill", type=int, default=400, help="prompt length whose prefill speed is timed")
    parser.add_argument("--spectui", action="store_true", help="add the embedded engine's plain speed")
    parser.add_argument("--markdown", type=Path)
    args = parser.parse_args()
    from spectui.models.load import load_tokenizer

    command = "python " + " ".join(shlex.quote(a) for a in sys.argv)
    from spectui.models.registry import resolve

    tokenizer = load_tokenizer(resolve(args.model))
    prompt_ids = tokenizer.apply_chat_template(MESSAGES, add_generation_prompt=True, tokenize=True, return_dict=False)
    batches = sorted({1, *(int(b) for b in args.batches.split(","))})
    draft = gguf_variant(args.draft, "Q4_K_M") if args.draft else None
    lines = ["# llama.cpp: verify cost per quantisation, and spectui's loop on its kernels", "",
             f"Reproduce: `{command}`", "",
             f"Machine: {os.cpu_count()} CPUs; {args.model}, prompt {len(prompt_ids)} tokens, threads "
             f"{args.threads or 'all'}; medians of {args.repeats} batches after a warm-up. Engine arms: greedy, "
             f"{args.tokens} tokens, draft {args.draft or 'none'} (Q4_K_M); 'same as plain' compares token ids.", "",
             f"| quant | load s | prefill tok/s ({args.prefill} tokens) | exact verify rows | plain tok/s (1/t(1)) | " + " | ".join(f"v({n})" for n in batches[1:]) +
             " | engine plain tok/s | draft k=4 tok/s (γ, same as plain) | ngram auto tok/s (γ, same as plain) |",
             "|" + "---|" * (8 + len(batches) - 1)]
    for kind in [q.strip() for q in args.quants.split(",") if q.strip()]:
        path = gguf_variant(args.model, kind)
        costs = verify_costs(path, prompt_ids, batches, args.repeats, args.threads, args.prefill)
        t1 = costs["seconds"][1]
        cells = [kind, f"{costs['load']:.2f}", f"{costs['prefill']:.1f}", str(costs["rows"]), f"{1 / t1:.2f}"] + [f"{costs['seconds'][n] / t1:.2f}" for n in batches[1:]]
        if args.tokens:
            replies = engine_replies(path, draft, tokenizer, args.tokens, args.threads)
            plain = replies["plain"]
            cells.append(f"{plain['speed']:.2f}")
            for label in ("draft k=4", "ngram auto"):
                reply = replies.get(label)
                cells.append("—" if reply is None else f"{reply['speed']:.2f} (γ {reply['gamma'] or 0:.2f}, "
                             f"{'yes' if reply['ids'] == plain['ids'] else 'NO'})")
        else:
            cells += ["—"] * 3
        lines.append("| " + " | ".join(cells) + " |")
        print(lines[-1], file=sys.stderr, flush=True)
    if args.spectui:
        lines += ["", f"spectui's embedded engine, plain greedy, same prompt: {spectui_plain(args.model, args.tokens):.2f} tok/s."]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.markdown:
        args.markdown.write_text(text)


if __name__ == "__main__":
    main()
