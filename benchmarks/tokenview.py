"""Token view benchmark: a synthetic 5,000 tokens/s stream and key latency during it.

    python benchmarks/tokenview.py [--rate 5000] [--tokens 20000] [--engine-in thread|process]
        [--headless] [--json]

By default the app runs in a real pseudo-terminal (the Linux driver, output drained by
this process) and this process types F6/F5 (k up/down) every 150 ms while the reply
streams. The app records when each key's action ran; CLOCK_MONOTONIC is shared by both
processes, so latency = action time − write time. --engine-in process runs the scripted
engine in a process of its own, as the chat runs the embedded engine; then "produced" is
when a step arrived from that process. --headless runs it in-process with
Textual's headless driver instead (no terminal output is produced there).

It reports: the rate the engine produced and the rate the view showed, the largest
backlog (tokens produced but not yet drawn), the lag between the engine's last token
and the view showing it, frame (flush) times, and key latencies (p50/p95/max).
A benchmark, not a test: the numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

KEYS = {"f6": "\x1b[17~", "f5": "\x1b[15~"}
KEY_INTERVAL = 0.15
SETTLE_SECONDS = 1.0


def instrumented_app(rate: float, tokens: int, record: dict, started_marker: Path | None, engine_in: str = "thread"):
    """A SpectuiApp whose engine, frame flush and k action write timestamps into `record`."""
    from functools import partial

    from spectui.engines.scripted import SCRIPT, build_scripted_engine
    from spectui.host.host import EngineHost
    from spectui.host.live import live_from_config
    from spectui.host.messages import EngineReady
    from spectui.host.plan import EnginePlan
    from spectui.settings.config import ChatConfig
    from spectui.tui.app import SpectuiApp
    from spectui.tui.chat.replies import Replies
    from spectui.tui.screens.chat import ChatScreen

    build = partial(build_scripted_engine, alpha=0.8, tokens_per_s=rate,
                    script=(SCRIPT + "\n\n") * (tokens // 100 + 1), echo_prompt=False)
    if engine_in == "process":
        from spectui.engines.process import ProcessEngine

        engine = ProcessEngine(build)
    else:
        engine = build()
    produced: list[tuple[float, int]] = record.setdefault("produced", [])
    inner_stream = engine.stream

    def stream(messages, params, control):
        total = 0
        for event in inner_stream(messages, params, control):
            if hasattr(event, "token_ids"):
                total += len(event.token_ids)
                produced.append((time.perf_counter(), total))
            yield event

    engine.stream = stream
    flushes: list[tuple[float, float, int]] = record.setdefault("flushes", [])
    actions: list[float] = record.setdefault("actions", [])
    original_flush, original_k, original_end = Replies.flush, ChatScreen.action_k, ChatScreen.on_reply_ended

    def flush(self):
        start = time.perf_counter()
        original_flush(self)
        if self.streams.current is not None:
            flushes.append((start, time.perf_counter() - start, self.streams.current.tracker.clock.num_tokens))

    def action_k(self, delta):
        actions.append(time.perf_counter())
        original_k(self, delta)

    def on_reply_ended(self, message):
        original_end(self, message)
        record["shown_all"] = time.perf_counter()
        record["cpu_end"] = time.process_time()
        record["ui_cpu_end"] = time.thread_time()
        record["shown_tokens"] = self.session.last_reply.stats().num_tokens if self.session.last_reply else 0
        self.app.exit()

    Replies.flush, ChatScreen.action_k, ChatScreen.on_reply_ended = flush, action_k, on_reply_ended

    class BenchApp(SpectuiApp):
        def on_mount(self):
            self.host.listen(self.engine_ready)  # before the app attaches the host: it may be ready already
            super().on_mount()

        def engine_ready(self, message):
            # The scripted engine is ready at once; a real one takes a minute, by which
            # time the app's start-up work (first layout, footer, styles) is long done.
            if isinstance(message, EngineReady):
                self.set_timer(SETTLE_SECONDS, self.start_stream)

        def start_stream(self):
            record["stream_start"] = time.perf_counter()
            record["cpu_start"] = time.process_time()
            record["ui_cpu_start"] = time.thread_time()
            if started_marker is not None:
                started_marker.write_text("go")
            self.chat_screen.turns.send("stream please")

    config = ChatConfig(k=4, max_tokens=tokens, ghosts=False)
    host = EngineHost(EnginePlan(lambda progress: engine), live_from_config(config))
    return BenchApp(host, config, None, cursor_blink=False)


def child(out: Path, rate: float, tokens: int, marker: Path, engine_in: str) -> None:
    record: dict = {}
    app = instrumented_app(rate, tokens, record, marker, engine_in)
    app.run()
    out.write_text(json.dumps(record))


def run_in_pty(rate: float, tokens: int, engine_in: str, size=(120, 40)) -> dict:
    from terminal import run_in_terminal

    with tempfile.TemporaryDirectory() as scratch:
        out, marker = Path(scratch) / "record.json", Path(scratch) / "started"
        writes: list[float] = []

        def type_keys(type_text, running) -> None:
            time.sleep(0.3)  # let the stream get going
            while running():
                key = KEYS["f6"] if len(writes) % 2 == 0 else KEYS["f5"]
                writes.append(time.perf_counter())
                type_text(key)
                time.sleep(KEY_INTERVAL)

        terminal_bytes = run_in_terminal(
            [__file__, "--child", str(out), "--rate", str(rate), "--tokens", str(tokens), "--marker", str(marker),
             "--engine-in", engine_in],
            size=size, timeout=180, started=marker, while_running=type_keys,
        )
        if not out.exists():
            raise SystemExit("the app did not write its record (see --headless)")
        record = json.loads(out.read_text())
        record["writes"] = writes
        record["terminal_bytes"] = terminal_bytes
        return record


def run_headless(rate: float, tokens: int, engine_in: str, size=(120, 40)) -> dict:
    import asyncio

    record: dict = {}
    app = instrumented_app(rate, tokens, record, None, engine_in)
    writes: list[float] = []

    async def drive() -> None:
        async with app.run_test(size=size, headless=True) as pilot:
            from textual import events

            while "stream_start" not in record:
                await pilot.pause(0.01)
            await asyncio.sleep(0.3)
            while "shown_all" not in record:
                key = "f6" if len(writes) % 2 == 0 else "f5"
                writes.append(time.perf_counter())
                app.post_message(events.Key(key, None))
                await asyncio.sleep(KEY_INTERVAL)

    asyncio.run(drive())
    record["writes"] = writes
    return record


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def summarize(record: dict, rate: float) -> dict:
    produced = record["produced"]
    flushes = record["flushes"]
    start = record["stream_start"]
    end_produced = produced[-1][0]
    total = produced[-1][1]
    # Backlog at each frame: tokens the engine had produced by then minus tokens shown.
    backlog = []
    index = 0
    for frame_start, duration, shown in flushes:
        while index + 1 < len(produced) and produced[index + 1][0] <= frame_start + duration:
            index += 1
        backlog.append(max(0, produced[index][1] - shown))
    stream_seconds = end_produced - start
    writes, actions = record["writes"], record["actions"]
    latencies = [(a - w) * 1000 for w, a in zip(writes, actions)]
    during = [lat for w, lat in zip(writes, latencies) if w <= end_produced]
    frame_ms = [d * 1000 for _, d, _ in flushes]
    return {
        "target_tokens_per_s": rate,
        "tokens": total,
        "engine_tokens_per_s": round(total / stream_seconds, 1),
        "shown_tokens": record.get("shown_tokens"),
        "frames": len(flushes),
        "frames_per_s": round(len(flushes) / stream_seconds, 1),
        "frame_ms_p50": round(percentile(frame_ms, 0.5), 2),
        "frame_ms_p95": round(percentile(frame_ms, 0.95), 2),
        "frame_ms_max": round(max(frame_ms), 2),
        "backlog_tokens_max": max(backlog) if backlog else 0,
        "backlog_ms_max_at_rate": round(1000 * (max(backlog) if backlog else 0) / rate, 1),
        "end_lag_ms": round((record["shown_all"] - end_produced) * 1000, 1),
        "keys_sent": len(writes),
        "keys_handled": len(actions),
        "keys_during_stream": len(during),
        "key_latency_ms_p50": round(percentile(during, 0.5), 2),
        "key_latency_ms_p95": round(percentile(during, 0.95), 2),
        "key_latency_ms_max": round(max(during), 2) if during else None,
        "terminal_bytes": record.get("terminal_bytes"),
        # CPU seconds the app process used per wall second of streaming (both threads):
        # well under 1 means the machine, not the app, was the limit.
        "ui_thread_cpu_s": round(record["ui_cpu_end"] - record["ui_cpu_start"], 3),
        "process_cpu_per_wall_s": round(
            (record["cpu_end"] - record["cpu_start"]) / (record["shown_all"] - start), 2
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=5000.0)
    parser.add_argument("--tokens", type=int, default=20000)
    parser.add_argument("--engine-in", choices=["thread", "process"], default="thread")
    parser.add_argument("--headless", action="store_true")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--marker", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.rate, args.tokens, args.marker, args.engine_in)
        return
    from terminal import print_summary

    run = run_headless if args.headless else run_in_pty
    record = run(args.rate, args.tokens, args.engine_in)
    summary = summarize(record, args.rate)
    summary["driver"] = "headless" if args.headless else "pty (Linux driver)"
    summary["engine_in"] = args.engine_in
    print_summary(summary, args.json)


if __name__ == "__main__":
    main()
