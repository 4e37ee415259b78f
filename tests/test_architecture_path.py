"""docs/architecture.md's path of a reply, from a key press to a token on screen, names files and
methods that exist: a refactor that moves one makes the picture stale here, not in a reader's head."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
PATH = re.compile(r"\b(?:[a-z_]+/)+(?:[a-z_]+\.py\b|(?=\s))")  # a module, or a folder ("engines/speculative/")
METHOD = re.compile(r"\b([A-Z][A-Za-z]+)\.([a-z_]+)\b")


def reply_path(doc: str) -> str:
    """The text block under the doc's heading for a reply's path."""
    section = doc.split("## A reply, from key press to token on screen", 1)[1]
    return section.split("```text\n", 1)[1].split("```", 1)[0]


@functools.lru_cache
def methods(package: Path) -> set[tuple[str, str]]:
    """(class, method or attribute) for every class in the package."""
    found = set()
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                        found.add((node.name, item.name))
    return found


def stale(block: str, package: Path) -> list[str]:
    """What the path names that the package does not hold."""
    problems = []
    for path in PATH.findall(block):
        if not (package / path).exists():
            problems.append(f"no {path}")
    known = methods(package)
    for owner, name in METHOD.findall(block):
        if (owner, name) not in known:
            problems.append(f"no {owner}.{name}")
    return problems


def test_the_reply_path_names_what_is_there():
    block = reply_path(DOC.read_text(encoding="utf-8"))
    assert PATH.findall(block) and METHOD.findall(block), "the path names no file or method: the pattern is wrong"
    assert stale(block, ROOT / "spectui") == []


def test_a_renamed_method_or_a_moved_file_makes_the_path_stale():
    block = reply_path(DOC.read_text(encoding="utf-8"))
    assert stale(block.replace("Turns.submit", "Turns.submitted"), ROOT / "spectui") == ["no Turns.submitted"]
    assert stale(block.replace("tui/chat/turns.py", "tui/chat/turn.py"), ROOT / "spectui") == ["no tui/chat/turn.py"]
