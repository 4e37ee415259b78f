"""No module of spectui imports itself through others: every import counts, those under
`if TYPE_CHECKING:` and inside functions included (a type-only circle is still two modules that
cannot be read, or split, one without the other). import-linter's acyclic_siblings contract
checks packages; this checks modules, across packages too."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Circles allowed: none (issue 61 took the chat screen's apart). Nothing may be added here.
ALLOWED: list[frozenset[str]] = []


def module_files(root: Path) -> dict[str, Path]:
    """{dotted name: file} of every module under root/spectui (a package by its __init__)."""
    found = {}
    for path in sorted((root / "spectui").rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imported_names(module: str, path: Path) -> list[str]:
    """Every name an import statement in the file reaches, anywhere in it, relative ones made absolute."""
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            names += [f"{base}.{alias.name}" for alias in node.names]
    return names


def import_graph(root: Path) -> dict[str, set[str]]:
    """{module: the package's modules it imports}; `from a import b` reaches a.b where that is a module, else a."""
    files = module_files(root)

    def owner(name: str) -> str | None:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        reached = {owner(name) for name in imported_names(module, path) if name.split(".")[0] == "spectui"}
        graph[module] = {other for other in reached if other is not None and other != module}
    return graph


def circles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def test_no_module_imports_itself_through_others():
    found = circles(import_graph(ROOT))
    new = [sorted(circle) for circle in found if circle not in ALLOWED]
    assert new == [], f"import circles (TYPE_CHECKING and function-level imports count): {new}"


def test_a_type_only_circle_is_found(tmp_path):
    package = tmp_path / "spectui" / "host"
    package.mkdir(parents=True)
    (tmp_path / "spectui" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "host.py").write_text("from spectui.host.live import LiveKeys\n")
    (package / "live.py").write_text("from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
                                     "    from spectui.host.host import EngineHost\n")
    (package / "plan.py").write_text("from . import live\n")  # relative, and into the circle only
    assert circles(import_graph(tmp_path)) == [frozenset({"spectui.host.host", "spectui.host.live"})]


def test_a_circle_through_a_function_level_import_and_a_package_is_found(tmp_path):
    (tmp_path / "spectui" / "a").mkdir(parents=True)
    (tmp_path / "spectui" / "__init__.py").write_text("")
    (tmp_path / "spectui" / "a" / "__init__.py").write_text("from spectui.b import thing\n")
    (tmp_path / "spectui" / "b.py").write_text("def later():\n    from spectui.a import x\n")
    (tmp_path / "spectui" / "c.py").write_text("import spectui.b\n")
    assert circles(import_graph(tmp_path)) == [frozenset({"spectui.a", "spectui.b"})]
