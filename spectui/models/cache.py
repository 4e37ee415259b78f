"""The model cache on disk: its folders, their sizes, a full check of one, removing one.

No torch at import: `spectui models` and `spectui doctor` use it as it is.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from spectui.core.errors import ModelError
from spectui.models.integrity import ByteProgress, full_problem, quick_problem
from spectui.models.registry import MARKER_FILE, cache_dir, converted_dir, get_spec, gguf_dir, read_marker

FLOAT32_FOLDER = "float32"  # beside the int8 store: a Hugging Face folder made on demand
STORE_FORMAT = 2  # spectui.json "format"; a folder without it was written by spectui before the int8 store
# The GGUF's sha256 in spectui.json. Format 1 called it "source_sha256": a spectui of that format
# finding a format-2 folder sees no hash of its own and converts again, rather than load a folder
# with no model.safetensors in it (two versions sharing one cache while branches are merged).
SOURCE_HASH_KEY = "gguf_sha256"


def int8_scheme() -> dict:
    """What the stored int8 weights mean; a store written under another scheme is rebuilt."""
    from spectui.models.quantize import WEIGHT_MAX

    return {"weights": "int8 per output channel, symmetric", "weight_max": WEIGHT_MAX}


_checked: dict[Path, int] = {}  # folders whose quick check passed in this process -> their marker's mtime
# Beside spectui.json once every byte matched its checksum, holding that spectui.json's mtime: the
# first load after a download (and `models verify`) hashes every byte, later loads the sample
# (a file whose stamp changed since its record, whole: spectui.models.integrity).
FULL_CHECK_FILE = "full-check-passed"


def _full_check_passed(folder: Path, stamp: int) -> bool:
    try:
        return (folder / FULL_CHECK_FILE).read_text().strip() == str(stamp)
    except OSError:
        return False


def record_full_check(folder: Path) -> None:
    with contextlib.suppress(OSError):  # a read-only cache: every load hashes every byte then
        (folder / FULL_CHECK_FILE).write_text(str((folder / MARKER_FILE).stat().st_mtime_ns))


def forget_full_check(folder: Path) -> None:
    """The next load hashes every byte again (a verify found damage that a rebuild must replace)."""
    _checked.pop(folder, None)
    with contextlib.suppress(OSError):
        (folder / FULL_CHECK_FILE).unlink()


def cache_problem(folder: Path, source_sha256: str | None, weights: str = "int8") -> str | None:
    """None when `folder` is a complete conversion of this format whose files match their
    checksums; "" when there is nothing there; else what is wrong, as a phrase."""
    marker = read_marker(folder)
    if marker is None:
        return "is incomplete (a conversion was cut short)" if folder.is_dir() else ""
    if marker.get("format") != STORE_FORMAT:
        return f"was written by an older spectui ({marker.get('storage_dtype', 'float32')} weights)"
    if marker.get("weights") != weights or (weights == "int8" and marker.get("int8") != int8_scheme()):
        return "holds weights of another kind"
    if source_sha256 is not None and marker.get(SOURCE_HASH_KEY) != source_sha256:
        return "was converted from other weights than the pinned ones"
    stamp = (folder / MARKER_FILE).stat().st_mtime_ns
    if _checked.get(folder) == stamp:
        return None
    records = marker.get("files") or {}
    full = not _full_check_passed(folder, stamp)
    problem = full_problem(folder, records) if full else quick_problem(folder, records)
    if problem is None and not records:
        problem = "lists no checksums"
    if problem is not None:
        return f"is damaged ({problem})"
    if full:
        record_full_check(folder)
    _checked[folder] = stamp
    return None


def is_converted(folder: Path, source_sha256: str | None = None) -> bool:
    """True when `folder` holds a complete, intact conversion (of the file with this hash, when given)."""
    return cache_problem(folder, source_sha256) is None


def tree_size(folder: Path) -> int:
    """Bytes of the files under `folder`; files that vanish or cannot be read are skipped."""
    total = 0
    for root, _dirs, files in os.walk(folder):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.stat(os.path.join(root, name)).st_size
    return total


@dataclass(frozen=True)
class CachedModel:
    key: str  # the folder's name: an alias, or gguf-<name>-<hash> for a user's .gguf file
    folder: Path
    size_bytes: int
    state: str  # "int8", "old" (written before the int8 store), "incomplete", "converting"


def cached_models() -> list[CachedModel]:
    models_dir = cache_dir() / "models"
    if not models_dir.is_dir():
        return []
    found = []
    for folder in sorted(models_dir.iterdir()):
        if not folder.is_dir():
            continue
        if folder.name.startswith("."):  # convert.py's work folder: a conversion running or cut short
            found.append(CachedModel(folder.name, folder, tree_size(folder), "converting"))
            continue
        marker = read_marker(folder)
        state = "incomplete" if marker is None else "int8" if marker.get("format") == STORE_FORMAT else "old"
        found.append(CachedModel(folder.name, folder, tree_size(folder), state))
    return found


def cache_total() -> int:
    root = cache_dir()
    return tree_size(root) if root.is_dir() else 0


def cache_key(name: str) -> str:
    """The cache folder name for an alias (or a folder name as `spectui doctor` lists it)."""
    spec = get_spec(name)
    if spec is not None and spec.source == "hub":
        raise ModelError(f"{spec.alias} lives in the Hugging Face cache, not spectui's: "
                         f"remove it with `hf cache delete` ({spec.hub_id})")
    key = spec.alias if spec is not None else name.strip()
    if not key or "/" in key or key.startswith("."):
        raise ModelError(f"{name!r} is not a model in spectui's cache: `spectui models` lists them")
    return key


def remove_model(name: str, places: list[Path] | None = None) -> int:
    """Delete a model's converted folder and any GGUF kept for it (or the `places` the
    inventory found for it); returns the bytes freed."""
    key = cache_key(name)
    places = places if places is not None else [converted_dir(key), gguf_dir(key)]
    with cache_lock(key):  # not while a conversion of it is running
        present = [place for place in places if place.exists()]
        if not present:
            raise ModelError(f"{name} is not in the cache (nothing to remove): `spectui models` lists what is")
        freed = sum(tree_size(place) for place in present)
        for place in present:
            shutil.rmtree(place)
    return freed


def verify_folder(folder: Path, progress: ByteProgress | None = None) -> str | None:
    """Every byte of a converted folder (and of its float32 copy) against the checksums written
    with it: None when all match, else what is wrong."""
    marker = read_marker(folder)
    if marker is None:
        return "incomplete (no spectui.json)"
    if marker.get("format") != STORE_FORMAT:
        return "written by an older spectui (float32 weights, no checksums)"
    problem = _hashed_whole(folder, marker.get("files") or {}, progress)
    if problem is not None:
        return problem
    float_folder = folder / FLOAT32_FOLDER
    if float_folder.is_dir():
        float_marker = read_marker(float_folder)
        if float_marker is None:
            return f"{FLOAT32_FOLDER}/ is incomplete"
        problem = _hashed_whole(float_folder, float_marker.get("files") or {}, progress)
        if problem is not None:
            return f"{FLOAT32_FOLDER}/{problem}"
    return None


def _hashed_whole(folder: Path, records: dict, progress: ByteProgress | None) -> str | None:
    """full_problem, remembered: a pass spares the next load its full hash, damage makes it hash
    every byte (the sampled check may miss it)."""
    problem = full_problem(folder, records, progress)
    if problem is None:
        record_full_check(folder)
    else:
        forget_full_check(folder)
    return problem


def cache_unwritable(error: OSError) -> ModelError:
    """A read-only or full cache folder: the one line that says where and what to do."""
    return ModelError(
        f"cannot write the model cache {cache_dir()} ({error.strerror or error}): "
        "make it writable, or set SPECTUI_CACHE_DIR to a folder of your own"
    )


@contextlib.contextmanager
def cache_lock(key: str) -> Iterator[None]:
    """One process at a time converts or removes a given model; the others wait, then see the result."""
    locks = cache_dir() / "locks"
    try:
        locks.mkdir(parents=True, exist_ok=True)
        import fcntl
    except ImportError:  # Windows: no advisory locks; the atomic renames still keep the cache sane
        yield
        return
    except OSError as error:
        raise cache_unwritable(error) from None
    try:
        handle = open(locks / f"{key}.lock", "w")
    except OSError as error:
        raise cache_unwritable(error) from None
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
