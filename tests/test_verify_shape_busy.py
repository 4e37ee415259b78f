"""A verify's cost timed at load while other processes held the cores is no measurement of
this machine (issue 59 item 3: the first screen read "a verify of 5 costs 72.3 steps here" with
nothing saying the machine was busy; the figure was kept for every later start)."""

from __future__ import annotations

from types import SimpleNamespace

from spectui.engines import threads
from spectui.engines.ggml import lib


def test_a_verify_cost_timed_on_a_busy_machine_is_neither_kept_nor_called_measured(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECTUI_CACHE_DIR", str(tmp_path))
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")
    model = SimpleNamespace(path=gguf, batch_invariant=True)
    probes: list[object] = []
    monkeypatch.setattr(lib, "invariant_rows", lambda probed: probes.append(probed) or lib.VerifyShape(4, 17.9))
    monkeypatch.setattr(lib, "library_version", lambda: "test")
    share = {"others": 0.9}
    monkeypatch.setattr(threads, "others_share", lambda before, after: share["others"])

    assert lib.cached_invariant_rows(model) == lib.VerifyShape(4, 17.9, busy=True)
    assert lib.cached_invariant_rows(model).busy and len(probes) == 2  # not kept: timed again at the next load
    assert not (tmp_path / "llamacpp" / "verify-shape.json").exists()

    share["others"] = 0.05
    assert lib.cached_invariant_rows(model) == lib.VerifyShape(4, 17.9)
    assert lib.cached_invariant_rows(model) == lib.VerifyShape(4, 17.9) and len(probes) == 3  # a quiet one is kept


def test_the_ggml_backend_calls_a_busy_timing_no_measurement(monkeypatch):
    from spectui.engines.ggml import backend

    monkeypatch.setattr(backend, "LlamaCached", lambda model, rows, fast_prefill: SimpleNamespace(model=model))
    for busy, measured in ((True, None), (False, 17.9)):
        monkeypatch.setattr(lib, "cached_invariant_rows", lambda model, busy=busy: lib.VerifyShape(4, 17.9, busy=busy))
        made = backend.GgmlBackend(SimpleNamespace())  # type: ignore[arg-type]  # the shape is all it reads here
        assert made.measured_verify_slope == measured and made.verify_slope == 17.9  # adaptive k's prior still has it
