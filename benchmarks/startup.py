"""Start-up of the chat's engine: first start, warm start and cold-page-cache start to "ready".

    python benchmarks/startup.py [--pairs default,smollm2] [--scenarios first,warm,cold]
        [--src PATH] [--cache-dir DIR] [--seed-gguf DIR] [--out benchmarks/reports/startup.md]

"Ready" is what `spectui chat` shows as ready: each run is a fresh Python process that builds
the engine as the chat does (spectui.cli.chat.engine_factory_for: the embedded engine in a
child process of its own) and the time counted runs from launching that process until the
engine is built; "answers" adds one short greedy reply's first token. Also measured: the
engine process's peak RSS (VmHWM: loading) and its RSS after the reply, and the size on disk of
the pair's folders in the cache (models/<alias>).

Scenarios, per pair:
- first: an empty cache (a fresh folder under --work-dir): download, assemble, convert, load.
  --seed-gguf DIR copies GGUFs found there (DIR/<alias>/*.gguf, as the cache keeps them) into
  the fresh cache first, leaving out the download.
- warm: models cached, page cache warm (one untimed start first).
- cold: models cached, `sync; echo 3 > /proc/sys/vm/drop_caches` before the start (needs root).

Another source tree (an older checkout, for a before/after table): --src /path/to/checkout.
Only APIs that checkout c90e1dd already had are used (engine_factory_for, ChatConfig,
ProcessEngine). Give each tree its own --cache-dir: a newer spectui rebuilds an older cache
in its own format (for warm and cold, that folder must already hold that tree's conversion:
run "first" once, or point at a cache that tree wrote). Every run prints its own JSON line
too, so a partial run is not lost.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PAIRS = {
    "default": {"model": "qwen2.5-coder-1.5b", "draft": "qwen2.5-coder-0.5b", "method": "draft"},
    "target": {"model": "qwen2.5-coder-1.5b"},  # --method auto: on a CPU suffix, no draft model to load
    "smollm2": {"model": "smollm2-135m", "method": "ngram"},
}
SCENARIOS = ("first", "warm", "cold")
PROMPT = "Say hello in five words."
DECODE_PROMPT = "Count from one to forty in words, one per line."

# Runs in the measured process, with the source tree under test first on sys.path.
DRIVER = r"""
import json, sys, time
launched = float(sys.argv[1])
settings = json.loads(sys.argv[2])
sys.path.insert(0, sys.argv[3])  # the tree under test, whatever the current folder holds
try:  # this tree's layout, else an older checkout's (5e12364 and before)
    from spectui.settings.config import ChatConfig
    from spectui.host.plan import engine_factory_for
    from spectui.core.events import Control, GenerationParams, Step
except ImportError:
    from spectui.config import ChatConfig
    from spectui.cli.chat import engine_factory_for
    from spectui.events import Control, GenerationParams, Step

stages = []
def progress(stage, done, total):
    if not stages or stages[-1][0] != stage:
        stages.append([stage, round(time.time() - launched, 2)])

config = ChatConfig().with_overrides(**settings)
try:  # names resolved once, where the command reads them (after 27f6c2e)
    from spectui.engines.factory import models_to_run
    build = engine_factory_for(config, models_to_run(config.engine, config.model, config.draft))
except ImportError:
    build = engine_factory_for(config)
engine = build(progress)
ready = time.time()
first_token = None
for event in engine.stream([{"role": "user", "content": PROMPT}], GenerationParams(max_tokens=8),
                           Control(k=4, temperature=0.0)):
    if isinstance(event, Step) and first_token is None:
        first_token = time.time()
# Plain decoding's speed, after the first token: what a slowdown of the kernels shows in.
decode_tok_s, started, tokens = None, None, 0
for event in engine.stream([{"role": "user", "content": DECODE_PROMPT}], GenerationParams(max_tokens=49),
                           Control(k=0, temperature=0.0)):
    if isinstance(event, Step):
        if started is None:
            started = time.time()
        else:
            tokens += len(event.token_ids)
