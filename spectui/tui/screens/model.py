"""The model screen: what the chat runs (target, draft, method, heads, engine), changed in the app.

Ctrl+S (or Enter in a field) checks the choice as `spectui chat` checks its options, as one
line and before anything loads, and hands the new ChatConfig back; the chat screen has the
engine host swap the engine, and the conversation goes on with it. Esc keeps the engine.
"""

from __future__ import annotations

from dataclasses import replace

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.suggester import SuggestFromList
from textual.widgets import Input, Label, Select, Static

from typing import TYPE_CHECKING

from spectui.core.errors import SpectuiError
from spectui.settings.table import CHAT_ENGINES, METHODS
from spectui.tui.widgets.safe_fields import SafeInput

if TYPE_CHECKING:
    from spectui.settings.config import ChatConfig


def describe(config: ChatConfig) -> str:
    """The engine a config asks for, in a few words: 'qwen2.5-coder-1.5b ← qwen2.5-coder-0.5b (draft) · embedded'."""
    from spectui.models.registry import DEFAULT_TARGET, get_spec

    target = config.model or DEFAULT_TARGET
    spec = get_spec(target)
    draft = config.draft or (spec.default_draft if spec is not None else None)
    drafting = f" ← {draft}" if config.method == "draft" and draft else ""
    return f"{target}{drafting} ({config.method}) · {config.engine}"


def method_options(config: ChatConfig) -> list[tuple[str, str]]:
    """The methods that act for the engine the config runs: on the embedded engine (asked for,
    or what auto picks here) its own and the heads', not vLLM's eagle3 or mtp."""
    from spectui.settings.table import EMBEDDED_METHODS, HEAD_METHODS

    embedded = config.engine == "embedded"
    if config.engine == "auto":
        from spectui.engines.factory import chosen_engine
        from spectui.settings.config import engine_options

        try:
            embedded = chosen_engine(engine_options(config)) == "embedded"
        except SpectuiError:  # a config the apply key will refuse, with its line
            embedded = False
    methods = ("auto",) + EMBEDDED_METHODS + HEAD_METHODS if embedded else METHODS
    return [(m, m) for m in methods]


def known_models() -> str:
    """The model names, each marked cached or not (a cached one starts without a download)."""
    from spectui.models.inventory import model_rows

    lines = [f"  {'●' if row['cached'] else '○'} {row['alias']}" for row in model_rows()]
    return "\n".join(["Models (● cached here, ○ fetched at first use; spectui models lists them):", *lines,
                      "A folder, a .gguf or org/name works too. The conversation stays."])


class ModelScreen(ModalScreen):
    BINDINGS = [
        Binding("escape", "dismiss", "keep the engine"),
        Binding("ctrl+s", "apply", "restart with these", priority=True),
    ]
    DEFAULT_CSS = """
    ModelScreen { align: center middle; }
    ModelScreen > VerticalScroll {
        width: 84; max-width: 100%; height: auto; max-height: 100%; padding: 1 2;
        overflow-y: auto;  /* 24 rows: the list under the fields scrolls (Tab reaches it, then ↑ ↓) */
        background: $panel; border: round $primary;
    }
    ModelScreen #model-title { text-style: bold; color: $accent; margin-bottom: 1; }
    ModelScreen Horizontal { height: auto; }
    ModelScreen Label { width: 10; padding: 1 0; }
    ModelScreen Input, ModelScreen Select { width: 1fr; }
    ModelScreen #model-error { color: $error; height: auto; }
    ModelScreen #model-known { color: $text-muted; height: auto; margin-top: 1; }
    """

    def __init__(self, config: ChatConfig) -> None:
        super().__init__()
        self.config = config

    def compose(self) -> ComposeResult:
        from spectui.models.registry import DEFAULT_TARGET, MODELS

        config, aliases = self.config, list(MODELS)
        fields = [
            ("Target", SafeInput(config.model or "", placeholder=DEFAULT_TARGET, id="model-target",
                             suggester=SuggestFromList(aliases))),
            # placeholders short enough for the field at 80 columns (longer ones were cut)
            ("Draft", SafeInput(config.draft or "", placeholder="the target's preset (draft method only)",
                            id="model-draft", suggester=SuggestFromList(aliases))),
            ("Method", Select(method_options(config), value=config.method, allow_blank=False, id="model-method")),
            ("Heads", SafeInput(config.heads or "", placeholder="medusa / eagle heads folder (embedded)",
                            id="model-heads")),
            ("Engine", Select([(e, e) for e in CHAT_ENGINES], value=config.engine, allow_blank=False, id="model-engine")),
        ]
        with VerticalScroll(id="model-body"):
            yield Static("Model · Ctrl+S (or Enter) restarts the engine with these · Esc keeps it", id="model-title")
            for label, field in fields:
                with Horizontal():
                    yield Label(label)
                    yield field
            yield Static("", id="model-error")
            yield Static(Content(known_models()), id="model-known")

    def on_mount(self) -> None:
        self.query_one("#model-target", Input).focus()

    def chosen(self):
        def text(field: str) -> str | None:
            return self.query_one(f"#model-{field}", Input).value.strip() or None

        return replace(self.config, model=text("target"), draft=text("draft"), heads=text("heads"),
                       method=self.query_one("#model-method", Select).value,
                       engine=self.query_one("#model-engine", Select).value)

    def on_select_changed(self, event: Select.Changed) -> None:
        """Another engine: the methods it runs (the CPU's has no eagle3 or mtp)."""
        if event.select.id != "model-engine":
            return
        method = self.query_one("#model-method", Select)
        options = method_options(replace(self.config, engine=str(event.value)))
        chosen = method.value if method.value in [value for _, value in options] else "auto"
        method.set_options(options)
        method.value = chosen

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_apply()

    def action_apply(self) -> None:
        from spectui.engines.factory import models_to_run
        from spectui.host.plan import check_engine_choice
        from spectui.settings.config import check_values

        config = self.chosen()
        try:
            check_values(config)
            models = models_to_run(config.engine, config.model, config.draft)  # the one place they are resolved
            check_engine_choice(config, models)
        except SpectuiError as error:
            self.query_one("#model-error", Static).update(Content(str(error)))
            return
        self.dismiss((config, models))
