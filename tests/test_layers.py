"""The layers in pyproject's [tool.importlinter]: nothing imports upward, no cycles."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import tomllib
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


def ignored_edges(pyproject: Path) -> list[tuple[str, str]]:
    """The (importer, imported) edges the cycle contract lets past: "a.b.* -> a.c"."""
    contracts = tomllib.loads(pyproject.read_text())["tool"]["importlinter"]["contracts"]
    cycles = next(contract for contract in contracts if contract["type"] == "acyclic_siblings")
    return [tuple(part.strip() for part in edge.split("->")) for edge in cycles.get("ignore_imports", [])]


def _imports(tree: ast.Module, name: str) -> list[tuple[ast.stmt, bool]]:
    """Each import in `tree` of module `name` (or below it), and whether it is under `if TYPE_CHECKING:`."""
    found: list[tuple[ast.stmt, bool]] = []

    def visit(node: ast.AST, typing_only: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and isinstance(child.test, ast.Name) and child.test.id == "TYPE_CHECKING":
                for statement in child.body:
                    visit_statement(statement, True)
                for statement in child.orelse:
                    visit_statement(statement, typing_only)
            else:
                visit_statement(child, typing_only)

    def visit_statement(node: ast.AST, typing_only: bool) -> None:
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            visit(node, typing_only)
            return
        if any(module == name or module.startswith(name + ".") for module in modules):
            found.append((node, typing_only))

    visit(tree, False)
    return found


def runtime_imports_on_ignored_edges(root: Path) -> list[str]:
    """Imports along an ignored edge that run when the code runs: each must be type-only."""
    problems = []
    for importer, imported in ignored_edges(root / "pyproject.toml"):
        pattern = re.compile(re.escape(importer).replace(r"\*", r"[^.]+") + r"$")
        for path in sorted((root / "spectui").rglob("*.py")):
            module = ".".join(path.relative_to(root).with_suffix("").parts)
            if not pattern.match(module):
                continue
            for node, typing_only in _imports(ast.parse(path.read_text(encoding="utf-8")), imported):
                if not typing_only:
                    problems.append(f"{module}:{node.lineno} imports {imported} when it runs")
    return problems


def test_the_edges_the_cycle_check_ignores_are_type_only():
    # None are ignored now; one added later must be imported for types only.
    assert runtime_imports_on_ignored_edges(ROOT) == []


def test_a_runtime_import_on_an_ignored_edge_is_found(tmp_path):
    # Its own contract: the package's list of ignored edges shrinks to nothing as circles go.
    (tmp_path / "pyproject.toml").write_text('[[tool.importlinter.contracts]]\nname = "cycles"\ntype = "acyclic_siblings"\n'
                                             'ignore_imports = ["spectui.host.live -> spectui.host.host"]\n')
    keys = tmp_path / "spectui" / "host" / "live.py"
    keys.parent.mkdir(parents=True)
    keys.write_text("from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from spectui.host.host import EngineHost\n\n\n"
                    "def later():\n    from spectui.host.host import EngineHost\n")
    assert runtime_imports_on_ignored_edges(tmp_path) == ["spectui.host.live:8 imports spectui.host.host when it runs"]
