"""What a hostile or broken server (or a hostile option) can send, and what spectui makes of
it: one line that ends the reply (or the command), never a traceback, a hang or a heap spent.
Fake OpenAI-compatible servers on loopback (tests/fake_openai_server.py); issue 42, section 1.
"""

from __future__ import annotations

import json
import threading
import time

import pytest
from typer.testing import CliRunner

from fake_openai_server import FakeOpenAI, fake_server
from spectui.cli.app import app as cli
from spectui.core import json_text
from spectui.core.errors import ModelError, UsageError
from spectui.core.events import Control, GenerationParams
from spectui.engines.server.engine import ServerEngine
from spectui.measure.run import run_reply

PROMPT = [{"role": "user", "content": "hi"}]
NESTED = '{"a":' * 3000  # unclosed, as a probe sends it
NESTED_CLOSED = '{"a":' * 3000 + "1" + "}" * 3000


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


def one_line_error(result) -> str:
    """The error a command printed: one line, no traceback."""
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) >= 1
    return " ".join(result.stderr.split())


# --- JSON nested without end ----------------------------------------------------------------


@pytest.mark.parametrize("text", [NESTED, NESTED_CLOSED, "[" * 5000 + "]" * 5000], ids=["open", "closed", "lists"])
def test_json_from_outside_has_a_depth_limit(text):
    with pytest.raises(json.JSONDecodeError, match="nested"):
        json_text.loads(text)


def test_json_depth_counts_brackets_outside_strings_only():
    text = json.dumps({"text": "[" * 5000, "ids": [[1, 2], [3]]})
    assert json_text.loads(text)["ids"] == [[1, 2], [3]]
    assert json_text.loads("[" * 100 + "]" * 100) is not None  # the limit itself is fine


@pytest.mark.parametrize("literal", ["1e400", "-1e400", "Infinity", "NaN"])
def test_json_finite_refuses_numbers_that_are_not(literal):
    with pytest.raises(json.JSONDecodeError, match="finite"):
        json_text.loads(f'{{"num_speculative_tokens": {literal}}}', finite=True)


def test_a_nested_stream_chunk_ends_the_reply_in_one_line():
    with fake_server(FakeOpenAI(events=[NESTED_CLOSED])) as url:
        reply = run_reply(ServerEngine(url), PROMPT, GenerationParams(max_tokens=16), Control(k=0))
    assert reply.done.finish_reason == "error"
    assert "not JSON" in reply.done.error and "\n" not in reply.done.error


def test_a_nested_model_list_is_one_line():
    with fake_server(FakeOpenAI(models_body=NESTED)) as url:
        with pytest.raises(UsageError, match="not JSON"):
            ServerEngine(url)
        result = invoke("generate", "hi", "--engine", "server", "--server", url)
    assert result.exit_code == 2
    assert "not JSON" in one_line_error(result)


def test_compare_with_a_nested_baseline_server_is_one_line():
    with fake_server() as url, fake_server(FakeOpenAI(models_body=NESTED)) as baseline:
        result = invoke("compare", "hi", "--table", "--engine", "server", "--server", url, "--baseline-server", baseline)
    assert result.exit_code == 2
    assert "not JSON" in one_line_error(result)


@pytest.mark.parametrize("command", [("generate", "hi"), ("serve", "--print")])
def test_a_nested_speculative_config_is_one_line(command):
    result = invoke(*command, "--engine", "vllm", "--speculative-config", NESTED)
    if command[0] == "serve":
        result = invoke(*command, "--speculative-config", NESTED)
    assert result.exit_code == 2
    assert "--speculative-config is not JSON: nested" in one_line_error(result)


def test_serve_print_refuses_a_number_that_is_not_finite():
    result = invoke("serve", "--print", "--speculative-config", '{"method": "ngram", "num_speculative_tokens": 1e400}')
    assert result.exit_code == 2
    assert "Infinity" not in result.stdout
    assert "1e400 is not a finite number" in one_line_error(result)


