"""The int8 target's decode speed as loaded (slices), settled (slices joined) and packed whole,
under OpenMP's own wait policy and under sleeping waits, in one run.

    python benchmarks/int8_slices.py --model qwen2.5-coder-1.5b --tokens 40 --rounds 3 --markdown benchmarks/reports/int8-slices.md

Each arm runs in a fresh child process (OpenMP reads its wait policy once, when torch loads):
it loads the model from its int8 store, settles it or not, prefills a 150-token prompt and
times `--tokens` greedy one-token forwards, `--rounds` times; the arms take turns, round by
round, so a machine that slows for a while slows them all (`--arm NAME`, again for more, runs only
those). The Markdown starts with the
command that wrote it.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

ARMS = {
    "loaded": {},
    "settled": {"SETTLE": "1"},
    "whole": {"WHOLE": "1"},
    "loaded, passive": {"OMP_WAIT_POLICY": "PASSIVE"},
    "settled, passive": {"OMP_WAIT_POLICY": "PASSIVE", "SETTLE": "1"},
}
PROMPT = "def parse(text):\n    " * 30


def child(model_name: str, tokens: int) -> dict:
    import psutil
    import torch
    from transformers import DynamicCache

    from spectui.models import quantize
    from spectui.models.load import load_model

    if os.environ.get("WHOLE"):
        quantize.SLICE_ABOVE_ROWS = 10**9
    started = time.perf_counter()
    from spectui.models.registry import resolve

    model, tokenizer = load_model(resolve(model_name), "int8")
    load = time.perf_counter() - started
    settle = 0.0
    if os.environ.get("SETTLE"):
        started = time.perf_counter()
        quantize.settle_int8([model])
        settle = time.perf_counter() - started
    ids = tokenizer(PROMPT, return_tensors="pt").input_ids
    with torch.inference_mode():
        cache = DynamicCache()
        next_id = model(input_ids=ids, past_key_values=cache, use_cache=True).logits[:, -1:].argmax(-1)
        started = time.perf_counter()
        for _ in range(tokens):
            next_id = model(input_ids=next_id, past_key_values=cache, use_cache=True).logits[:, -1:].argmax(-1)
        step = (time.perf_counter() - started) / tokens
    return {"load_s": load, "settle_s": settle, "step_ms": step * 1000, "rss_gib": psutil.Process().memory_info().rss / 2**30,
            "head_slices": len(model.lm_head._packed)}


def run_arm(args, arm: str) -> dict:
    env = {key: value for key, value in os.environ.items() if key not in ("OMP_WAIT_POLICY", "SETTLE", "WHOLE")}
    env.update(ARMS[arm])
    command = [sys.executable, __file__, "--child", "--model", args.model, "--tokens", str(args.tokens)]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=args.timeout)
    if result.returncode != 0:
        raise SystemExit(f"{arm}: {(result.stderr.strip().splitlines() or ['failed'])[-1]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def markdown(command: str, results: dict[str, list[dict]], args) -> str:
    lines = [
        "# The int8 target's decode: as loaded, settled, packed whole", "",
        f"Reproduce: `{command}`", "",
        f"Machine: {os.cpu_count()} CPUs. Model {args.model}, {args.tokens} greedy one-token forwards after a 150-token "
        f"prompt, {args.rounds} rounds (arms in turn, each in a fresh process); medians.", "",
        f"| arm | ms / token | vs {'loaded' if 'loaded' in results else next(iter(results))} | load s | settle s | RSS GiB | LM head slices |",
        "|---|---|---|---|---|---|---|",
    ]
    base = statistics.median(r["step_ms"] for r in results.get("loaded", next(iter(results.values()))))
    for arm, rounds in results.items():
        step = statistics.median(r["step_ms"] for r in rounds)
        lines.append(f"| {arm} | {step:.1f} | {base / step:.2f}× | {statistics.median(r['load_s'] for r in rounds):.1f} | "
                     f"{statistics.median(r['settle_s'] for r in rounds):.1f} | {statistics.median(r['rss_gib'] for r in rounds):.2f} | "
                     f"{rounds[0]['head_slices']} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="qwen2.5-coder-1.5b")
    parser.add_argument("--tokens", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--timeout", type=int, default=900, help="seconds per child")
    parser.add_argument("--arm", action="append", choices=list(ARMS), help="run this arm (again for more; default: every arm)")
    parser.add_argument("--markdown", type=Path)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.model, args.tokens)))
        return
    command = "python " + " ".join(shlex.quote(a) for a in sys.argv)
    arms = args.arm or list(ARMS)
    results: dict[str, list[dict]] = {arm: [] for arm in arms}
    for round_index in range(args.rounds):
        for arm in arms:
            results[arm].append(run_arm(args, arm))
            print(f"round {round_index + 1}, {arm}: {results[arm][-1]}", file=sys.stderr, flush=True)
    text = markdown(command, results, args)
    print(text)
    if args.markdown:
        args.markdown.write_text(text)


if __name__ == "__main__":
    main()
