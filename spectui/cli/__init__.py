"""The command line. Heavy imports stay inside the commands so `spectui --help` is instant."""

from __future__ import annotations

import typer


def fail(error: BaseException) -> None:
    """One line on stderr and a non-zero exit: what every bad input gets."""
    typer.echo(f"spectui: error: {error}", err=True)
    raise typer.Exit(getattr(error, "exit_code", 1))


def help_when_bare(ctx: typer.Context) -> None:
    """A command group's callback: the group alone prints its help (exit 0), not an error."""
    if ctx.invoked_subcommand is None:
        typer.echo(ctx.get_help())
