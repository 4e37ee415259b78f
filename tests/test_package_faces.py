"""No module imports through its own package's face (__init__), neither a name nor a sibling
module: the face imports its modules, so a module that goes through it makes a loop that only
import order resolves. Siblings are imported by their full name (`from spectui.P.sibling import x`)."""

from __future__ import annotations

import ast
from pathlib import Path

import spectui

ROOT = Path(spectui.__file__).parent


def face_imports(root: Path) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        if path.name == "__init__.py":
            continue
        package_dir = path.parent
        package = ".".join(("spectui",) + package_dir.relative_to(root).parts)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom):
                continue
            target = node.module if node.level == 0 else (node.module if node.module else "")
            if node.level == 1 and not node.module:
                target = package
            elif node.level == 1:
                target = f"{package}.{node.module}"
            if target != package:
                continue
            for alias in node.names:
                found.append(f"{path.relative_to(root.parent)}:{node.lineno} imports {alias.name} from {package}")
    return found


def test_no_module_imports_through_its_own_package_face():
    assert face_imports(ROOT) == []


def test_the_check_sees_an_import_through_the_face(tmp_path):
    package = tmp_path / "spectui" / "things"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("from spectui.things.one import ONE\n")
    (package / "one.py").write_text("ONE = 1\n")
    (package / "two.py").write_text("from spectui.things import ONE\nfrom . import one\n")
    assert face_imports(tmp_path / "spectui") == ["spectui/things/two.py:1 imports ONE from spectui.things",
                                                  "spectui/things/two.py:2 imports one from spectui.things"]
