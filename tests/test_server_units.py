"""The server engine's parts without a vLLM server (fast), and the shared provenance helpers.

The stream tests replay chunks captured from a real vLLM 0.32 server through a stdlib HTTP
server, so the client's HTTP, SSE and error paths run for real.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from spectui.engines.provenance import (
    StepCount,
    counted_step,
    guess_sources,
    rebuild,
    restate,
    sources_for,
    split_chunk,
)
from spectui.engines.server.chunks import parse_chunk
from spectui.engines.server.engine import ServerEngine, build_server_engine
from spectui.engines.server.probe import draft_name, method_name
from spectui.engines.server.prometheus import (
    PrometheusFormatError,
    SpecCounters,
    is_vllm_exposition,
    parse_samples,
    spec_counters,
)
from spectui.engines.server.reconcile import per_step_record, reconcile
from spectui.engines.server.sse import SseDecoder, iter_sse_data
from spectui.engines.server.transport import ServerAddress
from spectui.core.errors import UsageError
from spectui.core.events import Control, Done, GenerationParams, Source, Step
from spectui.settings.options import EngineOptions
from spectui.measure.run import reply_json, run_reply

D, R, B, T = Source.DRAFT, Source.RECOVERED, Source.BONUS, Source.TARGET

# --- Prometheus ----------------------------------------------------------------------------

# Captured from `vllm serve` 0.32 (ngram, k = 4) after one request, trimmed; the last block
# adds a second engine and label values that need escaping.
METRICS_TEXT = r"""# HELP python_info Python platform information
# TYPE python_info gauge
python_info{implementation="CPython",major="3",minor="11",patchlevel="7",version="3.11.7"} 1.0
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="/models/smollm2-135m"} 0.0
# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="/models/smollm2-135m"} 6.0
# HELP vllm:spec_decode_num_drafts_created Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_created gauge
vllm:spec_decode_num_drafts_created{engine="0",model_name="/models/smollm2-135m"} 1.7959957862737482e+09
# HELP vllm:spec_decode_num_draft_tokens_total Number of draft tokens.
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="/models/smollm2-135m"} 24.0
vllm:spec_decode_num_draft_tokens_created{engine="0",model_name="/models/smollm2-135m"} 1.7959957862738109e+09
# HELP vllm:spec_decode_num_accepted_tokens_total Number of accepted tokens.
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="/models/smollm2-135m"} 20.0
vllm:spec_decode_num_accepted_tokens_created{engine="0",model_name="/models/smollm2-135m"} 1.7959957862738483e+09
# HELP vllm:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens per draft position.
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="/models/smollm2-135m",position="0"} 6.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="/models/smollm2-135m",position="1"} 5.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="/models/smollm2-135m",position="2"} 5.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="/models/smollm2-135m",position="3"} 4.0
vllm:spec_decode_num_accepted_tokens_per_pos_created{engine="0",model_name="/models/smollm2-135m",position="0"} 1.7959957862739115e+09
vllm:inter_token_latency_seconds_bucket{engine="0",le="+Inf",model_name="/models/smollm2-135m"} 12.0
vllm:kv_cache_usage_perc{engine="0",model_name="/models/smollm2-135m"} NaN

