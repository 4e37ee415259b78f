"""The server engine: a running vLLM OpenAI-compatible server, followed step by step.

vLLM streams one chunk per engine step, and with `return_token_ids` each chunk names its
tokens: a chunk of n tokens is n − 1 accepted drafts and one target token. That guess is
shown live; the final usage chunk's per-request record, and the Prometheus counters read
before and after the reply, check it afterwards.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path

from spectui.core.engine import Capabilities, Engine, EngineInfo
from spectui.core.pieces import guessed_pieces
from spectui.engines.provenance import counted_step
from spectui.engines.server import transport
from spectui.engines.server.chunks import ChatChunk, parse_chunk
from spectui.engines.server.prometheus import (
    PrometheusFormatError,
    SpecCounters,
    is_vllm_exposition,
    parse_samples,
    spec_counters,
)
from spectui.engines.server.reconcile import reconcile
from spectui.engines.server.sse import iter_sse_data
from spectui.engines.server.transport import ServerAddress, ServerError
from spectui.core.errors import UsageError
from spectui.core.events import Control, Done, FinishReason, GenerationParams, Message, Step

API_KEY_VARIABLES = ("SPECTUI_API_KEY", "OPENAI_API_KEY")
# vLLM's speculative_config "method" -> spectui's --method
SPECTUI_METHOD = {"draft_model": "draft"}
# OpenAI finish reasons a reply can end with normally; "abort" and "error" are failures.
FINISHED = {"stop": "stop", "length": "length", "tool_calls": "stop", "function_call": "stop"}


class ServerEngine(Engine):
    """Engine protocol over HTTP. k is the server's (fixed when it started): no live controls."""

    tokenizer = None  # the server holds the tokenizer; Steps carry the server's text

    def __init__(
        self,
        url: str,
        api_key: str | None = None,
        model: str | None = None,
        *,
        connect_timeout: float = transport.CONNECT_TIMEOUT_S,
        read_timeout: float = transport.READ_TIMEOUT_S,
    ) -> None:
        try:
            self.address = ServerAddress.parse(url)
        except ValueError as error:
            raise UsageError(f"--server: {error}") from None
        self.api_key = api_key
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        try:
            served = self._served_models()
        except ServerError as error:
            raise UsageError(str(error)) from None
        if model is not None and served and model not in served:
            raise UsageError(f"the server at {self.url} serves {', '.join(served)}, not {model}")
        self.model = model or (served[0] if served else None)
        if self.model is None:
            raise UsageError(f"the server at {self.url} lists no model at /v1/models")
        self.k: int | None = self._k_from_metrics()
        server_config = self._server_config()
        config = server_config.get("speculative_config")
        config = config if isinstance(config, dict) else None
        if self.k is None and config is not None:
            self.k = int(config.get("num_speculative_tokens") or 0)
        self.info = EngineInfo(
            name="server",
            target=self.model,
            draft=draft_name(config),
            method=method_name(config, self.k),
            dtype=dtype_name(server_config),
            device=self.address.host,
            capabilities=Capabilities(exact_provenance=False),
        )

    @property
    def fixed_k(self) -> int | None:
        return self.k

    @property
    def url(self) -> str:
        return self.address.url

    # --- what the server says about itself -------------------------------------------

    def _served_models(self) -> list[str]:
        listing = transport.get_json(self.address, "/v1/models", self.api_key, timeout=self.connect_timeout)
        models = listing.get("data", []) if isinstance(listing, dict) else []
        # LoRA adapters are listed with their base as parent; the base model comes first.
        bases = [m["id"] for m in models if isinstance(m, dict) and "id" in m and not m.get("parent")]
        return bases or [m["id"] for m in models if isinstance(m, dict) and "id" in m]

    def server_counters(self) -> SpecCounters | None:
        """The server-wide spec_decode totals now; None when /metrics has none or fails."""
        counters, _ = self._read_metrics()
        return counters

    def _read_metrics(self) -> tuple[SpecCounters | None, bool]:
        """(counters, whether the text came from vLLM); (None, False) when unreadable."""
        try:
            text = transport.get(self.address, "/metrics", self.api_key, timeout=self.connect_timeout)
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
        before = self.server_counters()
        payload = self._request_body(messages, params, temperature)
        started = time.perf_counter()
        try:
            connection, response = transport.open_stream(
                self.address,
                "/v1/chat/completions",
                payload,
                self.api_key,
                connect_timeout=self.connect_timeout,
                read_timeout=self.read_timeout,
            )
        except ServerError as error:
            yield Done("error", error=str(error))
            return

        k = self.k or 0
        steps: list[Step] = []
        prompt_ids: tuple[int, ...] = ()
        record: dict | None = None
        usage: dict | None = None
        finish: str | None = None
        ended_normally = False
        first_token_at: float | None = None
        last_token_at = started
        failure: str | None = None
        try:
            for data in iter_sse_data(transport.read_chunks(response)):
                if control.cancelled:
                    break
                if data.strip() == "[DONE]":
                    ended_normally = True
                    break
                chunk = parse_chunk(data)
                if chunk.error is not None:
                    failure = f"the server at {self.url} reported an error: {chunk.error}"
                    break
                prompt_ids = chunk.prompt_token_ids or prompt_ids
                record = chunk.speculative_decoding or record
                usage = chunk.usage or usage
                finish = chunk.finish_reason or finish
                if chunk.token_ids:
                    now = time.perf_counter()
                    step = self._step(chunk, k, temperature, first=not steps, seconds=now - last_token_at)
                    first_token_at = first_token_at or now
                    last_token_at = now
                    steps.append(step)
                    yield step
                    if control.cancelled:  # seen now, not when the next chunk arrives
                        break
        except Exception as error:  # network or protocol: the chat must survive it
            failure = self._dropped(steps, transport.describe(error))
        finally:
            response.close()
            connection.close()

        seconds = last_token_at - started
        timing = {
            "prompt_token_ids": prompt_ids,
            "seconds": seconds,
            "time_to_first_token": (first_token_at - started) if first_token_at else 0.0,
        }
        if control.cancelled:
            yield Done("cancelled", **timing)
            return
        if failure is None and not ended_normally and finish is None:
            failure = self._dropped(steps, "the stream ended early")
        if failure is None and finish is not None and finish not in FINISHED:
            failure = f"the server at {self.url} ended the reply with finish_reason={finish!r}"
        if failure is not None:
            yield Done("error", error=failure, **timing)
            return
        yield self._done(steps, record, usage, before, FINISHED.get(finish or "stop", "stop"), timing)

    def _request_body(self, messages: Sequence[Message], params: GenerationParams, temperature: float) -> dict:
        body: dict = {
            "model": self.model,
            "messages": [dict(message) for message in messages],
            "stream": True,
            "stream_options": {"include_usage": True},
            "return_token_ids": True,  # vLLM's extension: one chunk's ids = one engine step
            "max_tokens": params.max_tokens,
            "temperature": temperature,
            "top_p": params.top_p,
        }
        if params.seed is not None:
            body["seed"] = params.seed
        if params.stop_token_ids:
            body["stop_token_ids"] = list(params.stop_token_ids)
        return body

    def _step(self, chunk: ChatChunk, k: int, temperature: float, *, first: bool, seconds: float) -> Step:
        step = counted_step(
            chunk.token_ids,
            chunk.text,
            None,
            k=k,
            temperature=temperature,
            method=self.info.method,
            first=first,
            seconds=seconds,
        )
        # No tokenizer on this side: a chunk's text is split by words.
        return replace(step, pieces=tuple(guessed_pieces(step.text, len(step.token_ids))))

    def _dropped(self, steps: Sequence[Step], why: str) -> str:
        num_tokens = sum(len(step.token_ids) for step in steps)
        return f"the server at {self.url} closed the stream after {num_tokens} tokens ({why})"

    def _done(
        self,
        steps: Sequence[Step],
        record: dict | None,
        usage: dict | None,
        before: SpecCounters | None,
        finish_reason: FinishReason,
        timing: dict,
    ) -> Done:
        self._learn_k(record)
        result = reconcile(steps, record, k=self.k or 0, method=self.info.method)
        engine_stats: dict = dict(record or {})
        after = self.server_counters() if before is not None else None
        if before is not None and after is not None:
            # Server-wide: other clients' requests in the same interval count too.
            engine_stats.update((after - before).as_stats())
        engine_stats["server_k"] = self.k
        if result.ambiguous:
            engine_stats["recovered_ambiguous"] = True
        if usage and isinstance(usage.get("completion_tokens"), int):
            # The server's own count: a lost chunk would show as a mismatch with the steps.
            engine_stats["completion_tokens"] = usage["completion_tokens"]
        # spectui sends stop token ids, never stop strings: a "stop" reply ends with its stop token.
        last = steps[-1].token_ids[-1] if steps else None
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
        if self.k is not None or not record:
            return
        k = record.get("num_spec_tokens")
        if not isinstance(k, int) or isinstance(k, bool) or not 0 <= k <= 64:
            return  # absent or garbled: k stays unknown, as without /metrics
        self.k = k
        if self.info.method == "server" and self.k == 0:
            self.info = replace(self.info, method="none")

    def close(self) -> None:
        """Nothing is held between replies: each request opens its own connection."""


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
    try:
        text = Path(path).expanduser().read_text(encoding="utf-8").strip()
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
    if progress is not None:
        progress(f"connecting to {options.server}", 0, 1)
    engine = ServerEngine(options.server, api_key=api_key_for(options), model=options.model)
    if progress is not None:
        progress(f"connecting to {options.server}", 1, 1)
    return engine
