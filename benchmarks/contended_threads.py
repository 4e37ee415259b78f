"""Plain decoding with and without one competing busy process, per thread policy, in one run.

    python benchmarks/contended_threads.py --model smollm2-135m --tokens 64 --rounds 2 \
        --policies default,passive,threads1,passive-threads1,fit,passive-fit --markdown benchmarks/reports/contended.md

Each policy runs in a fresh child process (OpenMP reads its environment once, when torch
loads), first on an idle machine and then beside `python -c "while True: pass"`; each child
loads the embedded engine, warms up, and times `--rounds` replies of `--tokens` tokens at
k = 0. `--llamacpp` adds llama.cpp's plain decoding of the same GGUF at 2 and 1 threads.
The Markdown starts with the command that wrote it.

Policies:
  default           torch's defaults (threads = cores, OpenMP's own wait policy)
  passive           OMP_WAIT_POLICY=PASSIVE: idle OpenMP threads sleep instead of spinning
  threads1          torch.set_num_threads(1)
  passive-threads1  both
  fit               spectui's: as many threads as cores the other processes leave free, per
                    reply (spectui.engines.threads.fit_threads), OpenMP's own wait policy
  passive-fit       fit with sleeping waits (spectui's policy before 2026-12-03)
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

PROMPT = [{"role": "user", "content": "Write a Python function that parses an ISO 8601 date and returns the weekday."}]
POLICY_ENV = {
    "default": {},
    "passive": {"OMP_WAIT_POLICY": "PASSIVE"},
    "threads1": {"SPECTUI_BENCH_THREADS": "1"},
    "passive-threads1": {"OMP_WAIT_POLICY": "PASSIVE", "SPECTUI_BENCH_THREADS": "1"},
    "fit": {"SPECTUI_BENCH_FIT": "1"},
    "passive-fit": {"OMP_WAIT_POLICY": "PASSIVE", "SPECTUI_BENCH_FIT": "1"},
}


def child(model: str, tokens: int, rounds: int, policy: str) -> dict:
    """One policy's replies, in this (fresh) process: JSON on stdout."""
    if policy.startswith("llamacpp-"):
        return llamacpp_child(model, tokens, rounds, int(policy.split("-")[1]))
    import torch

    from spectui.core.events import Control, Done, GenerationParams, Prefill
    from spectui.engines.torch_backend.build import build_embedded_engine
    from spectui.settings.options import EngineOptions

    if os.environ.get("SPECTUI_BENCH_THREADS"):
        torch.set_num_threads(int(os.environ["SPECTUI_BENCH_THREADS"]))
    from spectui.models.registry import resolve_pair

    engine = build_embedded_engine(EngineOptions(model=model, method="ngram", k=0), resolve_pair(model, None))
    params = GenerationParams(max_tokens=tokens, top_p=1.0, seed=0)
    speeds, firsts, threads = [], [], []
    for index in range(rounds + 1):  # the first is a warm-up
        if os.environ.get("SPECTUI_BENCH_FIT"):
            from spectui.engines.threads import fit_threads

            fit_threads()
        engine.forget_prompts()
        started = time.perf_counter()
        first = None
        count = 0
        for event in engine.stream(PROMPT, params, Control(0, 0.0)):
            if isinstance(event, Done):
                break
            if isinstance(event, Prefill):
                continue
            if first is None:
                first = time.perf_counter() - started
            count += len(event.token_ids)
        wall = time.perf_counter() - started
        if index:
            speeds.append((count - 1) / (wall - first))
            firsts.append(first)
            threads.append(torch.get_num_threads())
    return {"speeds": speeds, "first_token": firsts, "threads": threads}


def llamacpp_child(model: str, tokens: int, rounds: int, threads: int) -> dict:
    from transformers import AutoTokenizer

    from spectui.bench.anchors.llamacpp import LlamaCppRunner, gguf_for
    from spectui.bench.runs import Arm
    from spectui.core.events import GenerationParams
    from spectui.models.load import ensure_local
    from spectui.models.registry import resolve

    resolved = resolve(model)
    tokenizer = AutoTokenizer.from_pretrained(ensure_local(resolved))
    runner = LlamaCppRunner(lambda messages: tokenizer.apply_chat_template(
        messages, add_generation_prompt=True, tokenize=True, return_dict=False), set(), gguf_for(resolved), None, threads)
    params = GenerationParams(max_tokens=tokens, top_p=1.0, seed=0)
    replies = [runner.run(Arm("llamacpp", "none", 0), PROMPT, params, 0.0) for _ in range(rounds + 1)][1:]
    return {"speeds": [r.decode_tokens_per_s for r in replies], "first_token": [r.first_token_seconds for r in replies],
            "threads": [threads] * len(replies)}


def run_policy(args, policy: str, contended: bool) -> dict:
    env = {**os.environ, **POLICY_ENV.get(policy, {})}
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if contended else None
    try:
        command = [sys.executable, __file__, "--child", policy, "--model", args.model, "--tokens", str(args.tokens),
                   "--rounds", str(args.rounds)]
        result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=args.timeout)
    finally:
        if busy is not None:
            busy.kill()
            busy.wait()
    if result.returncode != 0:
        return {"error": (result.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(result.stdout.strip().splitlines()[-1])


def markdown(command: str, rows: list[tuple[str, dict, dict]], args) -> str:
    lines = [
        "# Plain decoding beside one busy process", "",
        f"Reproduce: `{command}`", "",
        f"Machine: {os.cpu_count()} CPUs ({cpu_name()}). Model {args.model}, k = 0, {args.tokens} tokens per reply, "
        f"median of {args.rounds} replies after a warm-up; one child process per policy and load.", "",
        "| policy | idle tok/s | contended tok/s | contended / idle | first token s (idle / contended) | threads (idle / contended) |",
        "|---|---|---|---|---|---|",
    ]
    for policy, idle, busy in rows:
        if "error" in idle or "error" in busy:
            lines.append(f"| {policy} | {idle.get('error', '')} | {busy.get('error', '')} | | | |")
            continue
        a, b = statistics.median(idle["speeds"]), statistics.median(busy["speeds"])
        lines.append(f"| {policy} | {a:.2f} | {b:.2f} | {b / a:.2f}× | {statistics.median(idle['first_token']):.2f} / "
                     f"{statistics.median(busy['first_token']):.2f} | {idle['threads']} / {busy['threads']} |")
    return "\n".join(lines) + "\n"


def cpu_name() -> str:
    try:
        return next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="qwen2.5-coder-1.5b")
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--policies", default="default,passive,threads1,passive-threads1,fit,passive-fit")
    parser.add_argument("--llamacpp", action="store_true", help="add llama.cpp at 2 and 1 threads")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per child")
    parser.add_argument("--markdown", type=Path)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.model, args.tokens, args.rounds, args.child)))
        return
    command = "python " + " ".join(shlex.quote(a) for a in sys.argv)
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    policies += ["llamacpp-2", "llamacpp-1"] if args.llamacpp else []
    rows = []
    for policy in policies:
        idle = run_policy(args, policy, contended=False)
        busy = run_policy(args, policy, contended=True)
        rows.append((policy, idle, busy))
        print(f"{policy}: idle {idle}, contended {busy}", file=sys.stderr, flush=True)
    text = markdown(command, rows, args)
    print(text)
    if args.markdown:
        args.markdown.write_text(text)


if __name__ == "__main__":
    main()
