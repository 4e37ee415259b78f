"""A chat about an attached file, turn by turn, on the engine the chat builds: each turn's time to
first token (the follow-ups reuse the cached conversation), its decode speed and the share of
the reply that came from accepted drafts (the coloured share).

    python benchmarks/followup_ttft.py [--model qwen2.5-coder-1.5b] [--k auto] [--max-tokens 400] \
        [--markdown benchmarks/reports/followup-ttft.md] [--save-ids benchmarks/bench/chat-ids.json]

The conversation is the bench's `chat-attached-file` one (spectui.bench.workloads): the example
module attached with a question, then a type-hint edit of the whole module, then a summary. Each
turn sends the whole history with the replies the engine wrote, as the chat does.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time


def run_turn(engine, messages: list[dict], k: str, max_tokens: int) -> dict:
    from spectui.core.events import Control, Done, GenerationParams, Source, Step

    control = Control(k=4 if k == "auto" else int(k), temperature=0.0, auto=k == "auto")
    started = time.perf_counter()
    first = None
    tokens = drafted = 0
    prompt_ids: tuple[int, ...] = ()
    text, token_ids = [], []
    for event in engine.stream(messages, GenerationParams(max_tokens=max_tokens), control):
        if isinstance(event, Done):
            prompt_ids = event.prompt_token_ids
        if not isinstance(event, Step):
            continue
        if first is None:
            first = time.perf_counter()
        tokens += len(event.token_ids)
        token_ids += event.token_ids
        drafted += sum(source is Source.DRAFT for source in event.sources)
        text.append(event.text)
    ended = time.perf_counter()
    first = first or ended
    return {"ttft": first - started, "prompt_ids": prompt_ids, "token_ids": token_ids, "tokens": tokens, "coloured": drafted / max(tokens, 1),
            "decode_tok_s": (tokens - 1) / max(ended - first, 1e-9), "reply": "".join(text)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="qwen2.5-coder-1.5b")
    parser.add_argument("--k", default="auto", help="a fixed k, or auto (the chat's default)")
    parser.add_argument("--max-tokens", type=int, default=400)
    parser.add_argument("--markdown", default=None)
    parser.add_argument("--save-ids", default=None, metavar="PATH",
                        help="write each turn's prompt and reply token ids (for benchmarks/copy_replay.py)")
    args = parser.parse_args()

    from spectui.bench.workloads import conversation_script
    from spectui.core.files import show_report
    from spectui.engines.factory import models_to_run
    from spectui.engines.speculative.cached_model import common_prefix_len
    from spectui.host.plan import engine_factory_for
    from spectui.settings.config import ChatConfig

    config = ChatConfig().with_overrides(model=args.model)
    engine = engine_factory_for(config, models_to_run(config.engine, config.model, config.draft))(None)
    script = conversation_script("chat-attached-file")
    history: list[dict] = []
    rows = []
    cached: list[int] = []  # what the engine's cache holds after a turn: its prompt and its reply
    try:
        for index, message in enumerate(script):
            if message["role"] != "user":
                continue
            history.append(message)
            turn = run_turn(engine, history, args.k, args.max_tokens)
            turn["new"] = len(turn["prompt_ids"]) - common_prefix_len(cached, turn["prompt_ids"])
            cached = [*turn["prompt_ids"], *turn["token_ids"]]
            history.append({"role": "assistant", "content": turn["reply"]})
            rows.append((len(rows) + 1, message["content"].splitlines()[-1][:60], turn))
            print(f"turn {len(rows)}: TTFT {turn['ttft']:.2f} s, {turn['tokens']} tokens, "
                  f"{turn['decode_tok_s']:.2f} tok/s, coloured {turn['coloured']:.0%}", file=sys.stderr, flush=True)
    finally:
        engine.close()
    lines = [f"`python benchmarks/followup_ttft.py {shlex.join(sys.argv[1:])}`", "",
             f"{args.model} as `spectui chat` builds it, k {args.k}, T = 0, at most {args.max_tokens} tokens a reply:", "",
             "| turn | the user's question | prompt tokens | new since the last turn | first token | tokens | decode tok/s | coloured |",
             "|---|---|---|---|---|---|---|---|"]
    for number, question, turn in rows:
        lines.append(f"| {number} | {question} | {len(turn['prompt_ids'])} | {turn['new']} | "
                     f"{turn['ttft']:.2f} s | {turn['tokens']} | {turn['decode_tok_s']:.2f} | {turn['coloured']:.0%} |")
    text = "\n".join(lines) + "\n"
    show_report(text, args.markdown)
    if args.save_ids:
        import json

        from spectui.core.files import write_user_file

        turns = [{"name": f"turn{number}", "question": question, "prompt": list(turn["prompt_ids"]), "reply": turn["token_ids"]}
                 for number, question, turn in rows]
        write_user_file(args.save_ids, json.dumps({"model": args.model, "turns": turns}), overwrite=True)


if __name__ == "__main__":
    main()
