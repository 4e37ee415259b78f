"""The patched copy of libllama's libraries in the cache: made, checked, and loaded once in a child.

A copy cut short (a full disk, a killed start, a file truncated by hand) maps pages past its
end: dlopen in this process dies of SIGBUS with nothing printed. So the copy is trusted only
when every file matches the size and sha256 recorded beside it when it was made (from the
wheel's files of the same size and sha256), is rebuilt when it does not, and is loaded first
in a child process, where a crash is a return code. The child's verdict is kept per copy
hash: later starts do not pay for it again. Stdlib only.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from spectui.core.safe_text import safe_line

RECORD_FILE = "spectui-copy.json"  # beside the copy: what it was made from and what it holds
PROBE_FILE = "spectui-probe.json"  # the child's verdict on the copy with this hash
PROBE_SECONDS = 120
# What the child runs: load the library and initialise its backends, as library() does.
PROBE_CODE = "import ctypes, sys; ctypes.CDLL(sys.argv[1]).llama_backend_init()"


class LibraryCopyError(RuntimeError):
    """The copy cannot be used: one line that says why and what to do."""


def _digest(data: bytes) -> dict:
    return {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def copy_record(sources: dict[str, bytes], copies: dict[str, bytes]) -> dict:
    """{name: {"source": size and sha256 of the wheel's file, "copy": those of the copy}}."""
    return {name: {"source": _digest(sources[name]), "copy": _digest(copies[name])} for name in sources}


def write_copy(folder: Path, sources: dict[str, bytes], patch: Callable[[bytes], bytes]) -> None:
    """The copy of `sources` ({name: wheel bytes}) in `folder`, each through `patch`, with its
    record; written under a .partial name and renamed into place whole."""
    partial = folder.with_name(folder.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    copies = {name: patch(data) for name, data in sources.items()}
    for name, data in copies.items():
        (partial / name).write_bytes(data)
    (partial / RECORD_FILE).write_text(json.dumps(copy_record(sources, copies)))
    stale = folder.with_name(folder.name + ".stale")
    if folder.exists():  # a copy that failed its check: out of the way before the new one goes in
        shutil.rmtree(stale, ignore_errors=True)
        os.replace(folder, stale)
    os.replace(partial, folder)
    shutil.rmtree(stale, ignore_errors=True)


def copy_problem(folder: Path, sources: dict[str, bytes]) -> str | None:
    """Why the copy in `folder` is not the one these wheel files make, or None when it is."""
    try:
        record = json.loads((folder / RECORD_FILE).read_text())
    except (OSError, ValueError):
        return "it has no record of what it was made from" if folder.exists() else "there is none"
    if not isinstance(record, dict) or set(record) != set(sources):
        return "it was made from other files"
    for name, data in sources.items():
        entry = record[name]
        if not isinstance(entry, dict) or entry.get("source") != _digest(data):
            return f"{name} was made from another build of it"
        try:
            size = (folder / name).stat().st_size
            if size != entry["copy"]["size"]:
                return f"{name} has {size:,} bytes where {entry['copy']['size']:,} were written"
            if _digest((folder / name).read_bytes()) != entry["copy"]:
                return f"{name} does not match its sha256"
        except (OSError, KeyError, TypeError) as error:
            return f"{name} cannot be read ({getattr(error, 'strerror', None) or error})"
    return None


def copy_hash(folder: Path) -> str:
    """One sha256 for the whole copy (its record names every file's)."""
    return hashlib.sha256((folder / RECORD_FILE).read_bytes()).hexdigest()


def probe_problem(folder: Path) -> str | None:
    """Why libllama.so in `folder` cannot be loaded, found by loading it in a child process
    (once per copy: the verdict is kept beside it), or None when it loads."""
    key = copy_hash(folder)
    try:
        kept = json.loads((folder / PROBE_FILE).read_text())
        if kept.get("copy") == key:
            return kept.get("problem")
    except (OSError, ValueError, AttributeError):
        pass
    problem = _load_in_child(folder / "libllama.so")
    try:
        (folder / PROBE_FILE).write_text(json.dumps({"copy": key, "problem": problem}))
    except OSError:  # a read-only cache: the next start probes again
        pass
    return problem


def _load_in_child(library: Path) -> str | None:
    try:
        done = subprocess.run([sys.executable, "-I", "-c", PROBE_CODE, str(library)], capture_output=True,
                              timeout=PROBE_SECONDS, check=False)
    except subprocess.TimeoutExpired:
        return f"a test load of {library} did not finish in {PROBE_SECONDS} s"
    except OSError as error:
        return f"a test load of {library} could not start ({error.strerror or error})"
    if done.returncode == 0:
        return None
    if done.returncode < 0:
        try:
            name = signal.Signals(-done.returncode).name
        except ValueError:
            name = f"signal {-done.returncode}"
        return f"a test load of {library} was killed by {name}"
    lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
    return f"a test load of {library} failed ({safe_line(lines[-1]) if lines else f'exit {done.returncode}'})"
