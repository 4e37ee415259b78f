"""`spectui chat`, `config path`, `history list/export/search/rename/rm/salvage` and `screenshots`.

Only typer at import: textual, the engine and the store load inside the commands. The
lead's cli/app.py calls `register(app)`.
"""

from __future__ import annotations

import json
import os
import sys
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from spectui.cli.common import fail, help_when_bare
from spectui.cli.engine_options import PASSED_BY_TAKES_SETTINGS, Given, takes_settings
from spectui.cli.prompt import FilesOption, check_files
from spectui.core.errors import SpectuiError, UsageError

if TYPE_CHECKING:  # the store loads when the chat opens it
    from rich.text import Text

    from spectui.store import Conversation, ConversationSummary, SearchHit, Store

config_app = typer.Typer(help="The config file: defaults, keys, theme.", invoke_without_command=True, callback=help_when_bare)
history_app = typer.Typer(
    help="Saved conversations and their per-step traces.", invoke_without_command=True, callback=help_when_bare
)


class ScreenshotEngine(str, Enum):
    embedded = "embedded"
    scripted = "scripted"


class ExportFormat(str, Enum):
    md = "md"
    json = "json"
    jsonl = "jsonl"


@takes_settings("chat")
def chat_command(
    conversation_id: Optional[int] = typer.Argument(None, metavar="[ID]", help="With --resume: the conversation to reopen (default: the latest)."),
    resume: bool = typer.Option(False, "--resume", help="Reopen a saved conversation: --resume [ID]."),
    settings: Given = PASSED_BY_TAKES_SETTINGS,
    no_history: bool = typer.Option(False, "--no-history", help="Save nothing."),
    files: FilesOption = None,
) -> None:
    """Chat in the terminal, every token coloured by where it came from.

    Options not given take the config file's values (spectui config path). -f files go with
    the first message, as /file attaches them."""
    try:
        code = run_chat(settings.config_overrides(), resume=resume, conversation_id=conversation_id, history=not no_history,
                        attach=check_files(files))
    except SpectuiError as error:
        fail(error)
    raise typer.Exit(code)


def check_theme(name: str) -> None:
    """A theme named on the command line must exist (one from the config file only warns in the app)."""
    from spectui.themes import load_themes, theme_errors, user_themes_dir

    known = load_themes()
    if name not in known:
        broken = [error for error in theme_errors() if error.startswith(f"theme {name}.toml:")]
        if broken:  # the user's file is there but cannot be read: say why, not "no theme"
            raise UsageError(broken[0])
        raise UsageError(f"no theme {name!r}: known are {', '.join(sorted(known))} (and .toml files in {user_themes_dir()})")


def open_history(path: Path, must: bool) -> tuple[Store | None, str | None]:
    """(the store, None), or (None, why) when it cannot be opened and the chat can run
    without it (a read-only folder, a damaged file): the app says so. --resume needs it."""
    from spectui.store import Store, StoreError

    try:
        return Store(path, wait_for_lock=True), None
    except StoreError as error:
        if must:
            raise
        return None, str(error)


def resumed_conversation(store: Store, conversation_id: int | None) -> Conversation:
    """The conversation --resume names (else the latest); the store is closed if there is none."""
    from spectui.store import StoreError

    wanted = conversation_id if conversation_id is not None else store.latest_conversation_id()
    try:
        if wanted is None:
            raise StoreError("no saved conversation to resume yet")
        return store.load_conversation(wanted)
    except StoreError:
        store.close()
        raise


