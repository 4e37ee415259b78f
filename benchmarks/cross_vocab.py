"""Cross-vocabulary drafting (TLI) on ggml: the pair's vocabulary intersection (size, build time,
cached read) and the acceptance γ of a draft with another tokenizer at T = 0, per prompt, with
each reply checked against the target's plain greedy reply.

    python benchmarks/cross_vocab.py --targets qwen2.5-coder-0.5b,qwen2.5-coder-1.5b --draft smollm2-135m --k 4 --tokens 48 --markdown benchmarks/reports/cross-vocab.md

γ = accepted drafts / drafted tokens. Timings of whole replies are not reported: acceptance and
identity do not depend on a busy machine, speed does. The Markdown starts with the command.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
import time
from pathlib import Path

PROMPTS = [
    "Write a Python function that checks whether a string is a palindrome.",
    "List the numbers one to twelve in words, one per line.",
    "Explain what a hash map is in three sentences.",
    "Write a SQL query that returns the ten most recent orders with their customer names.",
]


def intersection_rows(targets: list[str], draft: str) -> list[str]:
    from spectui.models.gguf_local import gguf_model
    from spectui.models.registry import resolve
    from spectui.models.vocab_map import vocab_map

    draft_folder = gguf_model(resolve(draft)).tokenizer
    rows = []
    for target in targets:
        folder = gguf_model(resolve(target)).tokenizer
        with tempfile.TemporaryDirectory() as cache:
            started = time.perf_counter()
            built = vocab_map(folder, draft_folder, Path(cache))
            build_s = time.perf_counter() - started
            started = time.perf_counter()
            vocab_map(folder, draft_folder, Path(cache))
            read_s = time.perf_counter() - started
        rows.append(f"| {target} | {draft} | {built.shared:,} | {built.draft_shareable:,} | {built.target_shareable:,} "
                    f"| {built.draft_overlap:.1%} | {build_s:.2f} | {read_s * 1000:.0f} |")
    return rows


def acceptance_rows(target: str, draft: str, k: int, tokens: int) -> list[str]:
    from spectui.core.events import Control, GenerationParams, Step
    from spectui.engines.ggml.build import build_ggml_engine
    from spectui.models.registry import resolve_pair
    from spectui.settings.options import EngineOptions

    engine = build_ggml_engine(EngineOptions(model=target, method="draft", draft=draft), resolve_pair(target, draft))
    rows = []
    try:
        for prompt in PROMPTS:
            replies = {}
            for control in (Control(0, 0.0), Control(k, 0.0)):
                engine.forget_prompts()
                steps = [event for event in engine.stream([{"role": "user", "content": prompt}],
                                                          GenerationParams(max_tokens=tokens, top_p=1.0, seed=0), control)
                         if isinstance(event, Step)]
                replies[control.k] = ([t for step in steps for t in step.token_ids], steps)
            (plain, _), (tokens_k, steps) = replies[0], replies[k]
            drafted = sum(len(step.drafted) for step in steps)
            accepted = sum(step.num_accepted for step in steps)
            rows.append(f"| {target} | {prompt[:48]} | {k} | {accepted}/{drafted} | {accepted / max(drafted, 1):.2f} "
                        f"| {1 + accepted / max(1, sum(1 for s in steps if s.drafted)):.2f} | {'yes' if tokens_k == plain else 'NO'} |")
            print(rows[-1], flush=True)
    finally:
        engine.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", default="qwen2.5-coder-0.5b,qwen2.5-coder-1.5b")
    parser.add_argument("--draft", default="smollm2-135m")
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--markdown", default=None)
    args = parser.parse_args()

    from spectui.core.files import show_report

    targets = args.targets.split(",")
    lines = [f"# Cross-vocabulary drafting (TLI) on ggml\n\n`python benchmarks/cross_vocab.py {shlex.join(sys.argv[1:])}`\n",
             "## The vocabulary intersection\n",
             "| target | draft | shared | draft tokens | target tokens | of the draft's | built s | cached read ms |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |", *intersection_rows(targets, args.draft), "",
             f"## Acceptance at T = 0 ({args.tokens}-token replies)\n",
             "| target | prompt | k | accepted/drafted | γ | τ | = plain |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for target in targets:
        lines += acceptance_rows(target, args.draft, args.k, args.tokens)
    show_report("\n".join(lines) + "\n", args.markdown)


if __name__ == "__main__":
    main()
