"""`--engine server` against servers that are not vLLM, and what a server can do to a client:
fake servers on loopback (tests/fake_openai_server.py) shaped like llama-server, Ollama's /v1,
LM Studio and a /v1-only proxy."""

from __future__ import annotations

import json
import re
import threading
import time

import pytest
from typer.testing import CliRunner

from fake_openai_server import FakeOpenAI, basic_auth, fake_server, free_port
from spectui.cli.app import app as cli
from spectui.core.errors import UsageError
from spectui.core.events import Control, Done, GenerationParams, Source, Step
from spectui.core.engine import SPECULATION_NOT_REPORTED
from spectui.engines.server.engine import ServerEngine, build_server_engine
from spectui.engines.server.sse import SseDecoder, SseTooLong
from spectui.engines.server.transport import redacted
from spectui.measure.run import run_reply
from spectui.settings.options import EngineOptions

PROMPT = [{"role": "user", "content": "What is speculative decoding?"}]
OBEYED = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f]")


def generate(url: str, *options: str):
    return CliRunner().invoke(cli, ["generate", "hi", "--engine", "server", "--server", url, *options])


def stream_in_thread(engine: ServerEngine, control: Control, params: GenerationParams = GenerationParams()):
    """Run a reply in a thread; `events` fills as it streams, `first` is set at the first Step."""
    events: list = []
    first = threading.Event()

    def run() -> None:
        for event in engine.stream(PROMPT, params, control):
            events.append(event)
            if isinstance(event, Step):
                first.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, events, first


# --- a plain server ------------------------------------------------------------------------


def test_a_plain_server_streams_target_text_and_says_speculation_is_not_reported():
    fake = FakeOpenAI()
    with fake_server(fake) as url:
        engine = ServerEngine(url)
        reply = run_reply(engine, PROMPT, GenerationParams(max_tokens=256), Control(k=4))
    assert reply.text == fake.reply
    assert all(step.sources == (Source.TARGET,) for step in reply.steps) and len(reply.steps) > 10
    assert "".join(piece for step in reply.steps for piece in step.pieces) == fake.reply
    assert reply.done.finish_reason == "stop" and reply.done.error is None
    assert reply.done.engine_stats["speculation"] == SPECULATION_NOT_REPORTED
    assert reply.done.approximate is False  # nothing is coloured as a guess: all target text
    assert engine.k == 0 and engine.server_k is None


def test_generate_against_a_plain_server_prints_the_reply_and_the_note():
    fake = FakeOpenAI()
    with fake_server(fake) as url:
        result = generate(url)
        as_json = generate(url, "--json")
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == fake.reply
    assert f"speculation {SPECULATION_NOT_REPORTED}" in " ".join(result.stderr.split())
    assert as_json.exit_code == 0, as_json.output
    record = json.loads(as_json.stdout)
    assert record["text"] == fake.reply


def test_json_names_what_was_not_reported():
    with fake_server() as url:
        record = json.loads(generate(url, "--json").stdout)
    assert record["engine_stats"]["speculation"] == SPECULATION_NOT_REPORTED


def test_a_strict_server_is_asked_again_without_vllm_extensions():
    fake = FakeOpenAI(strict=True)
    with fake_server(fake) as url:
        engine = ServerEngine(url)
        first = run_reply(engine, PROMPT, GenerationParams(), Control())
        second = run_reply(engine, PROMPT, GenerationParams(), Control())
    assert first.text == second.text == fake.reply
    assert ["return_token_ids" in body for body in fake.seen_bodies] == [True, False, False]


def test_vllm_like_metrics_without_token_ids_still_give_the_reply():
    # A server that exposes vLLM's counters but streams text without ids (a proxy dropping them).
    from test_server_units import METRICS_TEXT

    fake = FakeOpenAI(metrics=METRICS_TEXT)
    with fake_server(fake) as url:
        engine = ServerEngine(url)
        reply = run_reply(engine, PROMPT, GenerationParams(), Control(k=engine.k))
    assert engine.k == 4
    assert reply.text == fake.reply and reply.done.finish_reason == "stop"


@pytest.mark.parametrize("flavour", ["llama", "lmstudio"])
def test_draft_counts_give_gamma_and_approximate_colours(flavour):
    fake = FakeOpenAI(reply=" ".join(f"w{i}" for i in range(30)), draft_counts=flavour, counts=(24, 18))
    with fake_server(fake) as url:
        engine = ServerEngine(url)
        reply = run_reply(engine, PROMPT, GenerationParams(), Control())
        summary = " ".join(generate(url).stderr.split())  # rich wraps it at 80 columns
    done = reply.done
    assert done.approximate is True and done.restated_steps is not None
    steps = reply.steps  # restated
    assert [len(step.token_ids) for step in steps] == [1] * 30  # one step per chunk, as streamed
    stats = reply.stats
    assert (stats.num_accepted, stats.num_drafted) == (18, 24) and stats.gamma == pytest.approx(18 / 24)
    assert stats.tau == pytest.approx(1 + 18 / 11)  # 30 tokens, 18 accepted: 12 forwards, 11 drafting
    assert steps[0].sources == (Source.TARGET,)
    assert sum(1 for step in steps if step.sources == (Source.DRAFT,)) == 18
    assert sum(step.num_accepted for step in steps) == 18 and sum(step.num_drafted for step in steps) == 24
    assert done.engine_stats["server_num_accepted_tokens"] == 18
    assert "γ 0.75" in summary and "speculation counted by the server" in summary and "colours approximate" in summary


