"""A plain OpenAI-compatible chat server on loopback, as llama-server, Ollama's /v1 or LM Studio
answer: text chunks without token ids, no vLLM metrics. Its quirks are switches, so the tests
(and a person trying `spectui chat --engine server`) can meet each kind of server.

    python tests/fake_openai_server.py --port 8765          # then:
    spectui chat --engine server --server http://127.0.0.1:8765

Stdlib only: tests/test_server_openai.py imports `FakeOpenAI` and `fake_server`.
"""

from __future__ import annotations

import argparse
import base64
import json
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

DEFAULT_REPLY = (
    "Speculative decoding lets a small draft model propose tokens that the large model "
    "checks in one pass, so the reply comes faster and stays the same."
)


@dataclass
class FakeOpenAI:
    """What the server does; the handler reads it, tests change it and read what it saw."""

    model: str = "plain-model"
    reply: str = DEFAULT_REPLY
    delay_s: float = 0.0  # between chunks
    draft_counts: str | None = None  # "llama" (timings) or "lmstudio" (stats) on the last chunk
    counts: tuple[int, int] = (0, 0)  # (drafted, accepted) for draft_counts
    ignore_max_tokens: bool = False  # keep sending words until `endless_limit` or the client leaves
    endless_limit: int = 500
    stall_after: int | None = None  # send this many chunks, then nothing until stopped
    huge_line_mb: int = 0  # send a `data:` line this long, with no newline
    token_ids: bool = False  # name each chunk's one token id, as vLLM does
    reasoning: str = ""  # sent word by word in delta.reasoning_content before the reply, as a reasoning parser does
    metrics: str | None = None  # /metrics body (None: 404, as most servers)
    error_status: int | None = None  # answer the chat with this status and `error_body`
    error_body: str = ""
    require_auth: str | None = None  # the exact Authorization header wanted
    strict: bool = False  # refuse fields OpenAI's API does not know (vLLM's return_token_ids)
    # A hostile server (tests/test_hostile_server.py):
    last_extra: dict | None = None  # merged into the last chunk (timings, metrics, usage…)
    events: list[str] | None = None  # these `data:` payloads after the first chunk, not the reply
    models_body: str | None = None  # the /v1/models body as sent, in place of the listing
    html_page: str | None = None  # a captive portal: this page, 200 text/html, to the paths in html_paths
    html_paths: tuple[str, ...] = ("/v1/models", "/v1/chat/completions")
    withhold_headers: bool = False  # read the chat request, then answer nothing until stopped
    chat_requests: threading.Event = field(default_factory=threading.Event)  # set at each chat POST
    seen_auth: list = field(default_factory=list)
    seen_paths: list = field(default_factory=list)
    seen_bodies: list = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    fake: FakeOpenAI

    def log_message(self, *args) -> None:
        pass

    def _path(self) -> str:
        # A request through a proxy names the whole URL: keep its path.
        return urlsplit(self.path).path if "://" in self.path else self.path.split("?")[0]

    def _allowed(self) -> bool:
        self.fake.seen_paths.append(self.path)
        self.fake.seen_auth.append(self.headers.get("Authorization"))
        if self.fake.require_auth is not None and self.headers.get("Authorization") != self.fake.require_auth:
            self._json(401, {"error": {"message": "missing or wrong key"}})
            return False
        if self.fake.html_page is not None and self._path() in self.fake.html_paths:
            self._body(200, self.fake.html_page.encode(), "text/html; charset=utf-8")
            return False
        return True

    def do_GET(self) -> None:
        if not self._allowed():
            return
        path = self._path()
        if path == "/v1/models" and self.fake.models_body is not None:
            self._body(200, self.fake.models_body.encode(), "application/json")
        elif path == "/v1/models":
            self._json(200, {"object": "list", "data": [{"id": self.fake.model, "object": "model"}]})
        elif path == "/metrics" and self.fake.metrics is not None:
            self._body(200, self.fake.metrics.encode(), "text/plain")
        else:
            self._json(404, {"error": {"message": f"no {path}"}})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
        self.fake.seen_bodies.append(body)
        self.fake.chat_requests.set()
        if not self._allowed():
            return
        if self.fake.withhold_headers:
            self.fake.stop.wait()
            return
        unknown = sorted(set(body) & {"return_token_ids", "stop_token_ids"})
        if self.fake.strict and unknown:
            message = f"Unrecognized request argument supplied: {unknown[0]}"
            self._json(400, {"error": {"message": message, "type": "invalid_request_error"}})
            return
        if self.fake.error_status is not None:
            self._body(self.fake.error_status, self.fake.error_body.encode(), "application/json")
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            self._stream(body)
        except (BrokenPipeError, ConnectionResetError, OSError):
            pass  # the client went away: what a server sees when Esc is pressed

    def _stream(self, body: dict) -> None:
        fake = self.fake
        words = [word + " " for word in fake.reply.split(" ")]
        words[-1] = words[-1][:-1]
        if fake.ignore_max_tokens:
            words = [words[i % len(words)] for i in range(fake.endless_limit)]
        else:
            words = words[: body.get("max_tokens") or len(words)]
        self._event({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
        if fake.events is not None:
            for payload in fake.events:
                self._chunk(f"data: {payload}\n\n".encode())
            self._chunk(b"data: [DONE]\n\n")
            self._chunk(b"")
            return
        if fake.huge_line_mb:
            self._chunk(b"data: {\"choices\": [{\"delta\": {\"content\": \"")
            block = b"x" * 2**20
            for _ in range(fake.huge_line_mb):
                if fake.stop.is_set():
                    return
                self._chunk(block)
        thoughts = [(word + " ", "reasoning_content") for word in fake.reasoning.split(" ")] if fake.reasoning else []
        for number, (word, delta_field) in enumerate(thoughts + [(word, "content") for word in words]):
            if fake.stall_after is not None and number >= fake.stall_after:
                fake.stop.wait()
                return
            choice = {"index": 0, "delta": {delta_field: word}, "finish_reason": None}
            if fake.token_ids:
                choice["token_ids"] = [1000 + number]
            self._event({"choices": [choice]})
            if fake.delay_s:
                time.sleep(fake.delay_s)
        last: dict = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        drafted, accepted = fake.counts
        if fake.draft_counts == "llama":
            last["timings"] = {"predicted_n": len(words), "draft_n": drafted, "draft_n_accepted": accepted}
        elif fake.draft_counts == "lmstudio":
            last["stats"] = {"total_draft_tokens_count": drafted, "accepted_draft_tokens_count": accepted,
                             "rejected_draft_tokens_count": drafted - accepted}
        last.update(fake.last_extra or {})
        self._event(last)
        self._chunk(b"data: [DONE]\n\n")
        self._chunk(b"")

    def _event(self, value: dict) -> None:
        self._chunk(f"data: {json.dumps(value)}\n\n".encode())

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _json(self, status: int, value: dict) -> None:
        self._body(status, json.dumps(value).encode(), "application/json")

    def _body(self, status: int, body: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class fake_server:
    """`with fake_server(fake) as url:` a server on a free loopback port, in a thread."""

    def __init__(self, fake: FakeOpenAI | None = None, port: int = 0) -> None:
        self.fake = fake or FakeOpenAI()
        handler = type("FakeHandler", (Handler,), {"fake": self.fake})
        self.server = ThreadingHTTPServer(("127.0.0.1", port), handler)
        self.server.daemon_threads = True

    def __enter__(self) -> str:
        threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True).start()
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __exit__(self, *exc) -> None:
        self.fake.stop.set()
        self.server.shutdown()
        self.server.server_close()


def basic_auth(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--delay", type=float, default=0.05, help="seconds between chunks")
    parser.add_argument("--llama-counts", metavar="DRAFTED,ACCEPTED", help="report them as llama-server's timings")
    arguments = parser.parse_args()
    fake = FakeOpenAI(delay_s=arguments.delay)
    if arguments.llama_counts:
        drafted, accepted = (int(n) for n in arguments.llama_counts.split(","))
        fake.draft_counts, fake.counts = "llama", (drafted, accepted)
    with fake_server(fake, arguments.port) as url:
        print(f"plain OpenAI-compatible server at {url} (Ctrl+C stops it)", flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
