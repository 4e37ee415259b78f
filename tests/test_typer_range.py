"""The typer range holds (issue 50): the CLI uses only typer's public API, so a newer typer
cannot break it at import (0.27.2 did when it patched TyperOption), and the range's floor is the
oldest typer its help tests passed on. The help itself is tested in test_cli_vocabulary.py."""

from __future__ import annotations

import ast
import re
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FLOOR = (0, 27, 2)  # tests/test_cli_vocabulary.py and tests/test_cli.py passed on it and on 0.29.2
PUBLIC_MODULES = {"typer", "typer.main"}  # typer.main.get_command is documented ("Using Click")


def numbers(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


def test_the_pin_is_the_floor_the_cli_was_tested_on_and_this_typer_is_in_range():
    pyproject = (ROOT / "pyproject.toml").read_text()
    pins = re.findall(r'"typer([<>=!~][^"]*)"', pyproject)
    assert pins == [f">={'.'.join(map(str, FLOOR))}"], pins
    assert numbers(version("typer")) >= FLOOR


def typer_references(tree: ast.AST) -> list[str]:
    """Every typer module imported and every dotted name read or written under `typer.`."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if alias.name.split(".")[0] in ("typer", "click")]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in ("typer", "click"):
            found += [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute):
            inner = node.value
            if isinstance(inner.value, ast.Name) and inner.value.id == "typer":
                found.append(f"typer.{inner.attr}.{node.attr}")
    return found


def test_the_cli_touches_only_typers_public_api():
    private = []
    for path in sorted((ROOT / "spectui").rglob("*.py")):
        for name in typer_references(ast.parse(path.read_text(), str(path))):
            module = name if name in PUBLIC_MODULES else name.rsplit(".", 1)[0]
            if name.startswith("click") or module not in PUBLIC_MODULES or "._" in name:
                private.append(f"{path.relative_to(ROOT)}: {name}")
    assert private == [], private


def test_the_check_sees_a_patch_of_typers_internals():
    patched = "from typer.core import TyperOption\nTyperOption.display_type_rich = None\nimport typer.rich_utils\n"
    assert typer_references(ast.parse(patched)) == ["typer.core.TyperOption", "typer.rich_utils"]