def test_a_nested_heads_json_is_a_model_error(tmp_path):
    from spectui.heads.store import CONFIG_FILE, read_config

    (tmp_path / CONFIG_FILE).write_text(NESTED_CLOSED)
    with pytest.raises(ModelError, match="nested"):
        read_config(tmp_path)


# --- numbers past what the request allows -----------------------------------------------------


def plain_reply(fake: FakeOpenAI, max_tokens: int = 64):
    with fake_server(fake) as url:
        return run_reply(ServerEngine(url), PROMPT, GenerationParams(max_tokens=max_tokens), Control(k=0))


@pytest.mark.parametrize("flavour", ["llama", "lmstudio"])
def test_huge_draft_counts_end_the_reply_in_one_line(flavour):
    reply = plain_reply(FakeOpenAI(reply="one two three", draft_counts=flavour, counts=(10**11, 1)))
    assert reply.done.finish_reason == "error"
    assert "100000000000 drafted tokens" in reply.done.error and "protocol error" in reply.done.error
    assert reply.stats.num_drafted < 100  # what the screen and --json count stays small


def test_draft_counts_too_many_for_one_forward_stay_approximate():
    # Within the request's bound, but more drafts a forward than any k: not spread as steps.
    reply = plain_reply(FakeOpenAI(reply="one two three", draft_counts="llama", counts=(500, 1)))
    assert reply.done.finish_reason == "stop" and reply.done.approximate
    assert max(step.num_drafted for step in reply.steps) <= 16


def vllm_record(per_step_accepted, per_step_drafted) -> dict:
    record = {"num_spec_tokens": 4, "per_step_accepted": per_step_accepted, "per_step_drafted": per_step_drafted}
    return {"metrics": {"speculative_decoding": record}}


@pytest.mark.parametrize(
    ("accepted", "drafted", "named"),
    [
        ([0, 0], [10**11, 4], "100000000000 drafted tokens"),
        ([5, 0], [4, 4], "accepted 5 of 4"),
        ([0] * 300_000, [4] * 300_000, "300000 steps"),
    ],
    ids=["huge-step", "accepted-past-drafted", "record-longer-than-the-reply"],
)
def test_a_per_step_record_out_of_bounds_ends_the_reply(accepted, drafted, named):
    fake = FakeOpenAI(reply="one two three", token_ids=True, last_extra=vllm_record(accepted, drafted))
    reply = plain_reply(fake, max_tokens=64)
    assert reply.done.finish_reason == "error"
    assert named in reply.done.error and "\n" not in reply.done.error
    assert reply.stats.num_drafted < 100


def reference_ways(chunks, accepted):
    """The quadratic table reconciliation was built on (chunks x record): the oracle."""
    last = len(chunks) - 1

    def fits(i, j):
        return chunks[i] == accepted[j] + 1 or (i == last and 0 < chunks[i] <= accepted[j] + 1)

    ways = [[0] * (len(accepted) + 1) for _ in range(len(chunks) + 1)]
    ways[len(chunks)][len(accepted)] = 1
    for i in range(len(chunks) - 1, -1, -1):
        for j in range(len(accepted), -1, -1):
            plain = ways[i + 1][j] if chunks[i] == 1 else 0
            drafting = ways[i + 1][j + 1] if j < len(accepted) and fits(i, j) else 0
            ways[i][j] = min(2, plain + drafting)
    if not ways[0][0]:
        return 0, None
    reading, j = [], 0
    for i in range(len(chunks)):
        if j < len(accepted) and fits(i, j) and ways[i + 1][j + 1]:
            reading.append(j)
            j += 1
        else:
            reading.append(None)
    return ways[0][0], reading


