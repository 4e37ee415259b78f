"""The server engine: any running OpenAI-compatible server, followed step by step.

vLLM streams one chunk per engine step, and with `return_token_ids` each chunk names its
tokens: a chunk of n tokens is n − 1 accepted drafts and one target token. That guess is
shown live; the final usage chunk's per-request record, and the Prometheus counters read
before and after the reply, check it afterwards.

Other servers (llama-server, Ollama, LM Studio, a /v1 proxy) stream text without token ids:
the reply is shown as plain target text, and the Done says the speculation was not reported,
unless the server counted the reply's drafts (llama-server, LM Studio): then γ comes from
those counts and the colours are spread over the reply, marked approximate.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from spectui.core.engine import Engine, Progress
from spectui.core.pieces import guessed_pieces
from spectui.engines.provenance import counted_step
import spectui.engines.server.transport as transport
from spectui.engines.server.bounds import draft_counts_problem, record_problem
from spectui.engines.server.chunks import ChatChunk, parse_chunk
from spectui.engines.server.outcome import k_in_record, learned_k, reply_done
from spectui.engines.server.probe import described_server, read_metrics
from spectui.engines.server.prometheus import SpecCounters
from spectui.engines.server.reader import EventReader, unless_cancelled
from spectui.engines.server.reply import ReplyState, chunk_tokens
from spectui.engines.server.request import refuses_extensions, request_body
from spectui.engines.server.transport import ServerAddress, ServerRefused, redacted
from spectui.core.errors import UsageError
from spectui.core.events import Control, Done, FinishReason, GenerationParams, Message, Step

if TYPE_CHECKING:
    from spectui.settings.options import EngineOptions

API_KEY_VARIABLES = ("SPECTUI_API_KEY", "OPENAI_API_KEY")
# OpenAI finish reasons a reply can end with normally; "abort" and "error" are failures.
FINISHED: dict[str, FinishReason] = {"stop": "stop", "length": "length", "tool_calls": "stop", "function_call": "stop"}
# A chunk of text without token ids (a server that is not vLLM) counts as one token whose id
# the client does not know.
UNKNOWN_TOKEN_ID = -1


class ServerEngine(Engine):
    """Engine protocol over HTTP. k is the server's (fixed when it started): no live controls.
    `server_k` is None while the server has not said it (then `k` reads 0)."""

    tokenizer = None  # the server holds the tokenizer; Steps carry the server's text

    def __init__(
        self,
        url: str,
        api_key: str | None = None,
        model: str | None = None,
        *,
        connect_timeout: float = transport.CONNECT_TIMEOUT_S,
        read_timeout: float = transport.READ_TIMEOUT_S,
        header_timeout: float | None = None,
    ) -> None:
        try:
            self.address = ServerAddress.parse(url)
        except ValueError as error:
            raise UsageError(f"--server: {error}") from None
        problem = transport.api_key_problem(api_key) if api_key else None
        if problem:  # refused before any request: the key is named by where it came from, never shown
            raise UsageError(f"the API key has {problem}: a key is one line of ASCII "
                             "(check --api-key, --api-key-file, SPECTUI_API_KEY or OPENAI_API_KEY)")
        self.api_key = api_key
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        # From the request to the server's response headers (a queued request waits there).
        self.header_timeout = read_timeout if header_timeout is None else header_timeout
        self.vllm_extensions = True  # return_token_ids, stop_token_ids: off once a server refuses them
        described = described_server(self.address, api_key, model, connect_timeout)
        self.model, self.info = described.model, described.info
        self.server_k: int | None = described.k

    @property
    def k(self) -> int:
        return self.server_k or 0

    @property
    def fixed_k(self) -> int | None:
        return self.server_k

    @property
    def url(self) -> str:
        return self.address.url

    # --- what the server says about itself -------------------------------------------

    def server_counters(self) -> SpecCounters | None:
        """The server-wide spec_decode totals now; None when /metrics has none or fails."""
        return self._counters()

    def _counters(self, abort: transport.Abort | None = None) -> SpecCounters | None:
        counters, _ = read_metrics(self.address, self.api_key, self.connect_timeout, abort)
        return counters

    # --- one reply ---------------------------------------------------------------------

    def stream(
        self, messages: Sequence[Message], params: GenerationParams, control: Control
    ) -> Iterator[Step | Done]:
        temperature = control.temperature  # fixed for the request: the server samples
        reply = ReplyState(started=time.perf_counter(), max_tokens=params.max_tokens)
        # Every wait on the server is Esc's to end, the response headers' included.
        before = unless_cancelled(self._counters, control)
        if not control.cancelled:
            reader = EventReader(lambda abort: self._open(messages, params, temperature, abort))
            try:
                yield from self._follow(reader, reply, params, temperature, control)
            finally:
                reader.stop()

        timing = reply.timing()
        if control.cancelled:
            yield Done("cancelled", **timing)
            return
        failure = reply.failure
        if failure is None and not reply.ended_normally and reply.finish is None:
            failure = self._dropped(reply.steps, "the stream ended early")
        if failure is None and reply.finish is not None and reply.finish not in FINISHED:
            failure = f"the server at {self.url} ended the reply with finish_reason={reply.finish!r}"
        if failure is None:
            failure = self._out_of_bounds(reply)
        if failure is not None:
            yield Done("error", error=failure, **timing)
            return
        after = unless_cancelled(self._counters, control) if before is not None else None
        yield self._done(reply, (before, after), FINISHED.get(reply.finish or "stop", "stop"), timing)

    def _follow(
        self, reader: EventReader, reply: ReplyState, params: GenerationParams, temperature: float, control: Control
    ) -> Iterator[Step]:
        """The reply's Steps as the reader brings them, until it ends, fails or Esc."""
        while not control.cancelled:
            item = reader.next()
            if item is None:
                if not reply.answered and time.perf_counter() - reply.started > self.header_timeout:
                    reply.failure = f"the server at {self.url} sent no response in {self.header_timeout:.0f} s"
                    return
                continue  # nothing from the server yet: look at Esc again
            kind, value = item
            if kind == "opened":
                reply.answered = True
                continue
            if kind in ("end", "refused", "error"):
                if kind == "refused":
                    reply.failure = str(value)
                elif kind == "error":
                    assert isinstance(value, BaseException), "the reader sends an error as (\"error\", exception)"
                    reply.failure = self._dropped(reply.steps, transport.describe(value))
                return
            if str(value).strip() == "[DONE]":
                reply.ended_normally = True
                return
            chunk = parse_chunk(str(value))
            if chunk.error is not None:
                reply.failure = f"the server at {self.url} reported an error: {chunk.error}"
                return
            reply.note(chunk)
            room = params.max_tokens - reply.num_tokens
            step = self._step(chunk, reply, temperature, room)
            if step is not None:
                yield step
            if chunk_tokens(chunk) > room:
                # The server went past the max_tokens it was sent: the client keeps its own.
                reply.finish = "length"
                return

    def _open(
        self, messages: Sequence[Message], params: GenerationParams, temperature: float, abort: transport.Abort | None = None
    ) -> transport.Stream:
        """The reply's stream. A strict server (OpenAI's own API, some proxies) refuses vLLM's
        extensions: asked once more without them, and never again on this engine."""
        def post() -> transport.Stream:
            return transport.open_stream(
                self.address,
                "/v1/chat/completions",
                request_body(self.model, messages, params, temperature, vllm_extensions=self.vllm_extensions),
                self.api_key,
                connect_timeout=self.connect_timeout,
                read_timeout=self.read_timeout,
                abort=abort,
            )

        try:
            return post()
        except ServerRefused as error:
            if not self.vllm_extensions or error.status not in (400, 422) or not refuses_extensions(str(error)):
                raise
        self.vllm_extensions = False
        return post()

    def _step(self, chunk: ChatChunk, reply: ReplyState, temperature: float, room: int) -> Step | None:
        """The chunk's tokens as a Step, at most `room` of them (None when none are left).

        vLLM names each chunk's token ids: its size says how many were drafts. Other servers
        send text alone: each chunk counts as one target token, with an unknown id."""
        text = reply.tagged_text(chunk)
        if chunk.token_ids:
            token_ids = chunk.token_ids
        elif text:
            token_ids = (UNKNOWN_TOKEN_ID,)
            reply.plain = True
        else:
            return None
        if len(token_ids) > room:  # a server that ignored max_tokens: keep what fits
            pieces = guessed_pieces(text, len(token_ids))[:room]
            token_ids, text = token_ids[:room], "".join(pieces)
        if not token_ids:
            return None
        now = time.perf_counter()
        step = counted_step(
            token_ids,
            text,
            None,
            k=0 if reply.plain else self.k,
            temperature=temperature,
            method=self.info.method,
            first=not reply.steps,
            seconds=now - reply.last_token_at,
        )
        # No tokenizer on this side: a chunk's text is split by words.
        step = replace(step, pieces=tuple(guessed_pieces(step.text, len(step.token_ids))))
        reply.add(step, now)
        return step

    def _out_of_bounds(self, reply: ReplyState) -> str | None:
        problem = record_problem(reply.record, reply.max_tokens) or draft_counts_problem(
            reply.draft_counts, reply.max_tokens
        )
        return f"the server at {self.url} sent {problem}: a protocol error" if problem else None

    def _dropped(self, steps: Sequence[Step], why: str) -> str:
        num_tokens = sum(len(step.token_ids) for step in steps)
        return f"the server at {self.url} closed the stream after {num_tokens} tokens ({why})"

    def _done(
        self,
        reply: ReplyState,
        counters: tuple[SpecCounters | None, SpecCounters | None],
        finish_reason: FinishReason,
        timing: dict,
    ) -> Done:
        """`counters`: the server's before and after the reply (None: not read)."""
        if self.server_k is None:
            # A server without a readable /metrics still names k in its per-request record.
            self.server_k = k_in_record(reply.record)
            if self.server_k is not None:
                self.info = learned_k(self.info, self.server_k)
        return reply_done(reply, counters, finish_reason, timing, server_k=self.server_k, method=self.info.method)

    def close(self) -> None:
        """Nothing is held between replies: each request opens its own connection."""


