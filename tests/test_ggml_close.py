"""Closing a ggml engine twice once segfaulted (issue 48): the second close cleared the
KV memory of a llama.cpp context the first had freed. Run in a child, as a crash would take
the test run with it."""

from __future__ import annotations

import subprocess
import sys

import pytest

CLOSE_TWICE = """
from spectui.engines.ggml.build import build_ggml_engine
from spectui.models.registry import resolve_pair
from spectui.settings.options import EngineOptions

engine = build_ggml_engine(EngineOptions(model="smollm2-135m", method="draft", draft="smollm2-135m"),
                           resolve_pair("smollm2-135m", "smollm2-135m"))
engine.close()
engine.close()
print("closed twice", flush=True)
"""


def test_closing_a_ggml_engine_twice_is_harmless():
    pytest.importorskip("llama_cpp_py_sync")
    done = subprocess.run([sys.executable, "-c", CLOSE_TWICE], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "closed twice"
