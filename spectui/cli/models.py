"""`spectui models`: the registry and the weight cache (list, fetch, rm, verify)."""

from __future__ import annotations

import json

from rich.console import Console
from rich.table import Table

from spectui.core.errors import ModelError


def size_text(size_bytes: int | None) -> str:
    if not size_bytes:
        return ""
    return f"{size_bytes / 1e9:.2f} GB" if size_bytes >= 1e9 else f"{size_bytes / 1e6:.0f} MB"


def print_models(as_json: bool) -> None:
    from spectui.models.cache import cache_total
    from spectui.models.registry import DEFAULT_DRAFT, DEFAULT_TARGET, cache_dir, list_models

    rows = list_models()
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    table = Table(title="spectui models", title_justify="left")
    table.add_column("alias", no_wrap=True)
    for column in ("params", "default draft", "cached", "size on disk", "from"):
        table.add_column(column)
    for row in rows:
        alias = row["alias"]
        if alias in (DEFAULT_TARGET, DEFAULT_DRAFT):
            alias += " (default)"
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


def fetch_model(name: str) -> None:
    from spectui.models.fetch import rich_progress
    from spectui.models.load import model_folder

    with rich_progress() as progress:
        folder = model_folder(name, progress)
    Console(stderr=True).print(f"{name}: ready in {folder}")


def remove_model(name: str) -> None:
    from spectui.models.cache import remove_model as remove

    freed = remove(name)
    Console(stderr=True).print(f"{name}: removed from the cache, {size_text(freed) or '0 MB'} freed")


def verify_models(name: str | None) -> None:
    """Hash every byte of the cached models (or of `name`); rebuild what does not match, one
    line each."""
    from spectui.models.cache import cache_key, cached_models, verify_folder
    from spectui.models.fetch import rich_progress

    models = cached_models()
    if name is not None:
        key = cache_key(name)
        models = [model for model in models if model.key == key]
        if not models:
            raise ModelError(f"{name} is not in the cache: `spectui models fetch {name}` fetches it")
    console = Console(stderr=True, highlight=False)
    if not models:
        console.print("the cache holds no models")
        return
    for model in models:
        if model.state == "converting":
            continue
        with rich_progress() as progress:
            problem = verify_folder(model.folder, lambda done, total: progress(f"{model.key} verify", done, total))
        if problem is None:
            console.print(f"{model.key}: ok ({size_text(model.size_bytes)})")
            continue
        console.print(f"{model.key}: {problem}: rebuilding it", style="yellow")
        try:
            rebuilt = _rebuild(model.key)
        except ModelError as error:  # offline: the hub or index cannot be reached
            raise ModelError(f"{model.key}: not rebuilt, the damaged copy is kept ({error})") from None
        if not rebuilt:
            console.print(f"{model.key}: kept until it is converted again from its .gguf file, the next time it is used")


def _rebuild(key: str) -> bool:
    """Convert a damaged model again (an index alias); True when it was rebuilt here."""
    from spectui.models.fetch import rich_progress
    from spectui.models.load import model_folder
    from spectui.models.registry import get_spec

    # The damaged copy stays until a good one replaces it (the conversion renames over it):
    # offline, a removal first left nothing. verify_folder made the next load hash every byte.
    spec = get_spec(key)
    if spec is None or spec.source != "index":
        return False
    with rich_progress() as progress:
        model_folder(key, progress)
    return True