def api_key_from_environment() -> str | None:
    for variable in API_KEY_VARIABLES:
        if os.environ.get(variable):
            return os.environ[variable]
    return None


def read_api_key_file(path: str) -> str:
    """The key in a file of its own (one line); errors name the file, never its content."""
    from spectui.core.files import SMALL_FILE_LIMIT, read_capped_text

    try:  # capped, and only a regular file: a link to /dev/zero would fill memory
        text = read_capped_text(path, SMALL_FILE_LIMIT).strip()
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or type(error).__name__
        raise UsageError(f"--api-key-file {path}: cannot read it ({reason})") from None
    if not text or len(text.splitlines()) != 1:
        raise UsageError(f"--api-key-file {path}: expected one line holding the key")
    return text


def api_key_for(options: EngineOptions) -> str | None:
    """--api-key, else --api-key-file, else SPECTUI_API_KEY / OPENAI_API_KEY."""
    if options.api_key:
        return options.api_key
    if options.api_key_file:
        return read_api_key_file(options.api_key_file)
    return api_key_from_environment()


def build_server_engine(options: EngineOptions, progress: Progress | None = None) -> ServerEngine:
    """A ServerEngine from CLI options (`--server`, `--api-key`, `--model`)."""
    if not options.server:
        raise UsageError("--engine server needs --server URL (e.g. http://127.0.0.1:8000)")
    try:
        ServerAddress.parse(options.server)  # a bad URL is one line before anything is shown
    except ValueError as error:
        raise UsageError(f"--server: {error}") from None
    shown = f"connecting to {redacted(options.server)}"  # a password or query key stays unshown
    if progress is not None:
        progress(shown, 0, 1)
    engine = ServerEngine(options.server, api_key=api_key_for(options), model=options.model)
    if progress is not None:
        progress(shown, 1, 1)
    return engine