if started is not None and tokens:
    decode_tok_s = tokens / (time.time() - started)
process = getattr(engine, "_process", None)
memory = {}
if process is not None:
    for line in open(f"/proc/{process.pid}/status"):
        key, _, value = line.partition(":")
        if key in ("VmHWM", "VmRSS"):
            memory[key] = int(value.split()[0]) * 1024
engine.close()
import spectui
print("STARTUP " + json.dumps({"spectui": spectui.__file__, "ready_s": ready - launched, "first_token_s": (first_token or time.time()) - launched,
                               "decode_tok_s": decode_tok_s, "backend": getattr(engine.info, "backend", ""),
                               "peak_rss": memory.get("VmHWM"), "rss_after_reply": memory.get("VmRSS"),
                               "stages": stages}))
""".replace("DECODE_PROMPT", repr(DECODE_PROMPT)).replace("PROMPT", repr(PROMPT))


def run_once(src: Path, cache: Path, config_dir: Path, settings: dict, timeout_s: float) -> dict:
    env = dict(os.environ, PYTHONPATH=str(src), SPECTUI_CACHE_DIR=str(cache), SPECTUI_CONFIG_DIR=str(config_dir),
               SPECTUI_ENGINE_PROCESS="1")
    launched = time.time()
    # Run from the cache's folder: `python -c` puts the current folder first on sys.path, and a
    # spectui/ there (this checkout) would be imported instead of the tree under test.
    result = subprocess.run([sys.executable, "-c", DRIVER, repr(launched), json.dumps(settings), str(src)], env=env,
                            capture_output=True, text=True, timeout=timeout_s, cwd=cache)
    for line in result.stdout.splitlines():
        if line.startswith("STARTUP "):
            run = json.loads(line.removeprefix("STARTUP "))
            if not Path(run["spectui"]).resolve().is_relative_to(src.resolve()):
                raise RuntimeError(f"measured the spectui in {run['spectui']}, not the one in {src}")
            return run
    tail = (result.stderr or result.stdout).strip().splitlines()[-3:]
    raise RuntimeError(f"the run failed (exit {result.returncode}): {' | '.join(tail)}")


def drop_page_cache() -> None:
    subprocess.run(["sync"], check=True)
    Path("/proc/sys/vm/drop_caches").write_text("3\n")


def tree_size(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file()) if folder.is_dir() else 0


def seed_ggufs(seed: Path, cache: Path, settings: dict) -> None:
    for alias in (settings.get("model"), settings.get("draft")):
        if alias and (seed / alias).is_dir():
            target = cache / "gguf" / alias
            target.mkdir(parents=True, exist_ok=True)
            for gguf in (seed / alias).glob("*.gguf"):
                shutil.copy2(gguf, target / gguf.name)


def gib(value: int | None) -> str:
    return f"{value / 2**30:.2f} GiB" if value else "?"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", default="default,smollm2", help=f"comma-separated, from {', '.join(PAIRS)}")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--src", type=Path, default=Path(__file__).resolve().parents[1],
                        help="the spectui source tree to measure (default: this checkout)")
    parser.add_argument("--cache-dir", type=Path, default=None,
                        help="cache for warm/cold runs (default: the one the first start filled)")
    parser.add_argument("--work-dir", type=Path, default=None, help="where fresh caches go (default: a temp dir)")
    parser.add_argument("--seed-gguf", type=Path, default=None, help="GGUFs to copy into a fresh cache (no download)")
    parser.add_argument("--repeats", type=int, default=1, help="timed runs per warm/cold scenario (median shown)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds one run may take")
    parser.add_argument("--backend", default=None, help="the embedded engine's --backend (auto, ggml, torch); "
                        "left out: the tree's default (an older tree has no such setting)")
    parser.add_argument("--out", type=Path, default=None, help="Markdown file to write (default: print it)")
    args = parser.parse_args()
    args.src = args.src.resolve()
    pairs = [name.strip() for name in args.pairs.split(",") if name.strip()]
    scenarios = [name.strip() for name in args.scenarios.split(",") if name.strip()]
    unknown = [p for p in pairs if p not in PAIRS] + [s for s in scenarios if s not in SCENARIOS]
    if unknown:
        parser.error(f"unknown: {', '.join(unknown)}")

    work = args.work_dir or Path(tempfile.mkdtemp(prefix="spectui-startup-"))
    config_dir = work / "config"  # empty: the defaults, whatever the user's config says
    config_dir.mkdir(parents=True, exist_ok=True)
    command = "python " + " ".join(shlex.quote(part) for part in [sys.argv[0], *sys.argv[1:]])
    revision = subprocess.run(["git", "-C", str(args.src), "log", "-1", "--format=%h %s"], capture_output=True,
                              text=True).stdout.strip()
    rows = []
    for pair in pairs:
        settings = dict(PAIRS[pair], **({"backend": args.backend} if args.backend else {}))
        cache = args.cache_dir or work / f"cache-{pair}"
        for scenario in scenarios:
            runs = []
            if scenario == "first":
                fresh = work / f"cache-{pair}" if args.cache_dir is None else work / f"first-{pair}"
                shutil.rmtree(fresh, ignore_errors=True)
                fresh.mkdir(parents=True)
                if args.seed_gguf:
                    seed_ggufs(args.seed_gguf, fresh, settings)
                runs.append(run_once(args.src, fresh, config_dir, settings, args.timeout))
                disk_from = fresh
            else:
                if scenario == "warm":
                    run_once(args.src, cache, config_dir, settings, args.timeout)  # warms the page cache
                for _ in range(max(1, args.repeats)):
                    if scenario == "cold":
                        drop_page_cache()
                    runs.append(run_once(args.src, cache, config_dir, settings, args.timeout))
                disk_from = cache
            for run in runs:
                print(json.dumps({"pair": pair, "scenario": scenario, **run}), flush=True)
            chosen = sorted(runs, key=lambda run: run["ready_s"])[len(runs) // 2]
            aliases = [alias for alias in (settings.get("model"), settings.get("draft")) if alias]
            # the int8 store (models/), the GGUFs ggml maps (gguf/), their tokenizers
            disk = sum(tree_size(disk_from / folder / alias) for alias in aliases for folder in ("models", "gguf"))
            disk += tree_size(disk_from / "tokenizers")
            rows.append((pair, scenario, chosen, disk, len(runs)))

    lines = [
        "# spectui start-up: to ready, disk and memory",
        "",
        f"Command: `{command}`",
        "",
        f"Source: `{args.src}` ({revision or 'not a git checkout'}); machine: {os.cpu_count()} CPUs; "
        f"{time.strftime('%Y-%m-%d %H:%M')}. \"ready\": the engine built as `spectui chat` builds it (own process); "
        "\"first token\": one short greedy reply's first step. RSS: the engine process.",
        "",
        "| pair | backend | start | ready | first token | plain decode | engine peak RSS (loading) | engine RSS after a reply | the pair's cache folders | runs |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for pair, scenario, run, disk, count in rows:
        decode = f"{run['decode_tok_s']:.1f} tok/s" if run.get("decode_tok_s") else "?"
        lines.append(f"| {pair} | {run.get('backend') or 'torch'} | {scenario} | {run['ready_s']:.1f} s | {run['first_token_s']:.1f} s | {decode} | "
                     f"{gib(run['peak_rss'])} | {gib(run['rss_after_reply'])} | {disk / 1e9:.2f} GB | {count} |")
    lines += ["", "Stages (seconds from launch at which each began), per row:", ""]
    for pair, scenario, run, _disk, _count in rows:
        stages = ", ".join(f"{stage} {at:.1f}" for stage, at in run["stages"]) or "none reported"
        lines.append(f"- {pair} {scenario}: {stages}")
    text = "\n".join(lines) + "\n"
    if args.out:
        args.out.write_text(text)
        print(f"wrote {args.out}")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
