"""What a server says about itself: the models it serves, its spec_decode counters (and k
from them), and vLLM's config with the method, draft and dtype, where it shows it."""

from __future__ import annotations

from spectui.core.events import K_MAX
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
