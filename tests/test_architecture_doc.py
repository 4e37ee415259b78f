"""docs/architecture.md's layer picture is the one pyproject's import-linter contracts draw."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def architecture():
    spec = importlib.util.spec_from_file_location("architecture", ROOT / "tools" / "architecture.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_docs_layer_picture_is_the_contracts():
    tool = architecture()
    assert tool.written_picture() == tool.picture(), "run: python tools/architecture.py --write"


def test_a_changed_contract_makes_the_picture_stale(tmp_path):
    """The check can fail: a layer added to the contracts is not in the doc's picture."""
    tool = architecture()
    pyproject = tmp_path / "pyproject.toml"
    shutil.copy(ROOT / "pyproject.toml", pyproject)
    text = pyproject.read_text()
    pyproject.write_text(text.replace('    "spectui.core",\n]', '    "spectui.core",\n    "spectui.bedrock",\n]', 1))
    changed = tool.picture(pyproject)
    assert "bedrock" in changed
    assert tool.written_picture() != changed


def test_every_layer_and_contract_is_in_the_picture():
    tool = architecture()
    drawn = tool.picture()
    for contract in tool.contracts(ROOT / "pyproject.toml"):
        assert contract["name"] in drawn
        for layer in contract.get("layers", []):
            for name in layer.split("|"):
                assert name.strip().split(".")[-1] in drawn
