"""`spectui models`: the registry and the weight cache."""

from __future__ import annotations

import json

from rich.console import Console
from rich.table import Table


def _size(size_bytes: int | None) -> str:
    if not size_bytes:
        return ""
    return f"{size_bytes / 1e9:.2f} GB" if size_bytes >= 1e9 else f"{size_bytes / 1e6:.0f} MB"


def print_models(as_json: bool) -> None:
    from spectui.models.registry import DEFAULT_DRAFT, DEFAULT_TARGET, list_models

    rows = list_models()
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    table = Table(title="spectui models", title_justify="left")
    table.add_column("alias", no_wrap=True)
    for column in ("params", "default draft", "cached", "size", "from"):
        table.add_column(column)
    for row in rows:
        alias = row["alias"]
        if alias in (DEFAULT_TARGET, DEFAULT_DRAFT):
            alias += " (default)"
        table.add_row(
            alias,
            row["params"] or "",
            row["default_draft"] or "",
            "yes" if row["cached"] else "",
            _size(row["size_bytes"]),
            row["origin"] or "",
        )
    console = Console()
    console.print(table)
    console.print(
        "Also accepted: a local Hugging Face folder, a .gguf file, or a hub id (org/name).",
        style="dim",
    )


def fetch_model(name: str) -> None:
    from spectui.models.fetch import rich_progress
    from spectui.models.load import ensure_local

    with rich_progress() as progress:
        folder = ensure_local(name, progress)
    Console(stderr=True).print(f"{name}: ready in {folder}")
