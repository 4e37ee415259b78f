"""What the bar says: the engine, the live settings, and the state of the chat."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from spectui.host.state import Phase
from spectui.tui.widgets.param_bar import BarState

if TYPE_CHECKING:
    from spectui.host.host import EngineHost
    from spectui.settings.config import ChatConfig


class ReplyState(Protocol):
    """The streaming reply as the bar reads it (spectui.chat_session.streaming.StreamingReply):
    its status, and the k and T its last step ran with (None before its second step)."""

    status: str
    detail: str

    @property
    def ran(self) -> tuple[int, float] | None: ...


def engine_status(host: EngineHost) -> tuple[str, str]:
    """The engine's state word and the detail after it, with no reply in the way."""
    state = host.state
    if state.phase is Phase.RESTARTING:
        return "restarting", f"{host.label} with k = {state.k} · {host.loading_text}"
    if state.phase is Phase.SWITCHING:
        return "restarting", f"as {state.switching_to} · {host.loading_text}"
    if state.phase is Phase.LOADING:
        return "loading", host.loading_text
    if state.phase is Phase.RESTART_FAILED:
        return "failed", "a k key tries the restart again; Ctrl+Q quits"
    if state.phase is Phase.FAILED:
        return "failed", "see the message; F1 help, Ctrl+Q quits"
    return "ready", ""


def pending_restart(host: EngineHost, replying: bool) -> str:
    when = "after this reply" if replying else "in a moment"
    state = host.state
    if state.wanted_swap is not None:
        return f"switches to {state.wanted_swap.what} {when}"
    if state.wanted_k is None or state.phase is Phase.RESTARTING:
        return ""
    return f"{host.label} restarts with k = {state.wanted_k} {when}"


def bar_status(host: EngineHost, reply: ReplyState | None, waiting: bool, note: str = "") -> tuple[str, str]:
    """reply: the streaming one (status, detail) or None; waiting: a message waits for the
    engine; note: the chat's own state (an edit under way), said when nothing else is."""
    restart = pending_restart(host, reply is not None) or note
    if reply is not None:
        return reply.status, reply.detail or restart
    status, detail = engine_status(host)
    if waiting:
        return "waiting", f"for the engine · {status} {detail}".rstrip()
    return status, detail or restart


def engine_k_text(host: EngineHost) -> str | None:
    """What the bar says of k where the engine runs its own (a server): its word, or "?"."""
    if not host.k_from_engine:
        return None
    return str(host.reported_k) if host.reported_k is not None else "?"


def bar_state(host: EngineHost, config: ChatConfig, reply: ReplyState | None, waiting: bool, ghosts: bool, markdown: bool,
              note: str = "") -> BarState:
    info, live = host.info, host.live
    status, detail = bar_status(host, reply, waiting, note)
    ran = reply.ran if reply is not None else None
    return BarState(
        target=info.target if info else (config.model or "default model"),
        draft=info.draft if info else config.draft,
        method=info.method if info else config.method,
        engine=(f"{info.name} · {info.backend}" if info.backend else info.name) if info else config.engine,
        k=live.k,
        auto_k=live.auto,
        temperature=live.temperature,
        ghosts=ghosts,
        markdown=markdown,
        status=status,
        detail=detail,
        inferred=host.capabilities is not None and not host.capabilities.exact_provenance,
        k_text=engine_k_text(host),
        ran_k=ran[0] if ran is not None else None,
        ran_temperature=ran[1] if ran is not None else None,
    )