# --- limits the client keeps itself ----------------------------------------------------------


def test_the_client_stops_at_its_own_max_tokens_when_the_server_ignores_it():
    fake = FakeOpenAI(ignore_max_tokens=True, endless_limit=400)
    with fake_server(fake) as url:
        engine = ServerEngine(url)
        reply = run_reply(engine, PROMPT, GenerationParams(max_tokens=7), Control())
        result = generate(url, "--max-tokens", "5", "--json")
    assert sum(len(step.token_ids) for step in reply.steps) == 7
    assert reply.done.finish_reason == "length" and reply.done.error is None
    assert fake.seen_bodies[0]["max_tokens"] == 7  # asked for, and not kept to by this server
    record = json.loads(result.stdout)
    assert len(record["token_ids"]) == 5 and record["finish_reason"] == "length"


def test_a_vllm_reply_that_fills_max_tokens_keeps_its_record():
    # The server kept to max_tokens: the usage chunk after the last token is still read.
    from test_server_units import replay_server

    with replay_server() as url:
        engine = ServerEngine(url)
        whole = run_reply(engine, PROMPT, GenerationParams(max_tokens=27), Control(k=4))
        cut = run_reply(engine, PROMPT, GenerationParams(max_tokens=26), Control(k=4))
    assert whole.done.approximate is False and whole.done.engine_stats["num_accepted_draft_tokens"] == 20
    assert sum(len(step.token_ids) for step in whole.steps) == 27
    # This replay ignores max_tokens: the client stops itself, inside the last chunk.
    assert sum(len(step.token_ids) for step in cut.steps) == 26 and cut.done.finish_reason == "length"


def test_esc_cancels_while_the_server_sends_nothing():
    fake = FakeOpenAI(stall_after=2, token_ids=True)
    control = Control()
    with fake_server(fake) as url:
        engine = ServerEngine(url, read_timeout=120)
        thread, events, first = stream_in_thread(engine, control)
        assert first.wait(30), "the first chunk came"
        control.cancel()
        thread.join(30)  # the server stays silent for the whole test: only the client can end it
        stalled = thread.is_alive()
        fake.stop.set()
    assert not stalled, "the reply waited for the server instead of seeing Esc"
    assert isinstance(events[-1], Done) and events[-1].finish_reason == "cancelled"


def test_esc_cancels_during_an_endless_line_and_the_line_is_refused_past_its_limit():
    fake = FakeOpenAI(huge_line_mb=300)
    with fake_server(fake) as url:
        control = Control()
        engine = ServerEngine(url)
        thread, events, _ = stream_in_thread(engine, control)
        time.sleep(0.05)  # let some of the line arrive; the cancel must not wait for its end
        control.cancel()
        thread.join(30)
        cancelled_in_time = not thread.is_alive()
        fake.stop.clear()
        done = list(ServerEngine(url).stream(PROMPT, GenerationParams(), Control()))[-1]
        fake.stop.set()
    assert cancelled_in_time and events[-1].finish_reason == "cancelled"
    assert done.finish_reason == "error" and "longer than 16 MiB" in done.error and "\n" not in done.error


def test_the_sse_parser_is_linear_in_a_line_without_newlines():
    block = b"x" * 65536
    with_newlines = block[:-1] + b"\n"

    def feed_all(chunk: bytes) -> float:
        decoder = SseDecoder(max_bytes=64 * 2**20)
        started = time.perf_counter()
        for _ in range(512):  # 32 MiB
            decoder.feed(chunk)
        return time.perf_counter() - started

    # The same bytes, with and without line ends: a parser that rescans or copies what it
    # holds takes quadratic time on the second (32 MiB: 12.7 s before, against ~0.1 s).
    reference = feed_all(with_newlines)
    one_line = feed_all(block)
    assert one_line < 10 * reference + 0.5


def test_a_line_past_the_limit_is_refused_after_reading_only_that_much():
    decoder = SseDecoder(max_bytes=2**20)
    fed = 0
    with pytest.raises(SseTooLong, match="longer than 1 MiB"):
        for _ in range(300):
            decoder.feed(b"y" * 65536)
            fed += 65536
    assert fed <= 2**20


# --- keys, proxies, what is shown --------------------------------------------------------------

KEY = "sk-url-6b1f0d9e-never-shown"


