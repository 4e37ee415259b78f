"""Engine info: what runs, where, how k changes reach it, and its own figures for the last reply."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static

from spectui.core.engine import K, EngineInfo
from spectui.core.words import counted
from spectui.host.state import Phase

if TYPE_CHECKING:
    from spectui.host.host import EngineHost


# vLLM's record of the last reply, in the words the rest of the app uses.
STAT_NAMES = {
    "num_drafted": "drafted",
    "num_accepted": "accepted",
    "per_step_accepted": "per-step",
    "reconciled": "reconciled",
    # a server's /metrics over the reply: every client's requests in that interval count
    "server_gamma": "server-wide γ",
    "server_per_position_acceptance": "server α by position",
    "server_num_drafts": "server drafts",
    "server_num_draft_tokens": "server drafted",
    "server_num_accepted_tokens": "server accepted",
    "server_k": "server k",
}
NOT_REPORTED = "not reported by the engine"
SHORT_LIST = 8  # longer lists are counted, not printed
HIDDEN_STATS = ("traceback", "per_step_drafted")  # the second says what "drafted" sums


def info_lines(host: EngineHost, engine_stats: dict) -> list[tuple[str, str]]:
    engine = host.engine
    if engine is None:
        state = host.state
        if state.phase is Phase.RESTARTING:
            return [("engine", f"restarting {host.label} with k = {state.k} · {host.loading_text}")]
        return [("engine", state.error if state.failed else f"loading {host.loading_text}")]
    info = engine.info
    rows = [
        ("engine", info.name),
        ("target", info.target),
        ("draft", info.draft or "–"),
        ("method", info.method),
        ("dtype", said(info.dtype)),
        ("device", info.device),
        *([("backend", info.backend)] if info.backend else []),
        *([("CUDA graphs", info.kernels.graphs)] if info.kernels is not None and info.kernels.graphs else []),
        ("k", k_text(host, info)),
        ("provenance", "exact" if info.capabilities.exact_provenance else "inferred from chunk sizes"),
    ]
    if host.load_seconds is not None:
        rows.append(("loaded in", f"{host.load_seconds:.1f} s"))
    stats = stat_rows(engine_stats)
    if stats:
        rows.append(("last reply", "engine's own figures"))
        rows += stats
    return rows


def said(value: object) -> str:
    """An engine's figure, or words where it gave none (a server's "?" or None)."""
    return NOT_REPORTED if value in (None, "", "?") else str(value)


def k_text(host: EngineHost, info: EngineInfo) -> str:
    """How k reaches the engine that runs (`info`)."""
    if host.k_from_engine:
        k = host.reported_k
        runs = f"{k}, the server's own" if k is not None else NOT_REPORTED
        return f"{runs}: spectui cannot send k"
    if info.capabilities.live(K):
        return "a change reaches the next step (live)"
    if host.k_restarts_engine:
        return f"{host.engine_k}, fixed: a change restarts the engine"
    if host.k_fixed_elsewhere:
        return "fixed by the server" if info.name == "server" else "fixed when the engine started"
    return "fixed for a reply: a change applies to the next"


def stat_rows(engine_stats: dict) -> list[tuple[str, str]]:
    rows = []
    for key, value in engine_stats.items():
        if key in HIDDEN_STATS or isinstance(value, dict):
            continue
        shown = stat_text(key, value)
        if shown is not None:
            rows.append((STAT_NAMES.get(key, key), shown))
    return rows


def stat_text(key: str, value: object) -> str | None:
    if value is None:
        return NOT_REPORTED
    if key == "per_step_accepted" and isinstance(value, list):
        return f"{counted(len(value), 'step')} recorded"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3g}"
    if isinstance(value, list):
        if len(value) <= SHORT_LIST and all(isinstance(v, (int, float)) for v in value):
            return " ".join(f"{v:.2f}" if isinstance(v, float) else str(v) for v in value)
        return f"{len(value)} values"
    return str(value)


class InfoScreen(ModalScreen):
    BINDINGS = [Binding("escape,f3,q", "app.pop_screen", "close")]
    DEFAULT_CSS = """
    InfoScreen { align: center middle; }
    InfoScreen > Vertical {
        width: 76; max-width: 100%; height: auto; max-height: 90%; padding: 1 2;
        background: $panel; border: round $primary;
    }
    InfoScreen .title { text-style: bold; color: $primary; margin-bottom: 1; }
    """

    def __init__(self, host: EngineHost, engine_stats: dict | None = None) -> None:
        super().__init__()
        self.host = host
        self.engine_stats = engine_stats or {}

    def compose(self) -> ComposeResult:
        rows = info_lines(self.host, self.engine_stats)
        width = max(12, *(len(name) + 2 for name, _ in rows))
        parts: list = []
        for name, value in rows:
            parts += [(f"{name:<{width}}", "$text-muted"), (value, "bold"), "\n"]
        with Vertical():
            yield Static("Engine", classes="title")
            yield Static(Content.assemble(*parts[:-1]), id="info-rows")
