"""ruff over spectui/ and tests/ in the suite: unused imports, undefined names and syntax errors fail it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def ruff(*arguments: str) -> subprocess.CompletedProcess:
    pytest.importorskip("ruff")
    return subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", *arguments], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_ruff_finds_nothing_in_spectui_and_its_tests():
    result = ruff("spectui", "tests", "benchmarks")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_fails_on_an_unused_import(tmp_path):
    """The check can fail: the project's rules on a module with a deliberate mistake."""
    module = tmp_path / "mistake.py"
    module.write_text("import os\n\n\ndef f():\n    return undefined_name\n")
    result = ruff("--config", str(ROOT / "pyproject.toml"), str(module))
    assert result.returncode == 1
    assert "F401" in result.stdout and "F821" in result.stdout