def test_the_linear_reading_agrees_with_the_table_it_replaces():
    import random

    from spectui.engines.provenance import StepCount, is_unambiguous, rebuild

    chooser = random.Random(42)
    for _ in range(3000):
        chunks = [chooser.choice([1, 1, 1, 2, 3, 0]) for _ in range(chooser.randint(0, 7))]
        accepted = [chooser.choice([0, 0, 1, 2, 3]) for _ in range(chooser.randint(0, 5))]
        ways, reading = reference_ways(chunks, accepted)
        drafted = [4] * len(accepted)
        expected = None if reading is None else [StepCount(1, 0, 0)] + [
            StepCount(size, 0, 0) if j is None else StepCount(size, 4, accepted[j]) for size, j in zip(chunks, reading)
        ]
        assert rebuild([1, *chunks], accepted, drafted) == expected, (chunks, accepted)
        assert is_unambiguous([1, *chunks], accepted) == (ways == 1), (chunks, accepted)


def test_reconciliation_memory_is_linear_in_the_reply():
    import tracemalloc

    from spectui.engines.provenance import rebuild

    chunks = [1] + [1, 2] * 1000  # 2,000 chunks, a record of 2,000 steps
    accepted = [0, 1] * 1000
    tracemalloc.start()
    try:
        counts = rebuild(chunks, accepted, [4] * len(accepted))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert counts is not None and len(counts) == len(chunks)
    assert peak < 4 * 2**20  # the chunks x record table held 4 million cells here


def metrics_with_positions(*positions: str) -> str:
    lines = ["vllm:spec_decode_num_drafts_total 4.0"]
    lines += [f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{position="{p}"}} 1.0' for p in positions]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("positions", [("1000",), ("0", "1", "1000"), ("16",)], ids=["alone", "among-real", "just-past"])
def test_a_metrics_position_past_any_k_is_not_the_servers_k(positions):
    fake = FakeOpenAI(reply="one two three", metrics=metrics_with_positions(*positions))
    with fake_server(fake) as url:
        engine = ServerEngine(url)
        result = invoke("generate", "hi", "--engine", "server", "--server", url)
    assert engine.k <= 16
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output and "one two three" in result.stdout


# --- the --server URL ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "named"),
    [
        ("http://127.0.0.1:0", "port 0"),
        ("http://127.0.0.1:99999", "port"),
        ("http://127.0.0.1:8000\x1b[2J", "control character"),
        ("http://127.0.0.1\r\nX-Evil: 1:8000", "control character"),
        ("http://local host:8000", "space"),
    ],
    ids=["port-0", "port-too-big", "escape", "crlf", "space"],
)
def test_a_bad_server_url_is_one_line_before_any_connection(url, named):
    with pytest.raises(UsageError, match=named) as refused:
        ServerEngine(url)
    assert "\x1b" not in str(refused.value) and "\n" not in str(refused.value)
    result = invoke("generate", "hi", "--engine", "server", "--server", url)
    assert result.exit_code == 2, result.output
    assert named in one_line_error(result) and "\x1b" not in result.output


def test_a_key_in_the_query_string_is_never_shown():
    from spectui.engines.server.engine import build_server_engine
    from spectui.settings.options import EngineOptions

    key = "sk-query-2c9e-never-shown"
    shown: list[str] = []
    with fake_server() as url:
        build_server_engine(
            EngineOptions(engine="server", server=f"{url}/v1?api_key={key}&x=1"),
            progress=lambda stage, done, total: shown.append(stage),
        )
    assert shown and all(key not in line for line in shown)
    assert "api_key=***" in shown[0]


# --- a server that withholds its answer -----------------------------------------------------------


class SilentServer:
    """Accepts connections on loopback and never reads or answers a byte."""

    def __init__(self) -> None:
        import socket

        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.accepted: list = []
        self.connected = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            self.accepted.append(connection)
            self.connected.set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.listener.getsockname()[1]}"

    def close(self) -> None:
        for connection in self.accepted:
            connection.close()
        self.listener.close()


def stream_in_thread(engine: ServerEngine, control: Control):
    events: list = []
    thread = threading.Thread(
        target=lambda: events.extend(engine.stream(PROMPT, GenerationParams(max_tokens=16), control)), daemon=True
    )
    thread.start()
    return thread, events


