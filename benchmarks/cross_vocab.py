"""Cross-vocabulary drafting (TLI, SLEM) on ggml: the pair's vocabulary intersection (size, build
time, cached read) and the acceptance of a draft with another tokenizer at T = 0 by each rule,
per case (four prompts, or a bench suite), with each reply checked against the target's plain
greedy reply.

    python benchmarks/cross_vocab.py --suite conversations --k 4 --tokens 32 --fill-tokens 48 --markdown benchmarks/reports/cross-vocab.md

γ = accepted drafts / drafted tokens and τ = 1 + accepted / drafting steps, both in the
target's tokens (a SLEM draft is counted as the target tokens it became). Timings of whole replies are not reported: acceptance and
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


def cases(suite: str, engine, fill_tokens: int) -> list[tuple[str, list[dict]]]:
    """(name, messages) to reply to: the prompts above, or the conversations suite with its
    earlier replies written by the target (greedy, fill_tokens each: a small budget on a shared box)."""
    if suite == "prompts":
        return [(prompt[:48], [{"role": "user", "content": prompt}]) for prompt in PROMPTS]
    from spectui.bench.conversations import fill_replies, greedy_reply
    from spectui.bench.workloads import suite as workloads

    filled = fill_replies(workloads(suite), greedy_reply(engine, fill_tokens))
    return [(workload.name, [dict(message) for message in workload.messages]) for workload in filled]


def reply_steps(engine, messages: list[dict], control, tokens: int) -> tuple[list[int], list]:
    from spectui.core.events import GenerationParams, Message, Step

    steps = [event for event in engine.stream([Message(**message) for message in messages],
                                              GenerationParams(max_tokens=tokens, top_p=1.0, seed=0), control)
             if isinstance(event, Step)]
    return [t for step in steps for t in step.token_ids], steps


def acceptance_rows(target: str, draft: str, k: int, tokens: int, rules: list[str], suite: str = "prompts",
                    fill_tokens: int = 48) -> tuple[list[str], list[str]]:
    """Per case and rule (tli, slem) the row, and per rule the totals' row."""
    from spectui.core.events import Control
    from spectui.engines.ggml.build import build_ggml_engine
    from spectui.models.registry import resolve_pair
    from spectui.settings.options import EngineOptions

    engines = {rule: build_ggml_engine(EngineOptions(model=target, method="draft", draft=draft, vocab=rule),
                                       resolve_pair(target, draft)) for rule in rules}
    rows, totals = [], {rule: [0, 0, 0, True] for rule in rules}  # accepted, drafted, drafting steps, all = plain
    try:
        first = engines[rules[0]]
        for name, messages in cases(suite, first, fill_tokens):
            plain, _ = reply_steps(first, messages, Control(0, 0.0), tokens)
            for rule, engine in engines.items():
                tokens_k, steps = reply_steps(engine, messages, Control(k, 0.0), tokens)
                drafted = sum(len(step.drafted) for step in steps)
                accepted = sum(step.num_accepted for step in steps)
                drafting = sum(1 for s in steps if s.drafted)
                total = totals[rule]
                total[0], total[1], total[2] = total[0] + accepted, total[1] + drafted, total[2] + drafting
                total[3] = total[3] and tokens_k == plain
                rows.append(f"| {target} | {name} | {rule} | {k} | {accepted}/{drafted} | {accepted / max(drafted, 1):.2f} "
                            f"| {1 + accepted / max(1, drafting):.2f} | {'yes' if tokens_k == plain else 'NO'} |")
                print(rows[-1], flush=True)
    finally:
        for engine in engines.values():
            engine.close()
    overlap = first.info.draft_vocab.split(" ·")[0]
    summary = [f"| {target} | {draft} | {overlap} | {rule} | {k} | {a}/{d} | {a / max(d, 1):.2f} | {1 + a / max(1, n):.2f} "
               f"| {'yes' if same else 'NO'} |" for rule, (a, d, n, same) in totals.items()]
    return rows, summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", default="qwen2.5-coder-0.5b,qwen2.5-coder-1.5b")
    parser.add_argument("--draft", default="smollm2-135m")
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--vocab", default="tli,slem", help="the rules to measure: tli, slem or both")
    parser.add_argument("--suite", default="prompts", help="prompts (the four above) or a bench suite (conversations)")
    parser.add_argument("--fill-tokens", type=int, default=48, help="a conversation's earlier replies: tokens each")
    parser.add_argument("--markdown", default=None)
    args = parser.parse_args()

    from spectui.core.files import show_report

    targets, rules = args.targets.split(","), args.vocab.split(",")
    case_rows, summary = [], []
    for target in targets:
        rows, totals = acceptance_rows(target, args.draft, args.k, args.tokens, rules, args.suite, args.fill_tokens)
        case_rows += rows
        summary += totals
    lines = [f"# Cross-vocabulary drafting (TLI, SLEM) on ggml\n\n`python benchmarks/cross_vocab.py {shlex.join(sys.argv[1:])}`\n",
             "## The vocabulary intersection\n",
             "| target | draft | shared | draft tokens | target tokens | of the draft's | built s | cached read ms |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |", *intersection_rows(targets, args.draft), "",
             f"## Acceptance at T = 0, {args.suite} ({args.tokens}-token replies), all cases\n",
             "| target | draft | draft vocabulary | vocab | k | accepted/drafted | γ | τ | all = plain |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |", *summary, "",
             "## Per case\n",
             "| target | case | vocab | k | accepted/drafted | γ | τ | = plain |", "| --- | --- | --- | --- | --- | --- | --- | --- |",
             *case_rows]
    show_report("\n".join(lines) + "\n", args.markdown)


if __name__ == "__main__":
    main()
