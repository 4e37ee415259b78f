"""The settings table (spectui.settings.table) as typer options.

A command marks where its settings go with a `settings: Given` parameter and is decorated
with `@takes_settings("generate")`: the table's options for that command take that place in
its signature (typer reads `inspect.signature`), and the command receives their values as one
`Given`. Only typer and stdlib here: `spectui --help` must not import torch.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Annotated, Any, Literal, Optional

import typer

from spectui.models.registry import ModelPair
from spectui.settings.options import EngineOptions, engine_options_from_values
from spectui.settings.table import CONFIG, Setting, settings_for

class Given:
    """The values a command line gave for a command's settings (None: not given)."""

    def __init__(self, command: str, values: dict[str, Any]) -> None:
        self.command = command
        self.values = values

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    def checked(self) -> dict[str, Any]:
        """Each value by its setting's rule, as the setting holds it (k: a number or "auto")."""
        return {setting.name: setting.checked(self.values[setting.name]) for setting in settings_for(self.command)}

    def engine_options(self, **fixed: Any) -> EngineOptions:
        """Checked EngineOptions: the given values, then `fixed` (a command's own choices) over
        them, with --method auto made concrete for where it will run."""
        from spectui.engines.factory import settled_method

        return settled_method(engine_options_from_values({**self.checked(), **fixed}))

    def models(self, options: EngineOptions) -> ModelPair | None:
        """The models `options` name, resolved: the one place a command turns the names into
        models (None for an engine that names its own: a server)."""
        from spectui.engines.factory import models_to_run

        return models_to_run(options.engine, options.model, options.draft)

    def config_overrides(self) -> dict[str, Any]:
        """What overrides the config file (the chat's settings): the given values, checked."""
        return {name: value for name, value in self.checked().items() if value is not None}


# The default a command's `settings: Given` parameter declares: takes_settings takes the parameter
# out of the command's signature and always passes the command line's values in its place.
PASSED_BY_TAKES_SETTINGS = Given("", {})


def takes_settings(command: str):
    """Put the table's options for `command` where the function has `settings: Given`."""

    def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(function, eval_str=True)
        table = settings_for(command)
        parameters = []
        for parameter in signature.parameters.values():
            if parameter.name == "settings":
                parameters += [typer_parameter(setting, command) for setting in table]
            else:
                parameters.append(parameter)

        @functools.wraps(function)
        def run(**values: Any) -> Any:
            given = Given(command, {setting.name: values.pop(setting.name) for setting in table})
            return function(**values, settings=given)

        run.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]  # typer reads it; wraps' type omits it
        run.__annotations__ = {parameter.name: parameter.annotation for parameter in parameters}
        return run

    return decorate


def typer_parameter(setting: Setting, command: str) -> inspect.Parameter:
    """One setting as a typer option of `command`. The chat's default is None: "not given, the
    config file's value applies"."""
    kind: Any = str if setting.parse is not None else setting.kind
    if setting.choices:
        kind = Literal[setting.choices]  # typer offers them to shell completion
    default = None if command == CONFIG else setting.default
    help_text = setting.help
    if command == CONFIG and setting.default is not None:
        # None on the chat's command line is "not given": the config file's value, whose default this is.
        help_text += f" (config default: {format_default(setting.default)})"
    option = typer.Option(
        *setting.flags,
        help=help_text,
        envvar=setting.envvar,
        metavar=setting_metavar(setting),
    )
    annotation = Annotated[Optional[kind] if default is None else kind, option]
    return inspect.Parameter(setting.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default, annotation=annotation)


def setting_metavar(setting: Setting) -> str | None:
    """The choices are in the help (a long list would squeeze the flags' column at 80); a
    setting also given as text (k: a number or auto) names both."""
    if setting.choices:
        return f"<{setting.name.replace('_', '-')}>"
    if setting.parse is not None:
        return f"<{setting.kind.__name__}|auto>"
    return None


def format_default(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return f"{value:g}" if isinstance(value, float) else str(value)
