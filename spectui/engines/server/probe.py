"""What a server says about itself: the models it serves, its spec_decode counters (and k
from them), and vLLM's config with the method, draft and dtype, where it shows it."""

from __future__ import annotations

from dataclasses import dataclass

from spectui.core.engine import TEMPERATURE, Capabilities, EngineInfo, Kernels
from spectui.core.errors import UsageError
from spectui.core.events import K_MAX
from spectui.core.safe_text import safe_line
import spectui.engines.server.transport as transport
from spectui.engines.server.prometheus import (
    PrometheusFormatError,
    SpecCounters,
    is_vllm_exposition,
    parse_samples,
    spec_counters,
)
from spectui.engines.server.transport import ServerAddress, ServerError

# vLLM's speculative_config "method" -> spectui's --method
SPECTUI_METHOD = {"draft_model": "draft"}


def served_models(address: ServerAddress, api_key: str | None, timeout: float) -> list[str]:
    """The models at /v1/models; ServerError when the server cannot be asked."""
    listing = transport.get_json(address, "/v1/models", api_key, timeout=timeout)
    models = listing.get("data", []) if isinstance(listing, dict) else []
    # LoRA adapters are listed with their base as parent; the base model comes first.
    named = [m for m in models if isinstance(m, dict) and isinstance(m.get("id"), str)]
    bases = [m["id"] for m in named if not m.get("parent")]
    return bases or [m["id"] for m in named]


def read_metrics(
    address: ServerAddress, api_key: str | None, timeout: float, abort: transport.Abort | None = None
) -> tuple[SpecCounters | None, bool]:
    """(counters, whether the text came from vLLM); (None, False) when unreadable."""
    try:
        text = transport.get(address, "/metrics", api_key, timeout=timeout, abort=abort)
        samples = parse_samples(text.decode("utf-8", "replace"))
    except (ServerError, PrometheusFormatError):
        return None, False
    return spec_counters(samples), is_vllm_exposition(samples)


def k_from_metrics(address: ServerAddress, api_key: str | None, timeout: float) -> int | None:
    """vLLM registers one per-position counter per draft position at start, so their
    number is k before any request ran. No spec_decode series on a vLLM server: k = 0."""
    counters, from_vllm = read_metrics(address, api_key, timeout)
    if counters is not None and counters.num_positions:
        return counters.num_positions
    return 0 if from_vllm and counters is None else None


def server_config(address: ServerAddress, api_key: str | None, timeout: float) -> dict:
    """vLLM's whole config, from /server_info: only servers started with
    VLLM_SERVER_DEV_MODE=1 have it; elsewhere the method, draft and dtype stay unknown."""
    try:
        value = transport.get_json(address, "/server_info?config_format=json", api_key, timeout=timeout)
    except ServerError:
        return {}
    config = value.get("vllm_config") if isinstance(value, dict) else None
    return config if isinstance(config, dict) else {}


def speculative_config(server_config: dict) -> dict | None:
    config = server_config.get("speculative_config")
    return config if isinstance(config, dict) else None


def configured_k(config: dict | None) -> int | None:
    """k as vLLM's speculative_config names it; None when it has none that makes sense."""
    if config is None:
        return None
    configured = config.get("num_speculative_tokens") or 0
    return configured if isinstance(configured, int) and 0 <= configured <= K_MAX else None


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


@dataclass(frozen=True)
class ServerDescription:
    """What a server says about itself when spectui connects: the model its requests name, its k
    (None: not said), and the engine as the app shows it."""

    model: str
    k: int | None
    info: EngineInfo


def described_server(address: ServerAddress, api_key: str | None, model: str | None, timeout: float) -> ServerDescription:
    """The server's models (`model` must be one of them; None: its first), its k from /metrics or
    its config, and its config's method, draft and dtype; a UsageError (one line) where it lists none."""
    try:
        served = served_models(address, api_key, timeout)
    except ServerError as error:
        raise UsageError(str(error)) from None
    if model is not None and served and model not in served:
        raise UsageError(f"the server at {address.url} serves {', '.join(served)}, not {model}")
    model = model or (served[0] if served else None)
    if model is None:
        raise UsageError(f"the server at {address.url} lists no model at /v1/models")
    server_k = k_from_metrics(address, api_key, timeout)
    vllm_config = server_config(address, api_key, timeout)
    config = speculative_config(vllm_config)
    if server_k is None:
        server_k = configured_k(config)
    info = EngineInfo(
        name="server",
        target=safe_line(model),  # shown; the requests name the model as served
        draft=draft_name(config),
        method=method_name(config, server_k),
        dtype=dtype_name(vllm_config),
        device=address.host,
        kernels=Kernels("server"),  # the server's own threads and library: not said over HTTP
        # The request names a temperature; k is the server's own, fixed when it started
        capabilities=Capabilities(exact_provenance=False, reports_speculation=server_k is not None,
                                  reply_controls=frozenset({TEMPERATURE})),
    )
    return ServerDescription(model, server_k, info)
