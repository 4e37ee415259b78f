"""What the model cache holds, in one list: the GGUFs the ggml backend keeps, the converted
stores torch loads, the tokenizers read out of GGUFs and the llama.cpp library copies.

`spectui models`, `models verify`, `models rm` and `spectui doctor` all read it, so none of
them misses a kind of file another one sees. No torch at import.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import spectui.models.cache as cache
from spectui.models.cache import tree_size
from spectui.models.registry import cache_dir

# kind: "gguf" (a model's GGUF kept for llama.cpp), "store" (a converted model), "tokenizer",
# "library" (libllama's patched copy).
MODEL_KINDS = ("gguf", "store")


@dataclass(frozen=True)
class CacheItem:
    kind: str
    key: str  # an alias, or the folder's name
    folder: Path
    size_bytes: int
    # store: "int8", "old", "incomplete", "converting"; gguf: "kept", or "incomplete" (no
    # record: a fetch cut short); tokenizer and library: "ok".
    state: str


def inventory() -> list[CacheItem]:
    """Everything in the cache, kind by kind, each kind in name order."""
    items = [_gguf_item(folder) for folder in _folders(cache_dir() / "gguf")]
    items += [CacheItem("store", model.key, model.folder, model.size_bytes, model.state) for model in cache.cached_models()]
    items += [CacheItem("tokenizer", folder.name, folder, tree_size(folder), "ok")
              for folder in _folders(cache_dir() / "tokenizers") if ".partial" not in folder.name]
    items += [CacheItem("library", folder.name, folder, tree_size(folder), "ok")
              for folder in _folders(cache_dir() / "llamacpp") if folder.name.startswith("lib-")
              and not folder.name.endswith((".partial", ".stale"))]
    return items


def model_items(key: str | None = None) -> list[CacheItem]:
    """The cached models (GGUFs and stores), or those of one cache key."""
    return [item for item in inventory() if item.kind in MODEL_KINDS and (key is None or item.key == key)]


def places_of(key: str) -> list[Path]:
    """Every folder of the cache that belongs to one model: its store, its GGUF and the
    tokenizer read out of that GGUF; those present."""
    from spectui.models.registry import converted_dir, gguf_dir

    places = [converted_dir(key), gguf_dir(key), tokenizer_of(gguf_dir(key))]
    return [place for place in places if place is not None and place.exists()]


def kept_gguf(folder: Path) -> Path | None:
    """The GGUF file a gguf/<alias>/ folder's record names, or None without a readable record."""
    from spectui.models.gguf_local import RECORD_FILE

    try:
        return Path(json.loads((folder / RECORD_FILE).read_text())["path"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def tokenizer_of(folder: Path) -> Path | None:
    """The tokenizers/ folder read out of the GGUF a gguf/<alias>/ folder keeps, if it was made."""
    path = kept_gguf(folder)
    if path is None:
        return None
    try:
        made = cache_dir() / "tokenizers" / f"{path.stem}-{path.stat().st_size}"
    except OSError:
        return None
    return made if made.is_dir() else None


def _gguf_item(folder: Path) -> CacheItem:
    path = kept_gguf(folder)
    size = tree_size(folder)
    if path is not None and not path.is_relative_to(folder):  # read in place from an installed package
        size += path.stat().st_size if path.is_file() else 0
    return CacheItem("gguf", folder.name, folder, size, "kept" if path is not None and path.is_file() else "incomplete")


def _folders(parent: Path) -> list[Path]:
    if not parent.is_dir():
        return []
    return sorted(path for path in parent.iterdir() if path.is_dir() and not path.name.startswith("."))


def model_rows() -> list[dict]:
    """registry.list_models()'s rows with each index alias's cache state read from the inventory:
    cached when its GGUF is kept or a store is converted, its size the two together."""
    from spectui.models.registry import list_models

    by_key: dict[str, list[CacheItem]] = {}
    for item in model_items():
        by_key.setdefault(item.key, []).append(item)
    rows = list_models()
    for row in rows:
        if row["source"] != "index":
            continue
        items = [item for item in by_key.get(row["alias"], []) if item.state in ("kept", "int8", "old")]
        store = next((item for item in items if item.kind == "store"), None)
        row["cached"] = bool(items)
        row["state"] = ("old format" if store.state == "old" else "int8") if store else "gguf" if items else None
        row["path"] = str(items[0].folder) if items else None
        row["size_bytes"] = sum(item.size_bytes for item in items) if items else None
    return rows
