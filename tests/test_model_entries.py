"""A model name is resolved once: from `spectui chat --model X` to the engine it loads, the
calls that carry the model (its name, its ResolvedModel, the pair, its GGUF files) enter each
module of spectui/models/ at most a few times, not once per question asked of it.

The count is a profile of the real path (run_chat, the host's load thread, build_engine on
ggml) with only the app left out: a call from spectui's code outside spectui/models/ (stdlib
frames between skipped) into a function defined there, whose arguments carry the model, is one entry; a generator (a context
manager) counts once, not at each resumption.
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest

import spectui.models
from spectui.host.messages import EngineFailed, EngineReady
from spectui.models.gguf_local import GgufModel, GgufPair
from spectui.models.registry import ModelPair, ResolvedModel

pytest.importorskip("llama_cpp_py_sync")

MODELS = str(Path(spectui.models.__file__).parent)
SPECTUI = str(Path(spectui.__file__).parent)
MOST = 3  # entries per module of spectui/models/ for one model's way to its engine
CARRIERS = (ResolvedModel, ModelPair, GgufModel, GgufPair)


def spectui_caller(frame):
    """The nearest frame up the stack in spectui's own code (past contextlib's and the like)."""
    caller = frame.f_back
    while caller is not None and not caller.f_code.co_filename.startswith(SPECTUI):
        caller = caller.f_back
    return caller


class Entries:
    """Calls into spectui/models/ that carry the model named `name`, per module."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.counts: Counter[str] = Counter()
        self.calls: list[str] = []
        self._generators: list = []  # held, so that a frame's id is never reused while counting

    def carries_model(self, frame) -> bool:
        values = [frame.f_locals.get(name) for name in frame.f_code.co_varnames[:frame.f_code.co_argcount
                                                                                   + frame.f_code.co_kwonlyargcount]]
        return any(self.carries(value) for value in values)

    def carries(self, value, depth: int = 2) -> bool:
        """The model itself, or in a list of requests or a record that holds it (two levels down)."""
        if isinstance(value, CARRIERS) or (isinstance(value, str) and value == self.name):
            return True
        if depth == 0:
            return False
        if isinstance(value, (list, tuple)):
            return any(self.carries(item, depth - 1) for item in value)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return any(self.carries(getattr(value, field.name), depth - 1) for field in dataclasses.fields(value))
        return False

    def profile(self, frame, event, arg) -> None:
        if event != "call" or not frame.f_code.co_filename.startswith(MODELS):
            return
        caller = spectui_caller(frame)
        if caller is not None and caller.f_code.co_filename.startswith(MODELS):
            return  # within models/: the module's own business
        if frame.f_code.co_flags & inspect.CO_GENERATOR:
            if any(seen is frame for seen in self._generators):
                return  # a generator resumed, not entered again
            self._generators.append(frame)
        if self.carries_model(frame):
            module = Path(frame.f_code.co_filename).name
            self.counts[module] += 1
            where = f"{Path(caller.f_code.co_filename).name}:{caller.f_lineno}" if caller is not None else "?"
            self.calls.append(f"{module} {frame.f_code.co_name} from {where}")

    def over(self) -> dict[str, int]:
        return {module: count for module, count in self.counts.items() if count > MOST}


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory) -> Path:
    from tiny_gguf import write_tiny_gguf

    return write_tiny_gguf(tmp_path_factory.mktemp("gguf") / "tiny.gguf")


@pytest.fixture(scope="module")
def cache(tiny_gguf, tmp_path_factory) -> Path:
    """A cache with the tiny GGUF's tokenizer already read out (transformers, slow under a profile)."""
    from spectui.models.gguf_local import tokenizer_folder
    from spectui.models.registry import resolve

    folder = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SPECTUI_CACHE_DIR", str(folder))
        tokenizer_folder(resolve(str(tiny_gguf)), tiny_gguf)
    return folder