def cancel_and_time(thread: threading.Thread, control: Control) -> float:
    started = time.monotonic()
    control.cancel()
    thread.join(10)
    return time.monotonic() - started


def test_esc_ends_a_reply_whose_server_withholds_its_response_headers():
    fake = FakeOpenAI(withhold_headers=True)
    control = Control(k=0)
    with fake_server(fake) as url:
        engine = ServerEngine(url, read_timeout=120)
        thread, events = stream_in_thread(engine, control)
        assert fake.chat_requests.wait(30), "the request reached the server"
        seconds = cancel_and_time(thread, control)
        alive = thread.is_alive()
        readers = [t for t in threading.enumerate() if t.name == "spectui-server-stream"]
        for reader in readers:
            reader.join(2)  # its socket was shut down: the request does not linger to its timeout
        lingering = any(reader.is_alive() for reader in readers)
        fake.stop.set()
    assert not alive and seconds < 2, f"Esc took {seconds:.1f} s"
    assert not lingering
    assert events[-1].finish_reason == "cancelled"


def test_esc_ends_a_reply_whose_server_accepts_and_never_answers():
    from spectui.engines.server.transport import ServerAddress

    silent = SilentServer()
    control = Control(k=0)
    try:
        with fake_server() as url:
            engine = ServerEngine(url, read_timeout=120)
        engine.address = ServerAddress.parse(silent.url)  # the server went silent after it was found
        thread, events = stream_in_thread(engine, control)
        assert silent.connected.wait(30), "the client connected"
        seconds = cancel_and_time(thread, control)
    finally:
        silent.close()
    assert not thread.is_alive() and seconds < 2, f"Esc took {seconds:.1f} s"
    assert events[-1].finish_reason == "cancelled"


def test_a_server_that_never_sends_its_headers_ends_the_reply_at_the_header_timeout():
    fake = FakeOpenAI(withhold_headers=True)
    with fake_server(fake) as url:
        engine = ServerEngine(url, read_timeout=120, header_timeout=0.5)
        reply = run_reply(engine, PROMPT, GenerationParams(max_tokens=16), Control(k=0))
        fake.stop.set()
    assert reply.done.finish_reason == "error"
    assert "sent no response in" in reply.done.error


# --- the app's own guard: an engine's exception ends one reply ----------------------------------


def raising_engine(error: BaseException):
    from fake_engines import PlanEngine

    return PlanEngine([None, None], raise_after=1, error=error)


@pytest.mark.parametrize(
    ("error", "named"),
    [(MemoryError(), "out of memory"), (RecursionError("maximum recursion depth exceeded"), "RecursionError")],
    ids=["memory-error", "recursion-error"],
)
def test_generate_names_an_engines_exception_in_one_line(monkeypatch, error, named):
    from spectui.engines import factory

    monkeypatch.setattr(factory, "build_engine", lambda options, models, progress=None: raising_engine(error))
    result = invoke("generate", "hi")
    assert result.exit_code != 0
    assert named in one_line_error(result) and "Traceback" not in result.output


def test_a_step_with_absurd_numbers_ends_the_reply_not_the_process():
    from fake_engines import StepsEngine

    from spectui.core.errors import SpectuiError
    from spectui.core.events import Done, Source, Step

    absurd = Step((1,), (Source.RECOVERED,), " w1", k=4, draft_count=10**11, exact=False)
    with pytest.raises(SpectuiError, match="100000000000 drafted"):
        run_reply(StepsEngine([absurd, Done("stop")]), PROMPT, GenerationParams(), Control())


def test_a_nested_bench_report_is_one_line(tmp_path):
    from spectui.bench.saved import load_results

    saved = tmp_path / "bench.json"
    saved.write_text(NESTED_CLOSED)
    with pytest.raises(UsageError, match="not a spectui bench JSON.*nested"):
        load_results([saved])
