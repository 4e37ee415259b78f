"""The layers in pyproject's [tool.importlinter]: nothing imports upward, no cycles."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    # lint-imports reads the package from sys.path: run it where `root` is first.
    return subprocess.run(
        [sys.executable, "-c", "import sys; sys.path.insert(0, '.'); from importlinter.cli import lint_imports_command; lint_imports_command()"],
        cwd=root, capture_output=True, text=True, timeout=120,
    )


def test_the_package_keeps_its_layers():
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "BROKEN" not in result.stdout


def test_an_upward_import_breaks_the_check(tmp_path):
    copy = tmp_path / "tree"
    copy.mkdir()
    shutil.copy(ROOT / "pyproject.toml", copy)
    shutil.copytree(ROOT / "spectui", copy / "spectui", ignore=shutil.ignore_patterns("__pycache__"))
    with open(copy / "spectui" / "engines" / "factory.py", "a") as module:
        module.write("\n\ndef _upward():\n    from spectui.tui.app import SpectuiApp  # an engine reaching into the UI\n")
    result = lint_imports(copy)
    assert result.returncode != 0
    assert "spectui.engines.factory -> spectui.tui.app" in result.stdout
