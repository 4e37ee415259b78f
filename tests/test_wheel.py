"""A wheel carries what an installed spectui needs at run time: the themes above all."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_wheel_ships_every_builtin_theme_and_the_first_screens_example(tmp_path):
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source)
    shutil.copytree(ROOT / "spectui", source / "spectui", ignore=shutil.ignore_patterns("__pycache__"))
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp_path / "dist"), str(source)],
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("spectui-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    themes = {Path(name).name for name in names if name.startswith("spectui/themes/") and name.endswith(".toml")}
    assert themes == {"dark.toml", "light.toml", "colorblind.toml"}
    assert "spectui/examples/csv_tools.py" in names  # the first screen offers it to /file
