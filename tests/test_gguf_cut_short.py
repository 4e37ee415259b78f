"""A GGUF cut short, given with -m or picked on the model screen, is named as cut short in one
line (where its header says it ends and where it does), never as a numpy or struct error."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from spectui.cli.app import app
from spectui.host.messages import EngineFailed
from spectui.host.plan import EnginePlan
from spectui.models.registry import resolve_pair
from spectui.settings.options import EngineOptions
from fake_engines import PlanEngine, factory_for
from test_host import Owner, make_host

pytest.importorskip("llama_cpp_py_sync")


@pytest.fixture(scope="module")
def whole_gguf(tmp_path_factory) -> Path:
    from tiny_gguf import write_tiny_gguf

    return write_tiny_gguf(tmp_path_factory.mktemp("gguf") / "tiny.gguf")


def cut(whole: Path, folder: Path, size: int) -> Path:
    path = folder / f"cut-{size}.gguf"
    path.write_bytes(whole.read_bytes()[:size])
    return path


def test_a_gguf_cut_in_its_tensors_given_with_m_says_expected_and_actual_size(whole_gguf, tmp_path, monkeypatch):
    monkeypatch.setenv("SPECTUI_CACHE_DIR", str(tmp_path / "cache"))
    size = whole_gguf.stat().st_size
    path = cut(whole_gguf, tmp_path, size * 2 // 3)
    result = CliRunner().invoke(app, ["generate", "-m", str(path), "--max-tokens", "2", "hi"])
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert f"{path} is cut short: its header says the file holds {size:,} bytes, it has {size * 2 // 3:,}" \
        in result.output
    assert "reshape" not in result.output


def test_a_failed_switch_to_a_gguf_cut_in_its_header_says_so_in_one_line(whole_gguf, tmp_path, monkeypatch):
    from spectui.engines.ggml.build import build_ggml_engine

    monkeypatch.setenv("SPECTUI_CACHE_DIR", str(tmp_path / "cache"))
    path = cut(whole_gguf, tmp_path, 20)  # not even the 24 bytes of the header's counts
    old = PlanEngine([None, 1])
    host = make_host(factory_for(old), 2)
    host.start()
    owner = Owner(host)
    owner.until(lambda: host.state.ready)
    options = EngineOptions(model=str(path), method="ngram", device="cpu", backend="ggml")

    def build(progress):
        return build_ggml_engine(options, resolve_pair(str(path), None), progress)

    host.swap(EnginePlan(build), "cut-20.gguf")
    owner.until(lambda: owner.of(EngineFailed))
    note = owner.of(EngineFailed)[-1].restart_note
    assert note.startswith(f"Could not switch to cut-20.gguf: {path} is cut short: its header runs past "
                           "the end of the file (20 bytes)"), note
    assert "unpack_from" not in note and host.engine is old
