"""What transformers' forward costs: spectui's lean forward and transformers', timed.

    python benchmarks/lean_forward.py [--model qwen2.5-coder-0.5b] [--dtype int8-dynamic] [--compile] [--rounds 4]

`spectui.engines.torch_backend.lean` runs the modules transformers' Llama/Qwen2 forward runs,
without the plumbing around them, bitwise the same (tests/test_lean.py checks it). This times
one-token and five-token forwards of each after a 150-token prompt, alternating rounds;
`--compile` times `torch.compile` of the lean forward too. Run it on an idle machine: the two
cores are the whole machine here.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

PROMPT_TOKENS = 150
ROUNDS = 4


def transformers_forward(model, input_ids, cache, logits_to_keep: int = 1):
    from spectui.engines.torch_backend.kv import cache_argument

    cached = {cache_argument(model): cache}
    return model(input_ids=input_ids, use_cache=True, logits_to_keep=logits_to_keep, **cached).logits


def milliseconds(forward, model) -> tuple[float, float]:
    """(one-token forward, five-token forward) after a 150-token prompt."""
    import torch
    from transformers import DynamicCache

    cache = DynamicCache()
    vocab = model.config.vocab_size  # ids within it: a tiny test model has a few hundred
    forward(model, torch.randint(100, 20000, (1, PROMPT_TOKENS)) % vocab, cache)
    one, five = torch.tensor([[1234]]) % vocab, torch.tensor([[1234, 55, 66, 77, 88]]) % vocab
    for _ in range(3):
        forward(model, one, cache)
    start = time.perf_counter()
    for _ in range(20):
        forward(model, one, cache)
    single = (time.perf_counter() - start) / 20
    start = time.perf_counter()
    for _ in range(8):
        forward(model, five, cache, 5)
        cache.crop(-5)
    return single * 1000, (time.perf_counter() - start) / 8 * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--dtype", default="int8-dynamic")
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    args = parser.parse_args()

    import torch

    from spectui.engines.torch_backend.lean import lean_forward
    from spectui.models.load import load_model

    from spectui.models.registry import resolve

    model, _ = load_model(resolve(args.model), args.dtype)
    arms = {"transformers": transformers_forward, "lean": lean_forward}
    if args.compile:
        arms["lean, torch.compile"] = torch.compile(lean_forward, dynamic=True)
    with torch.inference_mode():
        print(f"{args.model} {args.dtype}:")
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in arms}
        for _ in range(args.rounds):
            for name, forward in arms.items():
                times[name].append(milliseconds(forward, model))
    for name, rows in times.items():
        one = statistics.median(r[0] for r in rows)
        five = statistics.median(r[1] for r in rows)
        print(f"  {name:22} 1 token {one:6.1f} ms   5 tokens {five:6.1f} ms   (median of {args.rounds} rounds)")


if __name__ == "__main__":
    main()