def run_chat(
    overrides: dict,
    resume: bool = False,
    conversation_id: int | None = None,
    history: bool = True,
    compare_prompt: str | None = None,
    attach: list[str] | None = None,
) -> int:
    """Config file < CLI options; open history; start the engine; run the app.
    compare_prompt opens the compare view on it as soon as the engine is ready; attach: the
    files (-f) that go with the first message."""
    from spectui.settings.config import load_config
    from spectui.store import default_store_path

    if conversation_id is not None and not resume:
        raise UsageError("a conversation id goes with --resume: spectui chat --resume ID")
    config = load_config().with_overrides(**overrides)
    if overrides.get("theme") is not None:
        check_theme(config.theme)
    from spectui.engines.factory import models_to_run
    from spectui.host.plan import check_engine_choice, settled_config

    config = settled_config(config)
    models = models_to_run(config.engine, config.model, config.draft)
    check_engine_choice(config, models)
    if resume and not history:
        raise UsageError("--resume needs history (drop --no-history)")
    require_terminal()  # after the command line's mistakes, before the history file is made
    store, history_off = open_history(default_store_path(), must=resume) if history else (None, None)
    # must=resume: a store that did not open has already failed the command
    conversation = resumed_conversation(store, conversation_id) if resume and store is not None else None

    from spectui.host.host import EngineHost
    from spectui.host.live import live_from_config
    from spectui.host.plan import plan_for
    from spectui.host.terminal import engine_terminal

    try:
        with engine_terminal(config):
            host = EngineHost(plan_for(config, models), live_from_config(config))
            host.start()  # the engine (process) loads while Textual starts and draws
            from spectui.tui.app import SpectuiApp

            app = SpectuiApp(host, config, store, resume=conversation, compare_prompt=compare_prompt,
                             history_off=history_off, attach=attach)
            app.run()
        if app.history_left:  # the turns a locked history did not take, and where they are
            say_unsaved(app.history_left)
    finally:
        if store is not None:
            store.close()
    return leave(app.return_code or 0)


def say_unsaved(line: str) -> None:
    import contextlib

    from spectui.core.safe_text import safe_line

    with contextlib.suppress(OSError):  # the terminal may be gone; the file of turns is not
        print(f"spectui: {safe_line(line)}", file=sys.stderr)


def leave(code: int) -> int:
    """The chat's exit code, or an end here and now when a thread would outlive the app: a
    load or a forward pass (the interpreter would abort tearing down torch under it), or a
    library's thread no one stops (an input thread spinning on a hung-up terminal kept the
    process alive after the terminal was gone). Everything is saved by then."""
    import contextlib
    import threading

    from spectui.tui.worker import spectui_threads

    stray = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon and t.is_alive()]
    if spectui_threads() or stray:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):  # a terminal that is gone
                stream.flush()
        os._exit(code)
    return code


def require_terminal() -> None:
    """The app draws on a terminal and reads keys from it: a pipe or /dev/null would get escape
    codes and give no keys."""
    for name, stream in (("stdin", sys.stdin), ("stdout", sys.stdout)):
        if not stream.isatty():
            raise UsageError(f"the chat app needs a terminal, but {name} is not one: "
                             "for one reply from a pipe use spectui generate (or compare --table)")
    if os.environ.get("TERM", "") in DUMB_TERMINALS:  # it cannot draw the full screen: a scroll of escapes
        raise UsageError(f"the chat app needs a terminal that can draw a full screen, and TERM={os.environ['TERM']} "
                         "cannot: use spectui generate for one reply, or set TERM (e.g. xterm-256color)")


DUMB_TERMINALS = frozenset({"dumb", "unknown"})


@config_app.command("path")
def config_path_command() -> None:
    """Print where the config file is (it may not exist yet)."""
    from spectui.settings.config import config_path

    typer.echo(str(config_path()))


@config_app.command("init")
def config_init_command(force: bool = typer.Option(False, "--force", help="Overwrite an existing file.")) -> None:
    """Write a commented config file with every setting at its default."""
    from spectui.models.registry import DEFAULT_DRAFT, DEFAULT_TARGET
    from spectui.settings.config import config_path, example_config, write_config

    path = config_path()
    try:
        write_config(path, example_config(DEFAULT_TARGET, DEFAULT_DRAFT), force)
    except SpectuiError as error:
        fail(error)
    typer.echo(str(path))


