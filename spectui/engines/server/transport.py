"""HTTP to the server with httpx: one client per request, errors as one line, keys never shown.

httpx brings what a user's network expects: HTTPS_PROXY / NO_PROXY, the system's CA bundle
(SSL_CERT_FILE), connect and read timeouts. A fresh client per request keeps a dead or
restarted server simple to notice: nothing pooled can be stale. Every failure becomes a
`ServerError` whose text names the URL without its user and password.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import threading
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

import httpx

from spectui.core import json_text
from spectui.core.safe_text import safe_line

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
    # user and password from `http://user:password@host`, sent as HTTP Basic auth; never shown
    credentials: tuple[str, str] | None = field(default=None, repr=False)

    @classmethod
    def parse(cls, url: str) -> "ServerAddress":
        """Accepts `http://host:port`, `host:port`, the OpenAI-style base `…/v1`, and a user
        and password in the URL."""
        text = url.strip()
        shown = safe_line(redacted(url))
        unsafe = url_character_problem(text)
        if unsafe:
            raise ValueError(f"{shown!r} has {unsafe}: a URL has none")
        if "://" not in text:
            text = "http://" + text
        parts = urlsplit(text)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{shown!r} is not an http(s) URL, e.g. http://127.0.0.1:8000")
        try:
            named_port = parts.port
        except ValueError:
            raise ValueError(f"{shown!r} has a port that is not a number from 1 to 65535") from None
        if named_port == 0:  # port 0 is no server's: urlsplit's 0 would have meant 80 here
            raise ValueError(f"{shown!r} names port 0, which no server listens on")
        port = named_port or (443 if parts.scheme == "https" else 80)
        prefix = parts.path.rstrip("/").removesuffix("/v1")
        credentials = None
        if parts.username is not None or parts.password is not None:
            credentials = (unquote(parts.username or ""), unquote(parts.password or ""))
        return cls(parts.scheme, parts.hostname, port, prefix, credentials)

    @property
    def origin(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"

    @property
    def url(self) -> str:
        """The address as shown: never with the user and password."""
        return self.origin + self.prefix

    def client(self, api_key: str | None, connect_timeout: float, read_timeout: float) -> httpx.Client:
        """A client for one request; proxies and CA bundles come from the environment."""
        return httpx.Client(
            base_url=self.origin,
            headers=headers(api_key),
            auth=httpx.BasicAuth(*self.credentials) if self.credentials and not api_key else None,
            timeout=httpx.Timeout(read_timeout, connect=connect_timeout),
            follow_redirects=False,
            trust_env=True,
        )


def url_character_problem(text: str) -> str | None:
    """What in `text` no URL holds: control characters (an escape, a CR/LF that would split
    the request's header lines) or spaces."""
    for character in text:
        if ord(character) < 0x20 or 0x7F <= ord(character) <= 0x9F:
            return f"a control character (U+{ord(character):04X})"
        if character.isspace():
            return "a space"
    return None


def api_key_problem(key: str) -> str | None:
    """What in `key` no HTTP header can carry (a line break, a non-ASCII character), in words
    that never hold the key itself: it would fail deep in httpx, or print the key."""
    for position, character in enumerate(key, 1):
        if character in "\r\n":
            return f"a line break (character {position})"
        if ord(character) < 0x20 or ord(character) == 0x7F:
            return f"a control character (U+{ord(character):04X}, character {position})"
        if ord(character) > 0x7E:
            return f"a non-ASCII character (character {position})"
    return None


def redacted(url: str) -> str:
    """`url` with any password (or lone user, which may be a key) and the values of its query
    string (`?api_key=…`) replaced by ***."""
    text, question, query = _without_password(url.strip()).partition("?")
    if not question:
        return text
    pairs = (part.partition("=") for part in query.split("&"))
    return text + "?" + "&".join(f"{name}=***" if sep else name for name, sep, _ in pairs)


def _without_password(text: str) -> str:
    scheme, sep, rest = text.partition("://")
    if not sep:
        scheme, rest = "", text
    authority, slash, path = rest.partition("/")
    if "@" not in authority:
        return text
    userinfo, _, hostport = authority.rpartition("@")
    user, colon, _ = userinfo.partition(":")
    shown_user = f"{user}:***" if colon else "***"
    return f"{scheme}{sep}{shown_user}@{hostport}{slash}{path}"


def unreachable_message(url: str, error: BaseException) -> str:
    cause = root_cause(error)
    if isinstance(cause, socket.gaierror):
        return f"cannot reach the server at {url}: unknown host"
    if isinstance(cause, ConnectionRefusedError):
        return f"cannot reach the server at {url}: connection refused (is the server running there?)"
    if isinstance(error, httpx.TimeoutException) or isinstance(cause, TimeoutError):
        return f"cannot reach the server at {url}: no answer in time"
    if isinstance(cause, ssl.SSLError):
        return f"cannot reach the server at {url}: TLS failed ({cause.reason or cause})"
    if isinstance(error, httpx.ProxyError):
        return f"cannot reach the server at {url} through the proxy (HTTPS_PROXY / HTTP_PROXY): {cause}"
    reason = getattr(cause, "strerror", None) or str(cause) or type(cause).__name__
    return f"cannot reach the server at {url}: {reason}"


def root_cause(error: BaseException) -> BaseException:
    """The innermost exception httpx wrapped (ConnectionRefusedError, gaierror, SSLError…)."""
    seen = {id(error)}
    while True:
        inner = error.__cause__ or error.__context__
        if inner is None or id(inner) in seen:
            return error
        seen.add(id(inner))
        error = inner


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
        return ServerRefused(f"the server at {url} has no {path} (HTTP 404): is it an OpenAI-compatible server?", status)
    detail = error_message(body) or http.client.responses.get(status, "")
    return ServerRefused(f"the server at {url} answered HTTP {status} to {path}: {detail}", status)


def html_page(url: str, path: str, response: httpx.Response) -> ServerError | None:
    """A 200 that is a web page (Content-Type text/html): a captive portal, a proxy's login
    page, or a web UI at that address; read as a stream it only "ended early"."""
    kind = response.headers.get("content-type", "").partition(";")[0].strip().lower()
    if kind not in ("text/html", "application/xhtml+xml"):
        return None
    return ServerError(f"the server at {url} answered {path} with an HTML page (Content-Type {kind}), not an "
                       "OpenAI-compatible API: is the network asking you to sign in (a captive portal), "
                       "or is the URL a web page's?")


def error_message(body: bytes | str) -> str:
    """The message of an OpenAI/vLLM error body, on one line; "" when there is none."""
    try:
        value = json_text.loads(body)
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


MAX_BODY_BYTES = 16 * 2**20  # /v1/models, /metrics: far above what a server sends


def get(
    address: ServerAddress,
    path: str,
    api_key: str | None,
    *,
    timeout: float = CONNECT_TIMEOUT_S,
    abort: Abort | None = None,
) -> bytes:
    """The body of a GET answered 200; any other outcome is a ServerError."""
    extensions = abort.extensions if abort is not None else {}
    try:
        with address.client(api_key, timeout, timeout) as client:
            with client.stream("GET", address.prefix + path, extensions=extensions) as response:
                body = read_bounded(response, MAX_BODY_BYTES)
    except httpx.ConnectError as error:
        raise ServerError(unreachable_message(address.url, error)) from None
    except (httpx.HTTPError, OSError, BodyTooLong) as error:
        raise ServerError(f"the server at {address.url} failed to answer {path}: {describe(error)}") from None
    if response.status_code != 200:
        raise refusal(address.url, path, response.status_code, body)
    page = html_page(address.url, path, response)
    if page is not None:
        raise page
    return body


class BodyTooLong(Exception):
    pass


def read_bounded(response: httpx.Response, limit: int) -> bytes:
    parts, size = [], 0
    for part in response.iter_raw():
        size += len(part)
        if size > limit:
            raise BodyTooLong(f"more than {limit // 2**20} MiB")
        parts.append(part)
    return b"".join(parts)


def get_json(address: ServerAddress, path: str, api_key: str | None, *, timeout: float = CONNECT_TIMEOUT_S):
    body = get(address, path, api_key, timeout=timeout)
    try:
        return json_text.loads(body)
    except ValueError:
        raise ServerError(f"the server at {address.url} sent {path} that is not JSON") from None


class Abort:
    """Stops a request from another thread at any point, before its response headers too:
    httpx's trace hook hands over each socket as it connects, and aborting shuts them down,
    which wakes a read that waits for the server (a connect in progress ends at its timeout)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self.aborted = False

    def trace(self, event: str, info: dict) -> None:
        if not event.endswith("connect_tcp.complete"):
            return
        stream = info.get("return_value")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if sock is None:
            return
        with self._lock:
            self._sockets.append(sock)
            aborted = self.aborted
        if aborted:
            _shut(sock)

    def abort(self) -> None:
        with self._lock:
            self.aborted = True
            sockets = list(self._sockets)
        for sock in sockets:
            _shut(sock)

    @property
    def extensions(self) -> dict:
        return {"trace": self.trace}


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # already closed


class Stream:
    """An open streamed response: its body's byte chunks, and a way to stop it from another
    thread (shutting the socket down wakes a read that waits for the server)."""

    def __init__(self, client: httpx.Client, response: httpx.Response) -> None:
        self.client = client
        self.response = response

    def chunks(self):
        return self.response.iter_raw()

    def abort(self) -> None:
        stream = self.response.extensions.get("network_stream")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if sock is not None:
            _shut(sock)

    def close(self) -> None:
        try:
            self.response.close()
        finally:
            self.client.close()


def open_stream(
    address: ServerAddress,
    path: str,
    payload: dict,
    api_key: str | None,
    *,
    connect_timeout: float,
    read_timeout: float,
    abort: Abort | None = None,
) -> Stream:
    """POST `payload` and return the open response once the server accepted it (status 200).

    The caller reads the body and closes the Stream.
    """
    client = address.client(api_key, connect_timeout, read_timeout)
    try:
        request = client.build_request(
            "POST",
            address.prefix + path,
            content=json.dumps(payload).encode(),
            headers={"Content-Type": "application/json"},
            extensions=abort.extensions if abort is not None else {},
        )
        response = client.send(request, stream=True)
    except httpx.ConnectError as error:
        client.close()
        raise ServerError(unreachable_message(address.url, error)) from None
    except (httpx.HTTPError, OSError) as error:
        client.close()
        raise ServerError(f"the server at {address.url} failed to answer {path}: {describe(error)}") from None
    if response.status_code != 200:
        try:
            body = read_bounded(response, MAX_BODY_BYTES)
        except (httpx.HTTPError, OSError, BodyTooLong):
            body = b""
        finally:
            response.close()
            client.close()
        raise refusal(address.url, path, response.status_code, body)
    page = html_page(address.url, path, response)
    if page is not None:
        response.close()
        client.close()
        raise page
    return Stream(client, response)


def describe(error: BaseException) -> str:
    """A network error in a few words (the exception classes say more than their text)."""
    if isinstance(error, (httpx.ReadTimeout, TimeoutError)):
        return "no data in time (read timeout)"
    if isinstance(error, httpx.TimeoutException):
        return "no answer in time"
    cause = root_cause(error)
    if isinstance(cause, ConnectionResetError):
        return "connection reset"
    if isinstance(error, httpx.RemoteProtocolError):
        return "connection closed mid-response"
    text = getattr(cause, "strerror", None) or str(cause)
    return one_line(f"{type(cause).__name__}: {text}" if text else type(cause).__name__, 120)