def test_a_key_in_the_url_is_sent_as_basic_auth_and_never_shown(capfd):
    fake = FakeOpenAI(require_auth=basic_auth("me", KEY))
    with fake_server(fake) as url:
        keyed = url.replace("http://", f"http://me:{KEY}@")
        shown: list[str] = []
        engine = build_server_engine(
            EngineOptions(engine="server", server=keyed), progress=lambda stage, done, total: shown.append(stage)
        )
        reply = run_reply(engine, PROMPT, GenerationParams(max_tokens=5), Control())
        result = generate(keyed, "--max-tokens", "3")
        wrong = generate(url.replace("http://", "http://me:wrong-key@"))
        with pytest.raises(UsageError) as unknown_model:
            ServerEngine(keyed, model="other")
    assert reply.text and set(fake.seen_auth) == {basic_auth("me", KEY), basic_auth("me", "wrong-key")}
    assert result.exit_code == 0, result.output
    assert shown and all(KEY not in line for line in shown) and "me:***@" in shown[0]
    assert wrong.exit_code != 0 and "refused the API key" in wrong.stderr
    written = result.output + wrong.output + str(unknown_model.value) + engine.url + repr(engine.address)
    captured = capfd.readouterr()
    assert KEY not in written + captured.out + captured.err


def test_a_bad_url_with_a_key_is_refused_without_showing_it():
    port = free_port()
    with pytest.raises(UsageError) as unreachable:
        ServerEngine(f"http://me:{KEY}@127.0.0.1:{port}")
    with pytest.raises(UsageError) as bad_port:
        ServerEngine(f"http://me:{KEY}@127.0.0.1:notaport")
    assert KEY not in str(unreachable.value) + str(bad_port.value)
    assert "connection refused" in str(unreachable.value)
    assert redacted(f"https://{KEY}@host/v1") == "https://***@host/v1"


@pytest.mark.parametrize("key, problem", [
    ("sk-0f3a9c\nsecond-line-7e21", "a line break"),  # a key file pasted with its newline
    ("sk-0f3a9c-clé-7e21", "a non-ASCII character"),  # httpx failed with UnicodeEncodeError
])
def test_a_key_no_header_can_carry_is_refused_in_one_line_without_showing_it(key, problem, capfd):
    fake = FakeOpenAI()
    with fake_server(fake) as url:
        result = generate(url, "--api-key", key)
    captured = capfd.readouterr()
    shown = result.output + captured.out + captured.err
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit), shown
    errors = [line for line in result.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and f"error: the API key has {problem}" in errors[0]
    assert not fake.seen_paths  # refused before any request
    assert "Traceback" not in shown and "0f3a9c" not in shown and "7e21" not in shown


PORTAL = "<!DOCTYPE html><html><body><h1>Sign in to Hotel WiFi</h1></body></html>"


@pytest.mark.parametrize("paths", [("/v1/chat/completions",), ("/v1/models", "/v1/chat/completions")],
                         ids=["portal-after-sign-in-expired", "portal-from-the-start"])
def test_an_html_page_answered_with_200_is_named_as_a_web_page(paths):
    # A captive portal answers 200 text/html: the reply read "the stream ended early".
    fake = FakeOpenAI(html_page=PORTAL, html_paths=paths)
    with fake_server(fake) as url:
        result = generate(url)
    said = " ".join(result.stderr.split())  # rich wraps the line at 80 columns
    assert result.exit_code != 0 and said.count("spectui: error:") == 1, result.output
    error = said.partition("spectui: error:")[2]
    assert f"answered {paths[0]} with an HTML page (Content-Type text/html)" in error and "captive portal" in error
    assert "ended early" not in said and "Hotel" not in said and "Traceback" not in result.output


def test_requests_go_through_the_proxy_the_environment_names(monkeypatch):
    fake = FakeOpenAI()
    with fake_server(fake) as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        engine = ServerEngine("http://gpu-box.invalid:8000")  # only the proxy knows this host
        reply = run_reply(engine, PROMPT, GenerationParams(max_tokens=4), Control())
    assert reply.text and fake.seen_paths[0] == "http://gpu-box.invalid:8000/v1/models"


# --- nothing raw reaches the terminal ----------------------------------------------------------

ATTACK = "\x1b]0;pwned\x07\x1b[2J\x1b[31m"


def test_escapes_from_the_server_reach_no_terminal():
    fake = FakeOpenAI(reply=f"hello {ATTACK} world", model=f"evil{ATTACK}model")
    with fake_server(fake) as url:
        result = generate(url)
        raw = generate(url, "--raw")
        fake.error_status, fake.error_body = 500, json.dumps({"error": {"message": f"boom {ATTACK}"}})
        failed = generate(url)
    assert result.exit_code == 0, result.output
    assert "hello ␛]0;pwned␇␛[2J␛[31m world" in result.stdout
    assert not OBEYED.search(result.stdout.replace("\n", "") + result.stderr.replace("\n", ""))
    assert "evil␛]0;pwned" in result.stderr  # the served model's name, in the summary
    assert ATTACK in raw.stdout  # --raw: the exact text, for a pipe
    assert failed.exit_code != 0 and "boom ␛]0;pwned" in failed.stderr
    assert not OBEYED.search(failed.stderr.replace("\n", ""))
