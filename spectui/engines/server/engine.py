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
from dataclasses import dataclass, field, replace

from spectui.core.engine import SPECULATION_NOT_REPORTED, TEMPERATURE, Capabilities, Engine, EngineInfo
from spectui.core.pieces import guessed_pieces
from spectui.core.reasoning import THINK_CLOSE, THINK_OPEN
from spectui.core.safe_text import safe_line
from spectui.engines.provenance import counted_step
import spectui.engines.server.transport as transport
from spectui.engines.server.bounds import draft_counts_problem, record_problem
from spectui.engines.server.chunks import ChatChunk, DraftCounts, parse_chunk
from spectui.engines.server.prometheus import (
    PrometheusFormatError,
    SpecCounters,
    is_vllm_exposition,
    parse_samples,
    spec_counters,
)
from spectui.engines.server.reader import EventReader, unless_cancelled
from spectui.engines.server.reconcile import reconcile, spread_counts
from spectui.engines.server.transport import ServerAddress, ServerError, ServerRefused, redacted
from spectui.core.errors import UsageError
from spectui.core.events import K_MAX, Control, Done, FinishReason, GenerationParams, Message, Step

API_KEY_VARIABLES = ("SPECTUI_API_KEY", "OPENAI_API_KEY")
# vLLM's speculative_config "method" -> spectui's --method
SPECTUI_METHOD = {"draft_model": "draft"}
# OpenAI finish reasons a reply can end with normally; "abort" and "error" are failures.
FINISHED = {"stop": "stop", "length": "length", "tool_calls": "stop", "function_call": "stop"}
# A chunk of text without token ids (a server that is not vLLM) counts as one token whose id
# the client does not know.
UNKNOWN_TOKEN_ID = -1
SPECULATION_COUNTED = "counted by the server per reply"
VLLM_EXTENSIONS = ("return_token_ids", "stop_token_ids")


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
        self.api_key = api_key
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        # From the request to the server's response headers (a queued request waits there).
        self.header_timeout = read_timeout if header_timeout is None else header_timeout
        self.vllm_extensions = True  # return_token_ids, stop_token_ids: off once a server refuses them
        try:
            served = self._served_models()
        except ServerError as error:
            raise UsageError(str(error)) from None
        if model is not None and served and model not in served:
            raise UsageError(f"the server at {self.url} serves {', '.join(served)}, not {model}")
        self.model = model or (served[0] if served else None)
        if self.model is None:
            raise UsageError(f"the server at {self.url} lists no model at /v1/models")
        self.server_k: int | None = self._k_from_metrics()
        server_config = self._server_config()
        config = server_config.get("speculative_config")
        config = config if isinstance(config, dict) else None
        if self.server_k is None and config is not None:
            configured = config.get("num_speculative_tokens") or 0
            self.server_k = configured if isinstance(configured, int) and 0 <= configured <= K_MAX else None
        self.info = EngineInfo(
            name="server",
            target=safe_line(self.model),  # shown; the requests name the model as served
            draft=draft_name(config),
            method=method_name(config, self.server_k),
            dtype=dtype_name(server_config),
            device=self.address.host,
            # The request names a temperature; k is the server's own, fixed when it started
            capabilities=Capabilities(exact_provenance=False, reports_speculation=self.server_k is not None,
                                      reply_controls=frozenset({TEMPERATURE})),
        )

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

    def _served_models(self) -> list[str]:
        listing = transport.get_json(self.address, "/v1/models", self.api_key, timeout=self.connect_timeout)
        models = listing.get("data", []) if isinstance(listing, dict) else []
        # LoRA adapters are listed with their base as parent; the base model comes first.
        named = [m for m in models if isinstance(m, dict) and isinstance(m.get("id"), str)]
        bases = [m["id"] for m in named if not m.get("parent")]
        return bases or [m["id"] for m in named]

    def server_counters(self) -> SpecCounters | None:
        """The server-wide spec_decode totals now; None when /metrics has none or fails."""
        return self._counters()

    def _counters(self, abort: transport.Abort | None = None) -> SpecCounters | None:
        counters, _ = self._read_metrics(abort)
        return counters

    def _read_metrics(self, abort: transport.Abort | None = None) -> tuple[SpecCounters | None, bool]:
        """(counters, whether the text came from vLLM); (None, False) when unreadable."""
        try:
            text = transport.get(self.address, "/metrics", self.api_key, timeout=self.connect_timeout, abort=abort)
            samples = parse_samples(text.decode("utf-8", "replace"))
        except (ServerError, PrometheusFormatError):
            return None, False
        return spec_counters(samples), is_vllm_exposition(samples)

    def _k_from_metrics(self) -> int | None:
        """vLLM registers one per-position counter per draft position at start, so their
        number is k before any request ran. No spec_decode series on a vLLM server: k = 0."""
        counters, from_vllm = self._read_metrics()
        if counters is not None and counters.num_positions:
            return counters.num_positions
        return 0 if from_vllm and counters is None else None

    def _server_config(self) -> dict:
        """vLLM's whole config, from /server_info: only servers started with
        VLLM_SERVER_DEV_MODE=1 have it; elsewhere the method, draft and dtype stay unknown."""
        try:
            value = transport.get_json(
                self.address, "/server_info?config_format=json", self.api_key, timeout=self.connect_timeout
            )
        except ServerError:
            return {}
        config = value.get("vllm_config") if isinstance(value, dict) else None
        return config if isinstance(config, dict) else {}

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
        self, reader: EventReader, reply: "ReplyState", params: GenerationParams, temperature: float, control: Control
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
                self._request_body(messages, params, temperature),
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

    def _request_body(self, messages: Sequence[Message], params: GenerationParams, temperature: float) -> dict:
        body: dict = {
            "model": self.model,
            "messages": [dict(message) for message in messages],
            "stream": True,
            "stream_options": {"include_usage": True},
            "max_tokens": params.max_tokens,
            "temperature": temperature,
            "top_p": params.top_p,
        }
        if self.vllm_extensions:
            body["return_token_ids"] = True  # one chunk's ids = one engine step
            if params.stop_token_ids:
                body["stop_token_ids"] = list(params.stop_token_ids)
        if params.seed is not None:
            body["seed"] = params.seed
        return body

    def _step(self, chunk: ChatChunk, reply: "ReplyState", temperature: float, room: int) -> Step | None:
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

    def _out_of_bounds(self, reply: "ReplyState") -> str | None:
        problem = record_problem(reply.record, reply.max_tokens) or draft_counts_problem(
            reply.draft_counts, reply.max_tokens
        )
        return f"the server at {self.url} sent {problem}: a protocol error" if problem else None

    def _dropped(self, steps: Sequence[Step], why: str) -> str:
        num_tokens = sum(len(step.token_ids) for step in steps)
        return f"the server at {self.url} closed the stream after {num_tokens} tokens ({why})"

    def _done(
        self,
        reply: "ReplyState",
        counters: tuple[SpecCounters | None, SpecCounters | None],
        finish_reason: FinishReason,
        timing: dict,
    ) -> Done:
        """`counters`: the server's before and after the reply (None: not read)."""
        self._learn_k(reply.record)
        engine_stats: dict = dict(reply.record or {})
        before, after = counters
        if before is not None and after is not None:
            # Server-wide: other clients' requests in the same interval count too.
            engine_stats.update((after - before).as_stats())
        engine_stats["server_k"] = self.server_k
        if reply.usage and isinstance(reply.usage.get("completion_tokens"), int):
            # The server's own count: a lost chunk would show as a mismatch with the steps.
            engine_stats["completion_tokens"] = reply.usage["completion_tokens"]
        if reply.plain:
            result = spread_counts(reply.steps, reply.draft_counts, method=self.info.method)
            if reply.draft_counts is None:
                engine_stats["speculation"] = SPECULATION_NOT_REPORTED
            else:
                engine_stats["speculation"] = SPECULATION_COUNTED
                engine_stats["server_num_draft_tokens"] = reply.draft_counts.drafted
                engine_stats["server_num_accepted_tokens"] = reply.draft_counts.accepted
        else:
            result = reconcile(reply.steps, reply.record, k=self.k, method=self.info.method)
        if result.ambiguous:
            engine_stats["recovered_ambiguous"] = True
        # spectui sends stop token ids, never stop strings: a "stop" reply from vLLM ends with its
        # stop token. A server that sends text alone never shows it.
        last = reply.steps[-1].token_ids[-1] if reply.steps and not reply.plain else None
        return Done(
            finish_reason,
            stop_token_id=last if finish_reason == "stop" else None,
            engine_stats=engine_stats,
            approximate=result.approximate,
            restated_steps=result.restated_steps,
            **timing,
        )

    def _learn_k(self, record: dict | None) -> None:
        """A server without a readable /metrics still names k in its per-request record."""
        if self.server_k is not None or not record:
            return
        k = record.get("num_spec_tokens")
        if not isinstance(k, int) or isinstance(k, bool) or not 0 <= k <= K_MAX:
            return  # absent or garbled: k stays unknown, as without /metrics
        self.server_k = k
        if self.info.method == "server" and k == 0:
            self.info = replace(self.info, method="none")

    def close(self) -> None:
        """Nothing is held between replies: each request opens its own connection."""


