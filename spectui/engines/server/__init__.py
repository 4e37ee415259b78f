"""Any running vLLM OpenAI-compatible server: SSE with token ids, Prometheus counters.

Stdlib only (http.client), so spectui needs neither httpx nor openai to follow a server.
"""

from spectui.engines.server.engine import ServerEngine, build_server_engine

__all__ = ["ServerEngine", "build_server_engine"]
