"""The bar follows a vLLM engine start through the stages its log shows."""

from __future__ import annotations

import pytest

from spectui.core.errors import UsageError
from spectui.engines.vllm.build import StartStages, started_vllm

EARLIER_START = "INFO vllm.v1.engine.core: Initializing a V1 LLM engine (v0.32.0) with config: model='old'\n"
START = [
    "INFO vllm.config.model: Resolved architecture: LlamaForCausalLM\n",
    "INFO vllm.v1.engine.core: Initializing a V1 LLM engine (v0.32.0) with config: model='x'\n",
    "INFO vllm.v1.worker.cpu_model_runner: Starting to load model x...\n",
    "INFO vllm.model_executor.model_loader.default_loader: Loading weights took 0.29 seconds\n",
    "INFO vllm.v1.worker.cpu_model_runner: Loading drafter model...\n",
    "INFO vllm.v1.core.kv_cache_utils: CPU KV cache size: 46,592 tokens\n",
    "INFO vllm.v1.worker.cpu_model_runner: Warming up model for the compilation...\n",
    "INFO vllm.v1.engine.core: init engine (profile, create kv cache, warmup model) took 0.42 s\n",
]


def test_each_stage_begins_and_ends_in_order_reading_only_this_start(tmp_path):
    log = tmp_path / "engine.log"
    log.write_text(EARLIER_START)
    seen = []
    stages = StartStages(log, log.stat().st_size, lambda *event: seen.append(event))
    with log.open("a") as handle:
        handle.writelines(START[:3])
        handle.write("INFO vllm.model_executor.model_loader.default_loader: Loading wei")  # half a line
        handle.flush()
        stages.poll()
        assert seen == [("vLLM engine", 0, 1), ("vLLM engine", 1, 1), ("vLLM weights", 0, 1)]
        handle.write("ghts took 0.29 seconds\n")
        handle.writelines(START[4:])
    stages.poll()
    stages._begin(None)  # what leaving the `with` does once the engine is up
    assert seen[3:] == [
        ("vLLM weights", 1, 1), ("vLLM draft weights", 0, 1),
        ("vLLM draft weights", 1, 1), ("vLLM KV cache", 0, 1),
        ("vLLM KV cache", 1, 1), ("vLLM warm-up", 0, 1),
        ("vLLM warm-up", 1, 1),
    ]


def test_a_start_that_logs_nothing_reports_nothing(tmp_path):
    seen = []
    with StartStages(tmp_path / "missing.log", 0, lambda *event: seen.append(event), poll_s=0.01):
        pass
    assert seen == []


def test_a_start_is_reported_and_a_failed_one_is_one_line_with_this_starts_logged_cause(tmp_path):
    log = tmp_path / "vllm.log"
    log.write_text("ValueError: an earlier start's cause\n")
    said = []
    assert started_vllm(lambda: "the engine", log, lambda *stage: said.append(stage)) == "the engine"
    assert said == [("starting vLLM", 0, 1), ("starting vLLM", 1, 1)]

    def start():
        with log.open("a") as file:
            file.write("Initializing a V1 LLM engine\nValueError: no room for the KV cache\n")
        raise RuntimeError("Engine core initialization failed\nsee above")

    with pytest.raises(UsageError) as failed:
        started_vllm(start, log, lambda *stage: None)
    assert str(failed.value) == f"vLLM did not start: ValueError: no room for the KV cache (log: {log})"