LimitOption = typer.Option(200, "--limit", min=1, help="Show the newest N (default 200).")
AllOption = typer.Option(False, "--all", help="Show every one (no --limit).")


def say_how_many(shown: int, total: int, what: str) -> None:
    """On stderr, when the list is cut: a script reading stdout sees only the rows."""
    if shown < total:
        typer.echo(f"showing the newest {shown:,} of {total:,} {what}: --limit N or --all shows more", err=True)


@history_app.command("list")
def history_list_command(
    as_json: bool = typer.Option(False, "--json", help="One JSON object per line."),
    limit: int = LimitOption,
    every: bool = AllOption,
) -> None:
    """Saved conversations, newest first."""
    import time

    from spectui.core.safe_text import safe_line
    from spectui.store import Store, default_store_path

    path = default_store_path()
    summaries, total = [], 0
    if path.exists():
        try:
            store = Store(path, read_only=True)
            summaries = store.list_conversations(None if every else limit)
            total = store.count_conversations()
            store.close()
        except SpectuiError as error:
            fail(error)
    if not summaries:  # on stderr: a script reading stdout sees no conversation
        typer.echo(f"no conversations saved yet (spectui chat saves them in {path})", err=True)
    for summary in summaries:
        if as_json:
            typer.echo(json.dumps(summary.__dict__))
        else:
            updated = time.strftime("%Y-%m-%d %H:%M", time.localtime(summary.updated))
            typer.echo(f"{summary.id:>5}  {updated}  {summary.num_messages:>3} msgs  {safe_line(summary.title)}")
    say_how_many(len(summaries), total, "conversations")


@history_app.command("export")
def history_export_command(
    conversation_id: int = typer.Argument(..., help="The conversation id (see history list)."),
    fmt: ExportFormat = typer.Option(
        ExportFormat.md, "--format", "-f",
        help="md: the conversation to read; json: the conversation with each reply's settings; jsonl: its per-step trace."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="File to write (default: stdout)."),
    force: bool = typer.Option(False, "--force", help="Replace the --output file if it exists."),
) -> None:
    """Export a conversation as Markdown or JSON, or its trace as JSONL (one line per step).
    Turns replaced by regenerate or edit are left out, as the chat leaves them out."""
    from spectui.core.files import WouldOverwrite, reason, write_user_file
    from spectui.store import NoSuchConversation, Store, default_store_path

    path = default_store_path()
    try:
        if not path.is_file():  # the same error, and exit code, as rm and rename
            raise NoSuchConversation(f"no conversation {conversation_id}: no history at {path} yet")
        store = Store(path, read_only=True)
        try:
            conversation = store.load_conversation(conversation_id)
        finally:
            store.close()
    except SpectuiError as error:
        fail(error)
    text = export_text(conversation, fmt)
    if output is None:
        sys.stdout.write(text)
        return
    try:  # a regular file only, never replaced unasked; a full disk leaves no empty file behind
        write_user_file(output, text, overwrite=force)
    except WouldOverwrite:
        fail(UsageError(f"{output} exists: name a new file, or add --force to replace it"))
    except OSError as error:
        fail(UsageError(f"cannot write {output}: {reason(error)}"))
    typer.echo(str(output), err=True)


def export_text(conversation: Conversation, fmt: ExportFormat) -> str:
    """The conversation in `fmt`, with nothing a terminal would obey (JSON keeps the values)."""
    from spectui.core.safe_text import escaped_json
    from spectui.store import export_json, export_markdown, export_trace_jsonl

    if fmt is ExportFormat.md:
        return export_markdown(conversation)
    if fmt is ExportFormat.json:
        return escaped_json(export_json(conversation))
    return "".join(escaped_json(line) + "\n" for line in export_trace_jsonl(conversation))


