"""What every command shares: one error line and its exit code, a bare group's help, flag labels."""

from __future__ import annotations

import contextlib
import errno
import sys
from typing import Any, NoReturn

import typer
import typer.main

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


def command_of(app: typer.Typer):  # noqa: ANN201 - click's, or typer's own copy of it (0.29+)
    """The click command behind `app`, its flags unlabelled. typer labels a flag `<bool>` in --help
    from 0.28 on although a flag takes no value; an empty metavar (a public attribute of click's
    parameters) drops the label on every typer version, where patching typer's internals broke."""
    command = typer.main.get_command(app)
    _unlabel_flags(command)
    return command


def _unlabel_flags(command: Any) -> None:
    # Attributes, not isinstance: typer 0.29 carries its own copy of click's classes.
    # --help is made apart from the params, and kept once made (click 8.2+): make it here.
    help_option = command.get_help_option(typer.Context(command))
    for param in [*getattr(command, "params", ()), help_option]:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
    for sub in getattr(command, "commands", {}).values():
        _unlabel_flags(sub)


def tolerant_output() -> None:
    """stdout and stderr in an encoding that lacks a character (PYTHONIOENCODING=latin-1,
    an ascii locale) write "?" for it instead of raising: the reply is kept, not lost."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None and (stream.encoding or "").lower().replace("-", "") != "utf8":
            reconfigure(errors="replace" if stream is sys.stdout else "backslashreplace")


# What a write to stdout fails with: a full disk or quota, a device error, a reader gone.
OUTPUT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EPIPE, errno.EFBIG})


def output_failed(error: OSError) -> NoReturn:
    """Writing the output failed (a full disk, a closed pipe): one line on stderr, none for a
    reader that simply stopped, and no second failure when Python flushes stdout at exit."""
    import os

    with contextlib.suppress(OSError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    if error.errno != errno.EPIPE:
        typer.echo(f"spectui: error: cannot write the output: {safe_line(error.strerror or str(error))}", err=True)
    sys.exit(1)