vllm:spec_decode_num_drafts_total{engine="1",model_name="a \"quoted\", {odd} name\\path"} 4.0 1712345678000
vllm:spec_decode_num_draft_tokens_total{model_name="a \"quoted\", {odd} name\\path",engine="1"} 16.0
vllm:spec_decode_num_accepted_tokens_total{engine="1", model_name="a \"quoted\", {odd} name\\path",} 2.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{position="0",engine="1",model_name="x\ny"} 2.0
"""


def test_parser_reads_labels_with_escapes_commas_and_braces():
    samples = parse_samples(METRICS_TEXT)
    odd = [s for s in samples if s.labels.get("engine") == "1" and s.name.endswith("drafts_total")]
    assert odd[0].labels["model_name"] == 'a "quoted", {odd} name\\path'
    assert odd[0].value == 4.0  # the timestamp after the value is not the value
    newline = [s for s in samples if s.labels.get("model_name") == "x\ny"]
    assert newline and newline[0].labels["position"] == "0"
    trailing_comma = [s for s in samples if s.name == "vllm:spec_decode_num_accepted_tokens_total"]
    assert {s.labels["engine"] for s in trailing_comma} == {"0", "1"}


def test_parser_skips_comments_and_reads_special_values():
    samples = parse_samples(METRICS_TEXT)
    assert not any(s.name.startswith("#") for s in samples)
    by_name = {s.name: s for s in samples}
    assert by_name["vllm:kv_cache_usage_perc"].value != by_name["vllm:kv_cache_usage_perc"].value  # NaN
    assert by_name["vllm:inter_token_latency_seconds_bucket"].labels["le"] == "+Inf"
    assert by_name["python_info"].labels["patchlevel"] == "7"


def test_parser_names_the_bad_line():
    with pytest.raises(PrometheusFormatError, match="line 2"):
        parse_samples('ok 1\nbroken{a="1" 2\n')


def test_spec_counters_sum_engines_and_ignore_created():
    counters = spec_counters(parse_samples(METRICS_TEXT))
    assert counters == SpecCounters(
        num_drafts=10, num_draft_tokens=40, num_accepted_tokens=22, accepted_per_position=(8, 5, 5, 4)
    )
    assert counters.num_positions == 4
    assert counters.gamma == pytest.approx(22 / 40)
    assert counters.per_position_acceptance == pytest.approx((0.8, 0.5, 0.5, 0.4))


def test_spec_counters_absent_and_difference():
    plain = 'vllm:num_requests_running{engine="0"} 0.0\n'
    assert spec_counters(parse_samples(plain)) is None
    assert is_vllm_exposition(parse_samples(plain))
    assert not is_vllm_exposition(parse_samples("process_open_fds 3\n"))
    earlier = SpecCounters(2, 8, 5, (2, 2, 1))
    later = SpecCounters(5, 20, 11, (5, 3, 2, 1))
    delta = later - earlier
    assert delta == SpecCounters(3, 12, 6, (3, 1, 1, 1))
    assert delta.as_stats()["server_gamma"] == pytest.approx(0.5)
    assert SpecCounters(0, 0, 0, (0, 0)).gamma is None
    assert SpecCounters(0, 0, 0, (0, 0)).per_position_acceptance == ()


# --- SSE -------------------------------------------------------------------------------------

SSE_BYTES = (
    b": keep-alive comment\n\n"
    b'data: {"a": 1}\n\n'
    b"event: message\r\nid: 7\r\ndata: line one\r\ndata: line two\r\n\r\n"
    b"data:no-space \xe6\x97\xa5\xe6\x9c\xac\n\n"
    b"data: [DONE]\n\n"
    b"data: cut off before its blank line"
)
SSE_EVENTS = ['{"a": 1}', "line one\nline two", "no-space 日本", "[DONE]"]


def test_sse_events_from_one_buffer():
    assert list(iter_sse_data([SSE_BYTES])) == SSE_EVENTS


@pytest.mark.parametrize("cut", range(1, len(SSE_BYTES)))
def test_sse_events_split_anywhere(cut):
    # Inside a UTF-8 character, between \r and \n, inside "data:": the same events come out.
    assert list(iter_sse_data([SSE_BYTES[:cut], SSE_BYTES[cut:]])) == SSE_EVENTS


def test_sse_byte_by_byte():
    decoder = SseDecoder()
    events = [event for i in range(len(SSE_BYTES)) for event in decoder.feed(SSE_BYTES[i : i + 1])]
    assert events == SSE_EVENTS


# --- chunks (captured from vLLM 0.32, ids trimmed) ----------------------------------------------

CAPTURED_STREAM = [
    '{"id":"chatcmpl-bd4d","object":"chat.completion.chunk","created":1795995791,"model":"smollm2","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"prompt_token_ids":[1,9690,198],"prompt_text":null}',
    '{"id":"chatcmpl-bd4d","object":"chat.completion.chunk","created":1795995791,"model":"smollm2","choices":[{"index":0,"delta":{"content":"def"},"logprobs":null,"finish_reason":null,"token_ids":[1604]}]}',
    '{"id":"chatcmpl-bd4d","object":"chat.completion.chunk","created":1795995791,"model":"smollm2","choices":[{"index":0,"delta":{"content":" add(a, b"},"logprobs":null,"finish_reason":null,"token_ids":[803,24,81,28,278]}]}',
    '{"id":"chatcmpl-bd4d","object":"chat.completion.chunk","created":1795995791,"model":"smollm2","choices":[{"index":0,"delta":{"content":"):\\n    return a +"},"logprobs":null,"finish_reason":null,"token_ids":[727,472,1003,253,1232]}]}',
    '{"id":"chatcmpl-bd4d","object":"chat.completion.chunk","created":1795995791,"model":"smollm2","choices":[{"index":0,"delta":{"content":" b\\n\\ndef sub"},"logprobs":null,"finish_reason":null,"token_ids":[278,198,198,1604,840]}]}',
    '{"id":"chatcmpl-bd4d","object":"chat.completion.chunk","created":1795995791,"model":"smollm2","choices":[{"index":0,"delta":{"content":"(a, b):"},"logprobs":null,"finish_reason":null,"token_ids":[24,81,28,278,727]}]}',
    '{"id":"chatcmpl-bd4d","object":"chat.completion.chunk","created":1795995791,"model":"smollm2","choices":[{"index":0,"delta":{"content":"\\n    return a -"},"logprobs":null,"finish_reason":null,"token_ids":[472,1003,253,731]}]}',
    '{"id":"chatcmpl-bd4d","object":"chat.completion.chunk","created":1795995791,"model":"smollm2","choices":[{"index":0,"delta":{"content":" b"},"logprobs":null,"finish_reason":"stop","stop_reason":null,"token_ids":[278,2]}]}',
    '{"id":"chatcmpl-bd4d","object":"chat.completion.chunk","created":1795995791,"model":"smollm2","choices":[],"usage":{"prompt_tokens":63,"total_tokens":90,"completion_tokens":27},"system_fingerprint":"vllm-0.32.0-6e819c49","metrics":{"speculative_decoding":{"mean_acceptance_length":4.333333333333334,"draft_acceptance_rate":0.8333333333333334,"acceptance_histogram":[0,1,0,1,4],"num_spec_steps":6,"num_accepted_draft_tokens":20,"num_draft_tokens":24,"num_spec_tokens":4,"per_step_accepted":[4,4,4,4,3,1],"per_step_drafted":[4,4,4,4,4,4]}}}',
    "[DONE]",
]


def test_parse_chunk_shapes():
    role, first, *_middle, last, usage, _done = [parse_chunk(data) for data in CAPTURED_STREAM]
    assert role.token_ids == () and role.prompt_token_ids == (1, 9690, 198) and role.text == ""
    assert first.token_ids == (1604,) and first.text == "def" and first.finish_reason is None
    assert last.token_ids == (278, 2) and last.finish_reason == "stop"
    assert usage.token_ids == () and usage.speculative_decoding["per_step_accepted"] == [4, 4, 4, 4, 3, 1]
    assert usage.usage["completion_tokens"] == 27


def test_parse_error_chunks():
    error = parse_chunk('{"error": {"message": "boom\\nsecond line", "type": "BadRequestError", "code": 400}}')
    assert error.error == "boom second line"
    assert parse_chunk("{not json").error.startswith("the server sent a chunk that is not JSON")
    assert parse_chunk('{"object": "error", "message": "old style"}').error == "old style"


# --- addresses, names --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url, expected",
    [
        ("http://127.0.0.1:8000", "http://127.0.0.1:8000"),
        ("127.0.0.1:8000/", "http://127.0.0.1:8000"),
        ("http://gpu-box:8000/v1", "http://gpu-box:8000"),
        ("https://cluster.example/vllm/v1/", "https://cluster.example:443/vllm"),
        ("http://[::1]:9000", "http://[::1]:9000"),
    ],
)
def test_server_address(url, expected):
    assert ServerAddress.parse(url).url == expected


def test_server_address_rejects_other_schemes():
    with pytest.raises(ValueError):
        ServerAddress.parse("ftp://host")


def test_method_and_draft_names():
    assert method_name(None, 0) == "none"
    assert method_name(None, 4) == "server" and method_name(None, None) == "server"
    assert method_name({"method": "draft_model", "model": "/m/0.5b"}, 4) == "draft"
    assert method_name({"method": "ngram"}, 4) == "ngram"
    assert draft_name({"method": "draft_model", "model": "/m/0.5b"}) == "/m/0.5b"
    assert draft_name({"method": "ngram", "model": "ngram"}) is None


# --- unreachable, refused, replayed ------------------------------------------------------------


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_unreachable_server_is_one_line_naming_the_url():
    port = closed_port()
    with pytest.raises(UsageError) as raised:
        ServerEngine(f"http://127.0.0.1:{port}")
    message = str(raised.value)
    assert f"127.0.0.1:{port}" in message and "\n" not in message
    assert "connection refused" in message


def test_build_needs_a_url_and_reads_the_key_from_the_environment(monkeypatch):
    with pytest.raises(UsageError, match="--server"):
        build_server_engine(EngineOptions(engine="auto"))
    seen = {}
    with replay_server(lambda handler: seen.setdefault("auth", handler.headers.get("Authorization"))) as url:
        monkeypatch.setenv("SPECTUI_API_KEY", "sk-from-env")
        build_server_engine(EngineOptions(engine="server", server=url))
    assert seen["auth"] == "Bearer sk-from-env"


class Replay(BaseHTTPRequestHandler):
    """A stdlib HTTP server speaking the few endpoints the engine uses, from canned data."""

    protocol_version = "HTTP/1.1"
    models_status = 200
    chat_status = 200
    events: list[str] = CAPTURED_STREAM
    cut_after: int | None = None  # close the connection after this many events
    server_info: dict | None = None  # /server_info exists only in vLLM's dev mode
    on_request: Callable | None = None

    def log_message(self, *args) -> None:  # keep pytest's output clean
        pass

    def do_GET(self) -> None:
        if self.on_request:
            self.on_request(self)
        if self.path == "/v1/models":
            self._json(self.models_status, {"object": "list", "data": [{"id": "smollm2", "parent": None}]})
        elif self.path.startswith("/server_info") and self.server_info is not None:
            self._json(200, self.server_info)
        elif self.path == "/metrics":
            body = METRICS_TEXT.encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        else:
            self._json(404, {"detail": "Not Found"})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        if self.chat_status != 200:
            self._json(self.chat_status, {"error": "Unauthorized"})
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for number, event in enumerate(self.events):
            if self.cut_after is not None and number == self.cut_after:
                self.wfile.flush()
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            payload = f"data: {event}\n\n".encode()
            self.wfile.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
        self.wfile.write(b"0\r\n\r\n")

    def _json(self, status: int, value: dict) -> None:
        body = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class replay_server:
    def __init__(self, on_request: Callable | None = None, **settings) -> None:
        handler = type("ReplayHandler", (Replay,), {**settings, "on_request": staticmethod(on_request) if on_request else None})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)

    def __enter__(self) -> str:
        threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True).start()
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


PROMPT = [{"role": "user", "content": "Repeat: def add(a, b): return a + b"}]


def test_replayed_stream_gives_steps_and_a_reconciled_done():
    with replay_server() as url:
        engine = ServerEngine(url)
        reply = run_reply(engine, PROMPT, GenerationParams(max_tokens=48), Control(k=4))
    assert engine.k == 4 and engine.info.method == "server" and engine.info.capabilities.exact_provenance is False
    assert [len(step.token_ids) for step in reply.steps] == [1, 5, 5, 5, 5, 4, 2]
    assert reply.text == "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b"
    assert reply.steps[0].sources == (T,)
    assert reply.steps[1].sources == (D, D, D, D, B)
    assert reply.steps[-1].sources == (D, R)
    assert all(not step.exact for step in reply.steps)
    done = reply.done
    assert done.finish_reason == "stop" and done.prompt_token_ids == (1, 9690, 198)
    assert done.approximate is False and done.restated_steps is None
    assert done.engine_stats["num_accepted_draft_tokens"] == 20
    # The replay's /metrics never moves: the server-wide difference over the reply is zero.
    assert done.engine_stats["server_num_draft_tokens"] == 0
    assert json.dumps(reply_json(reply, engine, engine.k))  # generate --json's shape


def test_server_info_names_method_draft_and_dtype():
    config = {
        "model_config": {"dtype": "torch.bfloat16"},
        "speculative_config": {"method": "draft_model", "model": "/models/qwen-0.5b", "num_speculative_tokens": 4},
    }
    with replay_server(server_info={"vllm_config": config}) as url:
        info = ServerEngine(url).info
    assert (info.method, info.draft, info.dtype) == ("draft", "/models/qwen-0.5b", "bfloat16")


def test_stream_cut_mid_reply_ends_in_one_error_line():
    with replay_server(cut_after=4) as url:
        engine = ServerEngine(url)
        events = list(engine.stream(PROMPT, GenerationParams(), Control()))
    steps, done = events[:-1], events[-1]
    assert [len(step.token_ids) for step in steps] == [1, 5, 5]
    assert isinstance(done, Done) and done.finish_reason == "error"
    assert "closed the stream after 11 tokens" in done.error and url in done.error
    assert "\n" not in done.error


def test_error_chunk_in_the_stream():
    events = CAPTURED_STREAM[:3] + ['{"error": {"message": "Internal server error", "type": "x", "code": 500}}', "[DONE]"]
    with replay_server(events=events) as url:
        done = list(ServerEngine(url).stream(PROMPT, GenerationParams(), Control()))[-1]
    assert done.finish_reason == "error" and "Internal server error" in done.error


def test_refused_api_key():
    with replay_server(models_status=401) as url:
        with pytest.raises(UsageError, match="refused the API key"):
            ServerEngine(url)
    with replay_server(chat_status=401) as url:
        done = list(ServerEngine(url, api_key="wrong").stream(PROMPT, GenerationParams(), Control()))[-1]
    assert done.finish_reason == "error" and "refused the API key" in done.error


def test_unknown_model_is_named():
    with replay_server() as url:
        with pytest.raises(UsageError, match="serves smollm2, not other"):
            ServerEngine(url, model="other")


def test_cancel_between_chunks():
    control = Control()
    with replay_server() as url:
        events = []
        for event in ServerEngine(url).stream(PROMPT, GenerationParams(), control):
            events.append(event)
            control.cancel()
    assert isinstance(events[-1], Done) and events[-1].finish_reason == "cancelled"
    assert len(events) == 2


# --- reconcile -----------------------------------------------------------------------------------


def streamed(sizes: list[int], k: int = 4) -> list[Step]:
    steps, next_id = [], 0
    for number, size in enumerate(sizes):
        ids = list(range(next_id, next_id + size))
        next_id += size
        steps.append(counted_step(ids, "x" * size, None, k=k, temperature=0.0, method="ngram", first=number == 0))
    return steps


def test_reconcile_agreeing_record_restates_nothing():
    record = {"per_step_accepted": [4, 1], "per_step_drafted": [4, 4], "num_spec_steps": 2}
    result = reconcile(streamed([1, 5, 2]), record, k=4, method="ngram")
    assert result.approximate is False and result.restated_steps is None
    assert [c.num_accepted for c in result.counts] == [0, 4, 1]


def test_reconcile_restates_steps_without_a_proposal():
    # The last one-token chunk had no proposal (n-gram found no match): TARGET, not RECOVERED.
    # Only one reading fits: the first one-token chunk must be the step that accepted nothing.
    record = {"per_step_accepted": [0, 2], "per_step_drafted": [4, 4], "num_spec_steps": 2}
    steps = streamed([1, 1, 3, 1])
    assert steps[3].sources == (R,)
    result = reconcile(steps, record, k=4, method="ngram")
    assert result.approximate is False
    assert [s.sources for s in result.restated_steps] == [(T,), (R,), (D, D, R), (T,)]
    assert [s.num_drafted for s in result.restated_steps] == [0, 4, 4, 0]
    assert result.restated_steps[3].method == ""


def test_reconcile_says_when_the_record_fits_two_ways():
    # Two one-token chunks, one record that accepted nothing: either chunk could be it.
    # The totals are exact, which chunk is RECOVERED is not: the reply says so.
    record = {"per_step_accepted": [0, 2], "per_step_drafted": [4, 4], "num_spec_steps": 2}
    result = reconcile(streamed([1, 1, 1, 3]), record, k=4, method="ngram")
    assert result.ambiguous is True and result.approximate is False
    assert sum(c.num_accepted for c in result.counts) == 2
    unique = reconcile(streamed([1, 1, 3, 1]), record, k=4, method="ngram")
    assert unique.ambiguous is False


def test_reconcile_merged_stream_is_approximate():
    record = {"per_step_accepted": [4, 4], "per_step_drafted": [4, 4], "num_spec_steps": 2}
    result = reconcile(streamed([1, 10]), record, k=4, method="ngram")
    assert result.approximate is True and result.restated_steps is None


def test_reconcile_without_record():
    assert reconcile(streamed([1, 3]), None, k=4, method="ngram").approximate is True
    assert reconcile(streamed([1, 1], k=0), None, k=0, method="none").approximate is False
    assert reconcile([], None, k=4, method="ngram").approximate is False


def test_summary_record_with_no_spec_steps_is_complete():
    record = {"num_spec_steps": 0, "num_draft_tokens": 0, "num_spec_tokens": 4}
    assert per_step_record(record) == ([], [])
    assert per_step_record({"num_spec_steps": 3}) is None
    result = reconcile(streamed([1, 1, 1]), record, k=4, method="ngram")
    assert result.approximate is False
    assert [s.sources for s in result.restated_steps] == [(T,), (T,), (T,)]


# --- provenance (spectui/engines/provenance.py) ---------------------------------------------------


def test_sources_for():
    assert sources_for(3, 0, 0) == (T, T, T)
    assert sources_for(5, 4, 4) == (D, D, D, D, B)
    assert sources_for(3, 4, 2) == (D, D, R)
    assert sources_for(1, 4, 0) == (R,)
    assert sources_for(2, 4, 3) == (D, D)  # cut short by a stop token: the kept drafts
    assert sources_for(3, 2, 2) == (D, D, B)  # fewer proposed than k, all kept
    assert sources_for(5, 4, 2) == (D, D, R, T, T)  # more than one step can hold
    assert sources_for(0, 4, 2) == ()


def test_guess_sources():
    assert guess_sources(0, 4, first=False) == ()
    assert guess_sources(1, 4, first=True) == (T,)
    assert guess_sources(3, 0, first=False) == (T, T, T)
    assert guess_sources(5, 4, first=False) == (D, D, D, D, B)
    assert guess_sources(3, 4, first=False) == (D, D, R)
    assert guess_sources(1, 4, first=False) == (R,)
    assert guess_sources(6, 4, first=False) == (T,) * 6  # merged steps: no guess by size


def test_split_chunk():
    one = StepCount(3, 4, 2)
    assert split_chunk(3, [one]) == [one]
    assert split_chunk(4, [StepCount(0, 4, 0), one, StepCount(1, 0, 0)]) == [one, StepCount(1, 0, 0)]
    assert split_chunk(5, [one]) is None
    assert split_chunk(0, []) is None


def test_rebuild_plain_and_truncated_last_chunk():
    assert rebuild([], [], []) == []
    counts = rebuild([1, 5, 5, 5, 5, 4, 2], [4, 4, 4, 4, 3, 1], [4] * 6)
    assert [(c.num_tokens, c.num_drafted, c.num_accepted) for c in counts] == [
        (1, 0, 0), (5, 4, 4), (5, 4, 4), (5, 4, 4), (5, 4, 4), (4, 4, 3), (2, 4, 1)
    ]
    # max_tokens cut the last step after 2 of its 4 accepted drafts + bonus.
    truncated = rebuild([1, 5, 2], [4, 4], [4, 4])
    assert truncated[-1] == StepCount(2, 4, 4)
    assert sources_for(2, 4, 4) == (D, D)
    # Only the last chunk may be short.
    assert rebuild([1, 2, 5], [4, 4], [4, 4]) is None


def test_rebuild_merged_chunk_is_none():
    assert rebuild([1, 10], [4, 4], [4, 4]) is None  # two steps in one chunk
    assert rebuild([1, 3], [], []) is None  # drafts shown but none recorded
    assert rebuild([1, 5], [4, 4], [4, 4]) is None  # a record entry left over


def test_rebuild_no_proposal_steps_and_ambiguity():
    counts = rebuild([1, 1, 3, 1], [2], [4])
    assert [c.num_drafted for c in counts] == [0, 0, 4, 0]
    # Two one-token chunks, one record of a step that rejected all drafts: either chunk fits.
    # The earliest reading is taken; the tokens are the target's either way.
    ambiguous = rebuild([1, 1, 1], [0], [4])
    assert [(c.num_drafted, c.num_accepted) for c in ambiguous] == [(0, 0), (4, 0), (0, 0)]
    assert [sources_for(c.num_tokens, c.num_drafted, c.num_accepted) for c in ambiguous] == [(T,), (R,), (T,)]
    # Where only one reading fits, it is the one taken.
    counts = rebuild([1, 1, 2, 1], [0, 1], [4, 4])
    assert [(c.num_drafted, c.num_accepted) for c in counts] == [(0, 0), (4, 0), (4, 1), (0, 0)]


def test_counted_step_and_restate():
    guessed = counted_step([7, 8, 9], "abc", None, k=4, temperature=0.5, method="ngram", first=False)
    assert guessed.sources == (D, D, R) and guessed.num_drafted == 4 and not guessed.exact
    assert guessed.method == "ngram" and guessed.temperature == 0.5
    first = counted_step([7], "a", None, k=4, temperature=0.0, method="ngram", first=True)
    assert first.num_drafted == 0 and first.method == ""
    # The reply stopped inside a step whose 3 drafts were all accepted: 2 shown, 3 counted.
    known = counted_step([7, 8], "ab", StepCount(2, 3, 3), k=4, temperature=0.0, method="ngram", first=False)
    assert known.sources == (D, D) and known.num_drafted == 3 and known.num_accepted == 3
    restated = restate([first, guessed], [StepCount(1, 0, 0), StepCount(3, 4, 4)])
    assert restated[1].sources == (D, D, D) and restated[1].token_ids == (7, 8, 9)
    assert restated[1].num_accepted == 4 and restated[1].num_drafted == 4
    with pytest.raises(ValueError):
        restate([first], [])
