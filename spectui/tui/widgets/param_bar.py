"""The one-line bar on top: what runs (target ← draft, engine), k, T, and the state."""

from __future__ import annotations

from dataclasses import dataclass, replace

from textual.content import Content
from textual.widgets import Static

STATUS_STYLES = {
    "loading": "bold $warning",
    "restarting": "bold $warning",
    "waiting": "bold $warning",  # a message waits for the engine to load
    "ready": "$success",
    "streaming": "bold $accent",
    "prefill": "bold $accent",  # a long prompt on its way into the model's cache
    "cancelling": "$warning",
    "failed": "bold $error",
}

# After these the detail finishes the word ("loading weights 40%", "waiting for the engine");
# after the others it is a note of its own, set apart ("ready · editing your last message…").
CONTINUED_BY_DETAIL = frozenset({"loading", "restarting", "waiting", "prefill"})  # "● prefill 512/2048 · …"


@dataclass(frozen=True)
class BarState:
    target: str = "…"
    draft: str | None = None
    method: str = ""
    engine: str = ""
    k: int = 4
    auto_k: bool = False
    temperature: float = 0.0
    ghosts: bool = False
    markdown: bool = False
    status: str = "loading"
    detail: str = ""  # loading progress, an error line
    inferred: bool = False  # sources guessed from chunk sizes (capabilities.exact_provenance False)
    k_text: str | None = None  # the k an engine runs by itself (a server's, "?" unsaid): no key sets it
    # The k and T the streaming reply's last step ran with (None: no reply, or no step yet past
    # its first): shown beside the live values when a key changed them mid-reply ("k 4→6")
    ran_k: int | None = None
    ran_temperature: float | None = None


def bar_parts(state: BarState) -> list[str | tuple[str, str]]:
    drafting = f" ← {state.draft}" if state.draft else ""
    method = f" ({state.method})" if state.method and state.method != "none" else ""
    parts: list[str | tuple[str, str]] = [
        (" spectui ", "bold $background on $primary"),
        " ",
        (f"{state.target}{drafting}{method}", "bold"),
    ]
    if state.engine:
        parts += [("  ·  ", "$text-muted"), (state.engine, "$text-muted")]
    parts += [
        ("  ·  k ", "$text-muted"), (k_shown(state), "bold $accent"),
        ("  T ", "$text-muted"), (temperature_shown(state), "bold $accent"),
    ]
    if state.inferred:
        parts += [("  ·  ", "$text-muted"), ("sources inferred", "$warning")]
    toggles = [name for name, on in (("ghosts", state.ghosts), ("markdown", state.markdown)) if on]
    if toggles:
        parts += [("  ·  ", "$text-muted"), (" ".join(toggles), "$secondary")]
    parts += [("  ·  ", "$text-muted"), (f"● {state.status}", STATUS_STYLES.get(state.status, "bold"))]
    if state.detail:
        parts += [" " if state.status in CONTINUED_BY_DETAIL else (" · ", "$text-muted"), (state.detail, "$text-muted")]
    return parts


def fitted_parts(state: BarState, width: int) -> list[str | tuple[str, str]]:
    """bar_parts, leaving out what matters least until the state fits `width` cells: the engine's
    detail, then the draft's name, then the method (F3 shows them all)."""
    for shorter in (state, replace(state, engine=""), replace(state, engine="", draft=None),
                    replace(state, engine="", draft=None, method="")):
        parts = bar_parts(shorter)
        if width <= 0 or Content.assemble(*parts).cell_length <= width:
            break
    return parts


def k_shown(state: BarState) -> str:
    """The k in force; mid-reply, the one the last step ran with: "auto 3" (adaptive k's
    choice), "4→6" (ran at 4, the next step at 6: a key pressed mid-reply)."""
    if state.k_text is not None:
        return state.k_text
    if state.ran_k is None:
        return "auto" if state.auto_k else str(state.k)
    if state.auto_k:
        return f"auto {state.ran_k}"
    return str(state.k) if state.ran_k == state.k else f"{state.ran_k}→{state.k}"


def temperature_shown(state: BarState) -> str:
    live = f"{state.temperature:.2f}"
    ran = f"{state.ran_temperature:.2f}" if state.ran_temperature is not None else live
    return live if ran == live else f"{ran}→{live}"


class ParamBar(Static):
    DEFAULT_CSS = """
    ParamBar {
        dock: top;
        height: 1;
        background: $panel;
        color: $foreground;
    }
    """

    def __init__(self, state: BarState, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.state = state
        self.plain = ""

    def on_mount(self) -> None:
        self.show(self.state)

    def on_resize(self) -> None:
        self.show(self.state)

    def show(self, state: BarState) -> None:
        self.state = state
        content = Content.assemble(*fitted_parts(state, self.size.width))
        self.plain = content.plain
        self.update(content, layout=False)  # fixed size: no layout pass per frame
