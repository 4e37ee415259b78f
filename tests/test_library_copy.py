"""The cache's copy of libllama (made on a glibc older than 2.38): a copy cut short is rebuilt,
never mapped (it killed the process with SIGBUS), and a copy that crashes when loaded sends
--backend auto to torch with the reason."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("llama_cpp_py_sync")

ROOT = Path(__file__).resolve().parents[1]
ASK = "from spectui.engines.ggml.lib import library_problem; print(library_problem())"


def needs_the_copy() -> None:
    from spectui.engines.ggml import compat
    from spectui.engines.ggml.lib import package_dir

    if compat.glibc_has_c23() or not compat.needs_c23_glibc((package_dir() / "libllama.so").read_bytes()):
        pytest.skip("libllama loads from the wheel here: no copy is made")


def library_problem_in_child(cache: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "SPECTUI_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", ASK], env=env, capture_output=True, text=True, timeout=300)


def test_a_library_copy_cut_short_is_rebuilt_not_loaded(tmp_path):
    needs_the_copy()
    first = library_problem_in_child(tmp_path)
    assert first.returncode == 0 and first.stdout.strip() == "None", first.stderr
    [copy] = (tmp_path / "llamacpp").glob("lib-*/libllama.so")
    size = copy.stat().st_size
    os.truncate(copy, size // 2)  # what a full disk or a killed first start leaves

    second = library_problem_in_child(tmp_path)
    assert second.returncode == 0, f"the start died ({second.returncode}): {second.stderr[-500:]}"
    assert second.stdout.strip() == "None"
    assert copy.stat().st_size == size


def test_a_copy_that_crashes_when_loaded_sends_auto_to_torch_with_the_reason(monkeypatch, tmp_path):
    from spectui.engines.ggml import build, lib, library_copy
    from spectui.models.registry import resolve_pair
    from spectui.settings.options import EngineOptions

    needs_the_copy()
    monkeypatch.setenv("SPECTUI_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(lib, "_loaded", None)  # this process must not map the copy: only the child does
    # The child loads the copy and dies of SIGBUS, as a damaged copy's loader does.
    monkeypatch.setattr(library_copy, "PROBE_CODE", "import os, signal; os.kill(os.getpid(), signal.SIGBUS)")
    problem = lib.library_problem()
    assert problem is not None and "killed by SIGBUS" in problem and "--backend torch" in problem
    assert lib._loaded is None

    monkeypatch.setattr(library_copy, "_load_in_child", lambda path: pytest.fail("probed twice"))
    backend = build.chosen_backend(EngineOptions(model="smollm2-135m", device="cpu", method="ngram"),
                                   resolve_pair("smollm2-135m", None))
    assert backend.name == "torch" and "killed by SIGBUS" in backend.why