def chat_until_loaded(overrides: dict, monkeypatch, tmp_path, cache: Path) -> bool:
    """run_chat as `spectui chat` runs it, the app replaced by one that waits for the load."""
    from spectui.cli import chat

    monkeypatch.setattr(chat, "require_terminal", lambda: None)  # pytest's stdin is no terminal
    monkeypatch.setattr(chat, "leave", lambda code: code)
    monkeypatch.setenv("SPECTUI_CONFIG_DIR", str(tmp_path))
    monkeypatch.setenv("SPECTUI_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("SPECTUI_CACHE_DIR", str(cache))
    monkeypatch.setenv("SPECTUI_ENGINE_PROCESS", "0")  # the engine in this process, where the profile sees it
    loaded = {}

    class App:
        return_code = 0
        history_left = None

        def __init__(self, host, config, store, **options) -> None:
            self.host = host

        def run(self) -> None:
            ended = threading.Event()
            self.host.listen(lambda message: ended.set() if isinstance(message, (EngineReady, EngineFailed)) else None)
            woken = threading.Event()
            self.host.attach(woken.set)
            while not ended.is_set():
                assert woken.wait(60), "the load went quiet"
                woken.clear()
                self.host.pump()
            loaded["ready"] = self.host.state.ready
            assert self.host.close()

    monkeypatch.setattr("spectui.tui.app.SpectuiApp", App)
    assert chat.run_chat(overrides, history=False) == 0
    return loaded["ready"]


def count_entries(name: str, overrides: dict, monkeypatch, tmp_path, cache: Path) -> Entries:
    entries = Entries(name)
    threading.setprofile(entries.profile)  # the load thread
    sys.setprofile(entries.profile)
    try:
        assert chat_until_loaded(overrides, monkeypatch, tmp_path, cache)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]  # None removes it, as sys.setprofile(None) does
    return entries


@pytest.mark.slow  # a real load under a profile: about 10 s
@pytest.mark.parametrize("method", ["auto", "draft"])
def test_a_model_name_enters_models_a_few_times_on_its_way_to_the_engine(tiny_gguf, cache, method, monkeypatch,
                                                                          tmp_path):
    name = str(tiny_gguf)
    overrides = {"model": name, "engine": "embedded", "device": "cpu", "backend": "ggml", "method": method}
    if method == "draft":
        overrides["draft"] = name  # the same file: the draft's tokens are checked against the target's
    entries = count_entries(name, overrides, monkeypatch, tmp_path, cache)
    assert entries.counts, "the profile saw no entry: the count itself is broken"
    assert entries.over() == {}, "\n".join(entries.calls)
    print(method, dict(entries.counts))  # for the record: pytest -s shows them


def test_the_count_sees_each_entry_and_a_generator_once(tiny_gguf):
    from spectui.models import gguf_local, registry

    model, other = registry.resolve("smollm2-135m"), registry.resolve(str(tiny_gguf))
    entries = Entries("smollm2-135m")
    sys.setprofile(entries.profile)
    try:
        for _ in range(MOST + 1):
            gguf_local.has_gguf(model)
        with gguf_local.loading_marker(other):  # entered once, resumed twice
            pass
        registry.cache_dir()  # no model in its arguments: not counted
    finally:
        sys.setprofile(None)
    assert entries.counts == Counter({"gguf_local.py": MOST + 2})
    assert entries.over() == {"gguf_local.py": MOST + 2}


@pytest.mark.slow  # two tiny models loaded on torch under a profile
def test_a_model_folder_enters_models_a_few_times_on_its_way_to_the_torch_engine(tiny_folders, cache, monkeypatch,
                                                                                  tmp_path):
    name = tiny_folders["target"]
    overrides = {"model": name, "draft": tiny_folders["draft"], "engine": "embedded", "device": "cpu",
                 "backend": "torch", "method": "draft"}
    entries = count_entries(name, overrides, monkeypatch, tmp_path, cache)
    assert entries.counts, "the profile saw no entry: the count itself is broken"
    assert entries.over() == {}, "\n".join(entries.calls)
    print("torch", dict(entries.counts))
