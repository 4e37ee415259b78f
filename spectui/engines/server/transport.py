"""HTTP to the server with http.client: one connection per request, errors as one line.

A fresh connection per request keeps a dead or restarted server simple to notice: nothing
pooled can be stale. Every failure becomes a `ServerError` whose text names the URL.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
from dataclasses import dataclass
from urllib.parse import urlsplit

CONNECT_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 60.0


class ServerError(Exception):
    """Something about the server, in one line the user can act on."""


class ServerRefused(ServerError):
    """The server answered with an error status."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class ServerAddress:
    scheme: str
    host: str
    port: int
    prefix: str  # path before /v1 and /metrics (a reverse proxy's mount point), "" usually

    @classmethod
    def parse(cls, url: str) -> "ServerAddress":
        """Accepts `http://host:port`, `host:port`, and the OpenAI-style base `…/v1`."""
        text = url.strip()
        if "://" not in text:
            text = "http://" + text
        parts = urlsplit(text)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{url!r} is not an http(s) URL, e.g. http://127.0.0.1:8000")
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            raise ValueError(f"{url!r} has a port that is not a number") from None
        prefix = parts.path.rstrip("/").removesuffix("/v1")
        return cls(parts.scheme, parts.hostname, port, prefix)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}{self.prefix}"

    def connect(self, connect_timeout: float, read_timeout: float) -> http.client.HTTPConnection:
        """An open connection: connect errors surface here, not at the first request."""
        if self.scheme == "https":
            connection: http.client.HTTPConnection = http.client.HTTPSConnection(
                self.host, self.port, timeout=connect_timeout, context=ssl.create_default_context()
            )
        else:
            connection = http.client.HTTPConnection(self.host, self.port, timeout=connect_timeout)
        try:
            connection.connect()
        except OSError as error:
            connection.close()
            raise ServerError(unreachable_message(self.url, error)) from None
        # A reply can pause longer than a connect may take (prefill of a long prompt).
        assert connection.sock is not None
        connection.sock.settimeout(read_timeout)
        return connection


def unreachable_message(url: str, error: BaseException) -> str:
    if isinstance(error, socket.gaierror):
        return f"cannot reach the server at {url}: unknown host"
    if isinstance(error, ConnectionRefusedError):
        return f"cannot reach the server at {url}: connection refused (is vLLM running there?)"
    if isinstance(error, TimeoutError):
        return f"cannot reach the server at {url}: no answer in time"
    if isinstance(error, ssl.SSLError):
        return f"cannot reach the server at {url}: TLS failed ({error.reason or error})"
    reason = getattr(error, "strerror", None) or str(error) or type(error).__name__
    return f"cannot reach the server at {url}: {reason}"


def headers(api_key: str | None, *, json_body: bool = False) -> dict[str, str]:
    result = {"Accept": "application/json, text/event-stream", "User-Agent": "spectui"}
    if api_key:
        result["Authorization"] = f"Bearer {api_key}"
    if json_body:
        result["Content-Type"] = "application/json"
    return result


def refusal(url: str, path: str, status: int, body: bytes) -> ServerRefused:
    if status == 401 or status == 403:
        return ServerRefused(
            f"the server at {url} refused the API key (HTTP {status}): set --api-key or SPECTUI_API_KEY",
            status,
        )
    if status == 404:
        return ServerRefused(f"the server at {url} has no {path} (HTTP 404): is it a vLLM server?", status)
    detail = error_message(body) or http.client.responses.get(status, "")
    return ServerRefused(f"the server at {url} answered HTTP {status} to {path}: {detail}", status)


def error_message(body: bytes | str) -> str:
    """The message of an OpenAI/vLLM error body, on one line; "" when there is none."""
    try:
        value = json.loads(body)
    except (ValueError, TypeError):
        text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
        return one_line(text)
    return one_line(message_of(value))


def message_of(value: object) -> str:
    if isinstance(value, dict):
        inner = value.get("error", value)
        if isinstance(inner, dict):
            return str(inner.get("message") or inner.get("detail") or "")
        if inner is not value:
            return str(inner)
        return str(value.get("message") or value.get("detail") or "")
    return str(value)


def one_line(text: str, limit: int = 200) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def get(
    address: ServerAddress,
    path: str,
    api_key: str | None,
    *,
    timeout: float = CONNECT_TIMEOUT_S,
) -> bytes:
    """The body of a GET answered 200; any other outcome is a ServerError."""
    connection = address.connect(timeout, timeout)
    try:
        connection.request("GET", address.prefix + path, headers=headers(api_key))
        response = connection.getresponse()
        body = response.read()
    except (OSError, http.client.HTTPException) as error:
        raise ServerError(f"the server at {address.url} failed to answer {path}: {describe(error)}") from None
    finally:
        connection.close()
    if response.status != 200:
        raise refusal(address.url, path, response.status, body)
    return body


def get_json(address: ServerAddress, path: str, api_key: str | None, *, timeout: float = CONNECT_TIMEOUT_S):
    body = get(address, path, api_key, timeout=timeout)
    try:
        return json.loads(body)
    except ValueError:
        raise ServerError(f"the server at {address.url} sent {path} that is not JSON") from None


def open_stream(
    address: ServerAddress,
    path: str,
    payload: dict,
    api_key: str | None,
    *,
    connect_timeout: float,
    read_timeout: float,
) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
    """POST `payload` and return the open response once the server accepted it (status 200).

    The caller reads the body and closes the connection.
    """
    connection = address.connect(connect_timeout, read_timeout)
    try:
        connection.request(
            "POST", address.prefix + path, body=json.dumps(payload).encode(), headers=headers(api_key, json_body=True)
        )
        response = connection.getresponse()
        if response.status != 200:
            body = response.read()
            raise refusal(address.url, path, response.status, body)
    except ServerError:
        connection.close()
        raise
    except (OSError, http.client.HTTPException) as error:
        connection.close()
        raise ServerError(f"the server at {address.url} failed to answer {path}: {describe(error)}") from None
    return connection, response


def read_chunks(response: http.client.HTTPResponse, size: int = 65536):
    """The body as it arrives (read1 returns what is there, not `size` bytes)."""
    while True:
        chunk = response.read1(size)
        if not chunk:
            return
        yield chunk


def describe(error: BaseException) -> str:
    """A network error in a few words (the exception classes say more than their text)."""
    if isinstance(error, TimeoutError):
        return "no data in time (read timeout)"
    if isinstance(error, ConnectionResetError):
        return "connection reset"
    if isinstance(error, http.client.IncompleteRead):
        return "connection closed mid-chunk"
    if isinstance(error, http.client.RemoteDisconnected):
        return "connection closed without a response"
    text = getattr(error, "strerror", None) or str(error)
    return one_line(f"{type(error).__name__}: {text}" if text else type(error).__name__, 120)