def refuses_extensions(message: str) -> bool:
    return any(name in message for name in VLLM_EXTENSIONS)


def chunk_tokens(chunk: ChatChunk) -> int:
    """Tokens a chunk brings: its ids, or one for text without ids."""
    return len(chunk.token_ids) or (1 if chunk.text or chunk.reasoning else 0)


@dataclass
class ReplyState:
    """What one reply's stream has said so far."""

    started: float
    max_tokens: int = 2**31  # what the request allowed: the server's numbers are bounded by it
    steps: list[Step] = field(default_factory=list)
    num_tokens: int = 0
    prompt_ids: tuple[int, ...] = ()
    record: dict | None = None  # vLLM's per-request speculative_decoding record
    usage: dict | None = None
    draft_counts: DraftCounts | None = None  # llama-server's or LM Studio's counts
    finish: str | None = None
    ended_normally: bool = False  # [DONE] came
    answered: bool = False  # the server sent its response headers
    plain: bool = False  # text without token ids: a server that is not vLLM
    failure: str | None = None
    first_token_at: float | None = None
    last_token_at: float = 0.0
    thinking: bool = False  # inside the reasoning field: the <think> tag is open
    thought: str = ""  # the reasoning so far

    def __post_init__(self) -> None:
        self.last_token_at = self.started

    def note(self, chunk: ChatChunk) -> None:
        self.prompt_ids = chunk.prompt_token_ids or self.prompt_ids
        self.record = chunk.speculative_decoding or self.record
        self.usage = chunk.usage or self.usage
        self.draft_counts = chunk.draft_counts or self.draft_counts
        self.finish = chunk.finish_reason or self.finish

    def tagged_text(self, chunk: ChatChunk) -> str:
        """The chunk's text, a reasoning field's between <think> tags on their own lines (as a
        reasoning model writes them itself), so the reply keeps its thinking apart."""
        text = ""
        if chunk.reasoning:
            if not self.thinking:
                text, self.thinking = THINK_OPEN + "\n", True
                self.thought = ""
            reasoning = chunk.reasoning if self.thought else chunk.reasoning.lstrip("\n")
            self.thought += reasoning
            text += reasoning
        if chunk.text and self.thinking:
            text += ("" if self.thought.endswith("\n") else "\n") + THINK_CLOSE + "\n\n"
            self.thinking = False
            return text + chunk.text.lstrip("\n")
        return text + chunk.text

    def add(self, step: Step, now: float) -> None:
        self.steps.append(step)
        self.num_tokens += len(step.token_ids)
        self.first_token_at = self.first_token_at or now
        self.last_token_at = now

    def timing(self) -> dict:
        return {
            "prompt_token_ids": self.prompt_ids,
            "seconds": self.last_token_at - self.started,
            "time_to_first_token": (self.first_token_at - self.started) if self.first_token_at else 0.0,
        }


def draft_name(config: dict | None) -> str | None:
    """The draft model's name, when a model drafts (n-gram lookup has none)."""
    if not config or config.get("method") in ("ngram", "suffix", None):
        return None
    model = config.get("model")
    return str(model) if model else None


def dtype_name(server_config: dict) -> str:
    model_config = server_config.get("model_config")
    dtype = model_config.get("dtype") if isinstance(model_config, dict) else None
    return str(dtype).removeprefix("torch.") if dtype else "?"


def method_name(config: dict | None, k: int | None) -> str:
    if k == 0:
        return "none"
    if config and config.get("method"):
        method = str(config["method"])
        return SPECTUI_METHOD.get(method, method)
    return "server"  # speculating (or maybe), by a method this client cannot see


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


def api_key_for(options) -> str | None:
    """--api-key, else --api-key-file, else SPECTUI_API_KEY / OPENAI_API_KEY."""
    if options.api_key:
        return options.api_key
    if options.api_key_file:
        return read_api_key_file(options.api_key_file)
    return api_key_from_environment()


def build_server_engine(options, progress=None) -> ServerEngine:
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
