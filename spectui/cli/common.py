"""What every command shares: one error line and its exit code, a bare group's help, flag labels."""

from __future__ import annotations

from typing import NoReturn

import typer

from spectui.core.safe_text import safe_line


def fail(error: BaseException) -> NoReturn:
    """One line on stderr and a non-zero exit: what every bad input gets. The error may quote
    a server, a model or a file: its controls are shown, never obeyed."""
    typer.echo(f"spectui: error: {safe_line(str(error))}", err=True)
    raise typer.Exit(getattr(error, "exit_code", 1))


def help_when_bare(ctx: typer.Context) -> None:
    """A command group's callback: the group alone prints its help (exit 0), not an error."""
    if ctx.invoked_subcommand is None:
        typer.echo(ctx.get_help())


def flags_without_metavar() -> None:
    """typer labels every flag `<bool>` in --help although a flag takes no value: no label."""
    from typer.core import TyperOption

    labelled = TyperOption.display_type_rich

    def display_type_rich(self, ctx):
        return None if self.is_flag else labelled(self, ctx)

    TyperOption.display_type_rich = display_type_rich
