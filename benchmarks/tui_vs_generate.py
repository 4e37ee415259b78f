"""Tokens/s of one real reply inside the TUI against `spectui generate`'s path, in one run.

    python benchmarks/tui_vs_generate.py [--model M] [--draft D] [--method draft|ngram]
        [-k 4] [--max-tokens 128] [--rounds 3] [--prompt TEXT] [--engine-in process|thread]
        [--keys] [--engine-env NAME=VALUE ...] [--json]

One process loads the engine once, then alternates (order flipped each round):
  generate  run_reply() on the main thread, nothing else running — what `spectui generate` does;
  tui       the chat app in a real pseudo-terminal (Linux driver, this script's parent reads
            every byte), the prompt sent as if typed, the reply streamed to the end. Its engine
            runs where the chat runs it: in a process of its own (loaded once more, there), or
            with --engine-in thread in a thread beside the UI, sharing the engine above.
Both use the same prompt at temperature 0, so their tokens must be identical (checked).
--engine-env sets a variable for the chat's engine process only (e.g. OMP_WAIT_POLICY).
--keys adds one more TUI reply (not counted in the rates) while this process types F6/F5
(k up, k down) every 300 ms, and reports how long after each keystroke its action ran.
It reports, per path, the engine-timed rate (tokens / the engine's own seconds, the number
both `generate` and the chat panel show) and the wall rate (tokens / time from sending the
prompt to the last token — on screen, for the TUI), the TUI/generate ratios, and (engine in
a process) the UI process's CPU time over the reply's wall time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PROMPT = "Write a Python function that checks whether a string is a palindrome, with a docstring."
SETTLE_SECONDS = 1.0
KEYS = ("\x1b[15~", "\x1b[17~")  # F5 (k down) after F6 (k up): k stays within one of -k
KEY_INTERVAL = 0.3


class KeepOpen:
    """The engine, with close() left to this script: the app closes its engine on exit."""

    def __init__(self, engine) -> None:
        self._engine = engine

    def __getattr__(self, name):
        return getattr(self._engine, name)

    def close(self) -> None:
        pass


def generate_once(engine, messages, params, control_args) -> dict:
    from spectui.core.events import Control
    from spectui.measure.run import run_reply

    started = time.perf_counter()
    reply = run_reply(engine, messages, params, Control(**control_args))
    wall = time.perf_counter() - started
    stats = reply.stats
    return {"token_ids": reply.token_ids, "tokens": stats.num_tokens, "engine_seconds": stats.seconds,
            "wall_seconds": wall, "gamma": stats.gamma}


def tui_once(engine, config, prompt: str, marker: Path | None = None) -> dict:
    import spectui.tui.screens.chat as chat_module
    from spectui.host.host import EngineHost
    from spectui.host.live import live_from_config
    from spectui.host.messages import EngineReady
    from spectui.host.plan import EnginePlan
    from spectui.tui.app import SpectuiApp
    from spectui.tui.screens.chat import ChatScreen

    record: dict = {"actions": []}

    def send(chat: ChatScreen, text: str) -> None:
        record["sent"] = time.perf_counter()
        record["ui_cpu_start"] = time.process_time()
        chat.turns.send(text)
        if marker is not None:
            marker.write_text("typing")

    class BenchChat(ChatScreen):

        def action_k(self, delta):
            record["actions"].append(time.perf_counter())
            super().action_k(delta)

        def on_reply_ended(self, message):
            super().on_reply_ended(message)
            tracker = self.session.last_reply
            record["shown"] = time.perf_counter()  # the last token has been drawn by now
            record["ui_cpu_seconds"] = time.process_time() - record["ui_cpu_start"]
            stats = tracker.stats()
            record.update(token_ids=[t for step in tracker.steps for t in step.token_ids], tokens=stats.num_tokens,
                          engine_seconds=stats.seconds, gamma=stats.gamma)
            self.app.exit()

    class BenchApp(SpectuiApp):
        def on_mount(self):
            self.host.listen(self.engine_ready)  # before the app attaches the host: it may be ready already
            super().on_mount()

        def engine_ready(self, message):
            if isinstance(message, EngineReady):
                self.set_timer(SETTLE_SECONDS, lambda: send(self.chat_screen, prompt))

    host = EngineHost(EnginePlan(lambda progress: KeepOpen(engine)), live_from_config(config))
    chat_module.ChatScreen = BenchChat  # the app builds its chat screen from this name
    try:
        BenchApp(host, config, None).run()
    finally:
        chat_module.ChatScreen = ChatScreen
    record["wall_seconds"] = record["shown"] - record["sent"]
    return record


def child(args, out: Path) -> None:
    from spectui.settings.config import ChatConfig, engine_options
    from spectui.engines.torch_backend.build import build_embedded_engine
    from spectui.core.events import GenerationParams

    config = ChatConfig(model=args.model, draft=args.draft, method=args.method, k=args.k,
                        temperature=0.0, max_tokens=args.max_tokens)
    from spectui.models.registry import resolve_pair

    models = resolve_pair(config.model, config.draft)
    engine = build_embedded_engine(engine_options(config), models)
    tui_engine = engine
    if args.engine_in == "process":
        import os
        from functools import partial

        for assignment in args.engine_env:
            name, _, value = assignment.partition("=")
            os.environ[name] = value  # this process's torch has started: only the engine's child sees it

        from spectui.engines.process import ProcessEngine

        tui_engine = ProcessEngine(partial(build_embedded_engine, engine_options(config), models))
    messages = [{"role": "user", "content": args.prompt}]
    params = GenerationParams(max_tokens=args.max_tokens, top_p=1.0, seed=0)
    runs: dict[str, list[dict]] = {"generate": [], "tui": [], "keys": []}
    generate_once(engine, messages, params, {"k": args.k, "temperature": 0.0})  # warm-up
    for round_index in range(args.rounds):
        order = ["generate", "tui"] if round_index % 2 == 0 else ["tui", "generate"]
        for path in order:
            if path == "generate":
                runs[path].append(generate_once(engine, messages, params, {"k": args.k, "temperature": 0.0}))
            else:
                runs[path].append(tui_once(tui_engine, config, args.prompt))
    if args.keys:
        runs["keys"].append(tui_once(tui_engine, config, args.prompt, args.marker))
    info = engine.info
    engine.close()
    tui_engine.close()
    out.write_text(json.dumps({"runs": runs, "engine": {"target": info.target, "draft": info.draft,
                                                        "method": info.method, "dtype": info.dtype}}))


def summarize(record: dict, args) -> dict:
    runs = record["runs"]
    reference = runs["generate"][0]["token_ids"]
    identical = all(run["token_ids"] == reference for path in runs for run in runs[path])
    keys = {}
    if runs["keys"]:
        run, writes = runs["keys"][0], record["writes"]
        during = [(a - w) * 1000 for w, a in zip(writes, run["actions"]) if w <= run["shown"]]
        ordered = sorted(during)
        keys = {
            "keys_during_reply": len(during),
            "key_latency_ms_p50": round(ordered[len(ordered) // 2], 1) if ordered else None,
            "key_latency_ms_p95": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 1) if ordered else None,
            "key_latency_ms_max": round(ordered[-1], 1) if ordered else None,
        }
    rate = {}
    for path in ("generate", "tui"):
        path_runs = runs[path]
        rate[path] = {
            "engine_tokens_per_s": statistics.median(r["tokens"] / r["engine_seconds"] for r in path_runs),
            "wall_tokens_per_s": statistics.median(r["tokens"] / r["wall_seconds"] for r in path_runs),
        }
    return {
        **record["engine"],
        "k": args.k,
        "engine_in": args.engine_in,
        "tokens": runs["generate"][0]["tokens"],
        "rounds": args.rounds,
        "identical_tokens": identical,
        "gamma": round(runs["generate"][0]["gamma"] or 0.0, 3),
        **{f"{path}_{name}": round(value, 2) for path in rate for name, value in rate[path].items()},
        "tui_over_generate_engine": round(rate["tui"]["engine_tokens_per_s"] / rate["generate"]["engine_tokens_per_s"], 4),
        "tui_over_generate_wall": round(rate["tui"]["wall_tokens_per_s"] / rate["generate"]["wall_tokens_per_s"], 4),
        **({"ui_cpu_share": round(statistics.median(r["ui_cpu_seconds"] / r["wall_seconds"] for r in runs["tui"]), 4)}
           if args.engine_in == "process" else {}),
        **keys,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model")
    parser.add_argument("--draft")
    parser.add_argument("--method", default="draft")
    parser.add_argument("-k", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--prompt", default=PROMPT)
    parser.add_argument("--engine-in", choices=["process", "thread"], default="process")
    parser.add_argument("--keys", action="store_true")
    parser.add_argument("--engine-env", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--marker", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args, args.child)
        return
    from terminal import print_summary, run_in_terminal

    passed = [arg for arg in sys.argv[1:] if arg != "--json"]
    with tempfile.TemporaryDirectory() as scratch:
        out, marker = Path(scratch) / "record.json", Path(scratch) / "typing"
        writes: list[float] = []

        def type_keys(type_text, running) -> None:
            while running():
                writes.append(time.perf_counter())
                type_text(KEYS[len(writes) % 2])
                time.sleep(KEY_INTERVAL)

        print("loading the engine and running both paths in a terminal (a few minutes)...", file=sys.stderr)
        run_in_terminal([__file__, *passed, "--child", str(out), "--marker", str(marker)], timeout=3600,
                        started=marker if args.keys else None, while_running=type_keys if args.keys else None)
        if not out.exists():
            raise SystemExit("the benchmark child did not finish; run it with --child FILE to see why")
        record = json.loads(out.read_text())
        record["writes"] = writes
        summary = summarize(record, args)
    print_summary(summary, args.json)


if __name__ == "__main__":
    main()