@history_app.command("salvage")
def history_salvage_command(
    output: Optional[Path] = typer.Option(
        None, "--output", "-o", help="The new file (default: beside the history, named by the time)."
    ),
) -> None:
    """Copy the conversations of a damaged history that still read into a new file."""
    import time

    from spectui.store import default_store_path, salvage

    source = default_store_path()
    target = output or source.with_name(f"history-salvaged-{time.strftime('%Y%m%d-%H%M%S')}.sqlite3")
    try:
        result = salvage(source, target)
    except SpectuiError as error:
        fail(error)
    problems = []
    if result.partial:
        problems.append(f"{len(result.partial)} in part ({', '.join(map(str, result.partial))})")
    if result.lost:
        problems.append(f"{len(result.lost)} lost ({', '.join(map(str, result.lost))})")
    typer.echo(
        f"salvaged {result.conversations} conversation(s) whole"
        + (f", {'; '.join(problems)}" if problems else "")
        + f" into {target}. To use it: move {source} aside and put this file in its place."
    )


@history_app.command("search")
def history_search_command(
    text: list[str] = typer.Argument(..., help="Words to find, each as a word or its start; all in one message, or in the title."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per line."),
    limit: int = LimitOption,
    every: bool = AllOption,
) -> None:
    """Search every conversation's messages and titles; newest first, the match marked."""
    from rich.console import Console

    from spectui.store import default_store_path, open_for_search

    path = default_store_path()
    if not path.exists():
        return  # nothing saved yet
    try:
        store = open_for_search(path)
        hits = store.search(" ".join(text), None if every else limit)
        total = store.count_matches(" ".join(text)) if len(hits) == limit and not every else len(hits)
        store.close()
    except SpectuiError as error:
        fail(error)
    console = Console(highlight=False, soft_wrap=True, emoji=False)
    styled = console.is_terminal and console.color_system is not None
    for hit in hits:
        if as_json:
            typer.echo(json.dumps(search_record(hit)))
        else:
            console.print(search_line(hit, styled))
    say_how_many(len(hits), total, "conversations that match")


# Where a terminal draws no styles (a pipe, TERM=dumb), the match sits between these.
MATCH_MARKERS = ("»", "«")


def search_record(hit: SearchHit) -> dict:
    """A search hit for --json: the snippet as text, and where the matches lie in it."""
    matches, offset = [], 0
    for text, matched in hit.snippet:
        if matched:
            matches.append([offset, offset + len(text)])
        offset += len(text)
    return {"id": hit.id, "title": hit.title, "created": hit.created, "updated": hit.updated,
            "num_messages": hit.num_messages, "snippet": hit.snippet_text, "matches": matches}


def search_line(hit: SearchHit, styled: bool) -> Text:
    import time

    from rich.text import Text

    from spectui.core.safe_text import safe_line

    updated = time.strftime("%Y-%m-%d %H:%M", time.localtime(hit.updated))
    line = Text(f"{hit.id:>5}  {updated}  {safe_line(hit.title)}  — ")
    for text, matched in hit.snippet:
        if not matched:
            line.append(safe_line(text))
        elif styled:
            line.append(safe_line(text), "bold reverse")
        else:
            line.append(MATCH_MARKERS[0] + safe_line(text) + MATCH_MARKERS[1])
    return line


@history_app.command("rename")
def history_rename_command(
    conversation_id: int = typer.Argument(..., help="The conversation id (see history list)."),
    title: str = typer.Argument(..., help="The new title."),
) -> None:
    """Give a conversation a new title."""
    from spectui.core.safe_text import safe_line
    from spectui.store import default_store_path, open_existing

    try:
        store = open_existing(default_store_path(), conversation_id)
        store.rename_conversation(conversation_id, title)
        store.close()
    except SpectuiError as error:
        fail(error)
    typer.echo(f"conversation {conversation_id} is now “{safe_line(title.strip())}”")


@history_app.command("rm")
def history_rm_command(
    conversation_id: int = typer.Argument(..., help="The conversation id (see history list)."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Delete without asking."),
) -> None:
    """Delete a conversation with its messages and traces, for good (asks first)."""
    from spectui.store import default_store_path, open_existing

    try:
        store = open_existing(default_store_path(), conversation_id)
        try:
            if not yes and not delete_confirmed(store.conversation_summary(conversation_id)):
                typer.echo(f"kept conversation {conversation_id}", err=True)
                raise typer.Exit(1)
            store.delete_conversation(conversation_id)
        finally:
            store.close()
    except SpectuiError as error:
        fail(error)
    typer.echo(f"deleted conversation {conversation_id}")


def delete_confirmed(summary: ConversationSummary) -> bool:
    """The user's yes, asked on stderr; no answer (stdin closed) is a no."""
    from spectui.core.safe_text import safe_line

    question = f"Delete conversation {summary.id}, “{safe_line(summary.title)}”, and its {summary.num_messages} message(s)?"
    try:
        return typer.confirm(question, default=False, err=True)
    except typer.Abort:  # Ctrl+C, or stdin closed
        return False
    finally:
        if not sys.stdin.isatty():
            typer.echo("", err=True)  # an answer from a pipe is not echoed: end the question's line


def screenshots_command(
    out: Path = typer.Option(Path("screenshots"), "--out", "-o", help="Folder for the SVG (and PNG) files."),
    engine: ScreenshotEngine = typer.Option(ScreenshotEngine.scripted, "--engine", help="scripted (default, no weights) or embedded."),
    model: Optional[str] = typer.Option(None, "--model", metavar="NAME", help="embedded: the target (default: the config's)."),
    draft: Optional[str] = typer.Option(None, "--draft", metavar="NAME", help="embedded: the draft model."),
    method: Optional[str] = typer.Option(None, "--method", metavar="NAME", help="embedded: draft or ngram."),
    themes: Optional[list[str]] = typer.Option(None, "--theme", metavar="NAME", help="A theme to shoot (repeat it); default: every theme (embedded: dark)."),
    screens: Optional[list[str]] = typer.Option(None, "--screen", metavar="NAME", help="chat, compare, help, history, markdown or adaptive (repeat it); default: all (embedded: chat)."),
) -> None:
    """Regenerate screenshots of the main screens in every theme from a scripted run, or
    from a real model: `--engine embedded --model smollm2-135m --method ngram` writes
    chat-real-dark.svg."""
    from spectui.tui.screenshots import FIRST_THEME_ONLY, SCREENS, take_screenshots

    unknown = [name for name in screens or () if name not in SCREENS + FIRST_THEME_ONLY]
    if unknown:
        fail(UsageError(f"no screen {unknown[0]!r}: known are {', '.join(SCREENS + FIRST_THEME_ONLY)}"))
    factory = config = None
    if engine is ScreenshotEngine.embedded:
        from spectui.settings.config import load_config

        try:
            from spectui.engines.factory import models_to_run
            from spectui.host.plan import check_engine_choice, engine_factory_for, settled_config

            config = settled_config(load_config().with_overrides(engine="embedded", model=model, draft=draft, method=method))
            models = models_to_run(config.engine, config.model, config.draft)
            check_engine_choice(config, models)
            factory = engine_factory_for(config, models)
        except SpectuiError as error:
            fail(error)
        themes, screens = themes or ["dark"], screens or ["chat"]
    for path in take_screenshots(out, engine_factory=factory, themes=themes, screens=screens, config=config):
        typer.echo(str(path))


def register(app: typer.Typer) -> None:
    """Add chat, screenshots, config and history to the main `spectui` app."""
    app.command("chat")(chat_command)
    app.command("screenshots")(screenshots_command)
    app.add_typer(config_app, name="config")
    app.add_typer(history_app, name="history")
