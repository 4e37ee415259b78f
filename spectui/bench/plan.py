"""What a bench run runs (arms × cases) and the run itself, with progress. Stdlib only."""

from __future__ import annotations

import platform
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from spectui.bench.anchors.llamacpp import llamacpp_arms
from spectui.bench.measure import BASELINE, Case, CaseResult, Runner, run_case
from spectui.bench.runs import Arm, ArmReply
from spectui.bench.workloads import Workload
from spectui.settings.options import AUTO_START_K

RUNNERS = ("spectui", "transformers", "vllm", "llamacpp")
# medusa and eagle run from heads trained here (bench --heads); no anchor has them.
METHODS = ("draft", "ngram", "suffix", "medusa", "eagle")
# The anchor's method for each spectui method that has one, at the same k.
TRANSFORMERS_METHOD = {"draft": "assisted", "ngram": "prompt-lookup"}
VLLM_METHODS = ("draft", "ngram")


@dataclass(frozen=True)
class BenchOptions:
    """What `spectui bench` runs and where it writes, checked once
    (spectui.cli.bench.check_bench_options): all but the engine's options and the models."""

    suite: str
    runners: list[str]  # spectui first: every ratio divides by its k = 0
    methods: list[str]
    ks: list[int]  # spectui's fixed k (0: the baseline)
    auto: bool  # --k had "auto": each method with adaptive k too
    anchor_k: int  # the anchors' speculative arms' k
    repeats: int
    temperatures: list[float] | None = None  # None: each workload's own
    max_tokens: int | None = None  # None: each workload's own
    categories: list[str] | None = None  # None: every category of the suite
    vllm_methods: list[str] | None = None  # None: those of `methods` vLLM runs (default_vllm_methods)
    heads: dict[str, Path] | None = None  # medusa / eagle: the folder of its trained heads
    contended: bool = False  # every case beside one busy process
    json_path: Path | None = None
    plots_dir: Path | None = None
    markdown_path: Path | None = None
    force: bool = False  # --force: replace existing --json, --markdown and plot files


def plan_arms(
    runners: Sequence[str], methods: Sequence[str], ks: Sequence[int], anchor_k: int, auto: bool = False,
    vllm_methods: Sequence[str] | None = None,
) -> list[Arm]:
    """spectui's k = 0 baseline and each method at each k > 0 (and with adaptive k); each
    anchor plain and with the same speculation at anchor_k."""
    arms = [BASELINE]
    arms += [Arm("spectui", method, k) for method in methods for k in ks if k > 0]
    if auto:
        arms += [Arm("spectui", method, AUTO_START_K, auto=True) for method in methods]
    if "transformers" in runners:
        arms.append(Arm("transformers", "none", 0))
        arms += [Arm("transformers", TRANSFORMERS_METHOD[method], anchor_k) for method in methods if method in TRANSFORMERS_METHOD]
    if "vllm" in runners:
        arms.append(Arm("vllm", "none", 0))
        arms += [Arm("vllm", method, anchor_k) for method in (default_vllm_methods(methods) if vllm_methods is None else vllm_methods)]
    arms += llamacpp_arms(runners, methods, anchor_k)
    return arms


def default_vllm_methods(methods: Sequence[str]) -> list[str]:
    """vLLM runs a method with the same weights as spectui: not heads trained for the embedded engine."""
    return [method for method in methods if method in VLLM_METHODS]


def plan_cases(workloads: Sequence[Workload], temperatures: Sequence[float] | None) -> list[Case]:
    """Each workload at its own temperature, or at each of `temperatures` when given."""
    return [
        Case(workload, temperature)
        for workload in workloads
        for temperature in (temperatures if temperatures else [workload.temperature])
    ]


def cpu_model() -> str | None:
    """The CPU's name (platform.processor() says only x86_64 on Linux): runs on different
    VMs differ by 2-3x in speed, so a summary must say which it ran on."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def machine() -> dict:
    info = {"platform": platform.platform(), "python": platform.python_version(), "cpus": os.cpu_count(),
            "processor": cpu_model() or platform.processor() or platform.machine()}
    try:
        import torch

        info["torch"] = torch.__version__
        info["torch_threads"] = torch.get_num_threads()
        if torch.cuda.is_available():
            info["gpu"] = torch.cuda.get_device_name(0)
    except ImportError:
        pass
    return info


@dataclass
class BenchResult:
    settings: dict
    cases: list[CaseResult] = field(default_factory=list)
    machine: dict = field(default_factory=dict)
    seconds: float = 0.0

    def as_dict(self) -> dict:
        return {"settings": self.settings, "machine": self.machine, "seconds": self.seconds,
                "cases": [case.as_dict() for case in self.cases]}


def run_bench(
    cases: Sequence[Case],
    arms: Sequence[Arm],
    runners: dict[str, Runner],
    repeats: int,
    settings: dict,
    on_reply: Callable[[Case, ArmReply], None] = lambda case, reply: None,
    clock: Callable[[], float] = time.monotonic,
    on_case: Callable[[BenchResult], None] = lambda result: None,
) -> BenchResult:
    """on_case(result so far) after every case: an hour's run that stops early keeps what it measured."""
    started = clock()
    result = BenchResult(settings={**settings, "repeats": repeats, "arms": [arm.label for arm in arms]},
                         machine=machine())
    for case in cases:
        result.cases.append(run_case(case, arms, runners, repeats, lambda reply, case=case: on_reply(case, reply)))
        result.seconds = clock() - started
        on_case(result)
    return result
