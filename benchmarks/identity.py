"""T = 0 identity on the proof corpus for the default models: every method at k 1, 2, 3, 4, 8
and auto against the engine's own plain reply, replies up to 512 tokens, divergences counted,
located (prompt, arm, token) and given the plain path's top-two logit gap there.

    python benchmarks/identity.py --prompts 60 --tokens 512 --per-prompt 18 --markdown benchmarks/reports/identity.md

The suite's version (tests/test_lossless_corpus.py) runs SmolLM2 in minutes; this one runs the
default target (qwen2.5-coder-1.5b, ggml) with the 0.5B draft, prompt lookup and suffix decoding.
`--per-prompt` arms per prompt, taken in turn from the 18; 18 runs every arm on every prompt.
`--cross-draft` adds a draft with another tokenizer (SmolLM2-135M's) by each of `--vocab`'s
rules (TLI, SLEM), its draft arms checked the same way. The Markdown starts with the command.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="qwen2.5-coder-1.5b")
    parser.add_argument("--draft", default="qwen2.5-coder-0.5b")
    parser.add_argument("--prompts", type=int, default=60)
    parser.add_argument("--tokens", type=int, default=512)
    parser.add_argument("--per-prompt", type=int, default=18)
    parser.add_argument("--preamble", action="store_true", help="a ~270-token system prompt before each prompt")
    parser.add_argument("--cross-draft", default="smollm2-135m", help="a draft of another tokenizer ('' for none)")
    parser.add_argument("--vocab", default="tli,slem", help="the cross draft's rules, each checked")
    parser.add_argument("--markdown", default=None)
    args = parser.parse_args()

    from spectui.bench.identity import arms, check_identity, corpus, rotating
    from spectui.engines.speculative.suffix import SuffixProposer
    from spectui.engines.ggml.build import build_ggml_engine
    from spectui.core.files import show_report
    from spectui.models.registry import resolve_pair
    from spectui.settings.options import EngineOptions

    engine = build_ggml_engine(EngineOptions(model=args.model, method="draft", draft=args.draft),
                               resolve_pair(args.model, args.draft))
    engine.add_proposer("ngram", engine.with_method("ngram").proposer, None)
    engine.add_proposer("suffix", SuffixProposer(use_history=False), None)
    prompts = corpus(args.prompts, preamble=args.preamble)
    runs = [(f"drafted by {args.draft}, prompt lookup and suffix decoding", engine, arms(["draft", "ngram", "suffix"]))]
    for rule in (args.vocab.split(",") if args.cross_draft else []):
        cross = build_ggml_engine(EngineOptions(model=args.model, method="draft", draft=args.cross_draft, vocab=rule),
                                  resolve_pair(args.model, args.cross_draft))
        runs.append((f"drafted by {args.cross_draft} ({cross.info.draft_vocab})", cross, arms(["draft"])))
    lines = [f"`python benchmarks/identity.py {shlex.join(sys.argv[1:])}`", ""]
    for what, checked, every_arm in runs:
        started = time.perf_counter()
        result = check_identity(checked, prompts, rotating(every_arm, min(args.per_prompt, len(every_arm))),
                                max_tokens=args.tokens, progress=lambda line: print(line, file=sys.stderr, flush=True))
        seconds = time.perf_counter() - started
        checked.close()
        lines += report_lines(f"{args.model} (ggml, {checked.info.backend}) {what}", result, seconds)
    show_report("\n".join(lines) + "\n", args.markdown)


def report_lines(what: str, result, seconds: float) -> list[str]:
    divergences = result.divergences or []
    lines = [
        f"{what}: {result.replies} speculative replies, {result.tokens} tokens, {result.accepted} drafts accepted, "
        f"in {seconds / 60:.1f} min.",
        "",
        "| | divergences |",
        "|---|---|",
        f"| replies that left the plain reply | **{len(divergences)}** of {result.replies} |",
        "",
    ]
    if divergences:
        lines += ["| prompt | arm | token | plain | speculative | top-two gap |", "|---|---|---|---|---|---|"]
        lines += [f"| {d.prompt} | {d.arm} | {d.position} | {d.plain_token} | {d.drafted_token} | "
                  f"{'–' if d.gap is None else f'{d.gap:.4g}'} |" for d in divergences]
    return lines + [""]


if __name__ == "__main__":
    main()
