"""A bench result read back from its JSON, so tables, Markdown and plots can be drawn again
(or from several runs together, e.g. a temperature sweep beside the main run). Stdlib only."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from spectui.bench.measure import BASELINE, ArmResult, Case, CaseResult, best_ks
from spectui.bench.plan import BenchResult
from spectui.bench.runs import Arm, ArmReply, paired_ratio
from spectui.bench.workloads import Workload, suite
from spectui.core import json_text
from spectui.core.errors import UsageError

ARM_NUMBERS = (
    "tokens_per_s", "decode_tokens_per_s", "time_to_first_token", "tokens", "gamma", "tau", "draft_cost",
    "verify_cost", "speedup", "replayed_speedup", "predicted_speedup", "same_tokens_as_baseline", "mean_k",
)


def arm_from_dict(data: dict) -> ArmResult:
    arm = Arm(data["runner"], data["method"], data["k"], bool(data.get("auto")))
    replies = [
        ArmReply(arm, [0] * run["tokens"], run["wall_seconds"], run["time_to_first_token"],
                   finish_reason=run.get("finish_reason", "stop"), first_chunk_tokens=run.get("first_chunk_tokens", 1))
        for run in data.get("runs", [])
    ]
    numbers = {name: data.get(name) for name in ARM_NUMBERS}
    return ArmResult(arm, replies, per_position=list(data.get("per_position", [])), **numbers)


def case_from_dict(data: dict, workloads: dict[str, Workload]) -> CaseResult:
    known = workloads.get(data["workload"])
    workload = known or Workload(data["category"], data["workload"], (), data["temperature"], data["max_tokens"], 0)
    workload = replace(workload, max_tokens=data["max_tokens"])
    arms = [arm_from_dict(arm) for arm in data["arms"]]
    base = next((result for result in arms if result.arm == BASELINE), None)
    if base is None or not base.replies:
        best = {method: dict(value) for method, value in data.get("best_k", {}).items()}
        return CaseResult(Case(workload, data["temperature"]), arms, best)
    for result in arms:
        # from the rounds, as a run works them out now (files before 2026-12-02 kept a ratio of medians)
        result.speedup = paired_ratio(result.replies, base.replies) or result.speedup
    return CaseResult(Case(workload, data["temperature"]), arms, best_ks(arms))


def result_from_dict(data: dict) -> BenchResult:
    workloads = {workload.name: workload for workload in suite("full")}
    return BenchResult(
        settings=dict(data["settings"]), machine=dict(data.get("machine", {})), seconds=float(data.get("seconds", 0.0)),
        cases=[case_from_dict(case, workloads) for case in data["cases"]],
    )


def load_results(paths: Sequence[Path]) -> BenchResult:
    """One result from one or more JSON files: the first file's settings, every file's cases."""
    results = []
    for path in paths:
        try:
            results.append(result_from_dict(json_text.loads(Path(path).read_text())))
        except OSError as error:
            raise UsageError(f"--report {path}: {error.strerror or error}") from None
        except (ValueError, KeyError, TypeError) as error:
            raise UsageError(f"--report {path}: not a spectui bench JSON ({type(error).__name__}: {error})") from None
    merged = results[0]
    for more in results[1:]:
        merged.cases.extend(more.cases)
        merged.seconds += more.seconds
    return merged


def command_from_settings(settings: dict) -> str:
    """The `spectui bench` line that runs with these settings again."""
    parts = ["spectui bench", f"--suite {settings.get('suite', 'quick')}"]
    parts.append(f"--engines {','.join(settings.get('runners', ['spectui']))}")
    parts.append(f"--methods {','.join(settings.get('methods', ['draft']))}")
    if settings.get("vllm_methods") not in (None, settings.get("methods")):
        parts.append(f"--vllm-methods {','.join(settings['vllm_methods'])}")
    ks = [str(k) for k in settings.get("ks", [])] + (["auto"] if settings.get("auto") else [])
    parts.append(f"--k {','.join(ks)}")
    if settings.get("anchor_k") not in (None, 4):
        parts.append(f"--anchor-k {settings['anchor_k']}")
    if settings.get("temperatures"):
        parts.append(f"--temperatures {','.join(f'{t:g}' for t in settings['temperatures'])}")
    if settings.get("max_tokens") is not None:
        parts.append(f"--max-tokens {settings['max_tokens']}")
    parts.append(f"--repeats {settings.get('repeats', 2)}")
    return " ".join(parts)
