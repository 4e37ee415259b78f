"""pyright (basedpyright, standard mode) over spectui/ in the suite.

Where the house came in with findings, each package's count is listed; a count may fall, never
rise, and a package at zero stays there. One run checks a copy of the tree that holds one
deliberate mistake, so the same run shows the check can fail."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Findings per package when the check came in (spectui/<package>/ or a top-level module).
STILL_FOUND = {
    "bench": 23, "cli": 34, "engines": 125, "heads": 4, "host": 15, "measure": 4, "models": 20,
    "settings": 4, "store.py": 11, "tui": 29,
}
MISTAKE = '''from spectui.engines.embedded.loop import decode_steps


def wrong() -> None:
    decode_steps("a model's name", None, [1], None, None, set(), None)
'''


@pytest.fixture(scope="module")
def findings(tmp_path_factory) -> list[dict]:
    tree = tmp_path_factory.mktemp("typed")
    shutil.copytree(ROOT / "spectui", tree / "spectui", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
    (tree / "spectui" / "mistake.py").write_text(MISTAKE)
    result = subprocess.run([sys.executable, "-m", "basedpyright", "--outputjson", "--pythonpath", sys.executable],
                            cwd=tree, capture_output=True, text=True, timeout=600)
    report = json.loads(result.stdout)
    errors = [d for d in report["generalDiagnostics"] if d["severity"] == "error"]
    for error in errors:
        error["where"] = Path(error["file"]).relative_to(tree / "spectui").as_posix()
    return errors


def package(where: str) -> str:
    return where.split("/")[0]


def shown(errors: list[dict]) -> str:
    return "\n".join(f"{e['where']}:{e['range']['start']['line'] + 1}: {e['message'].splitlines()[0]}" for e in errors)


def test_no_package_has_more_type_errors_than_it_came_in_with(findings):
    real = [e for e in findings if e["where"] != "mistake.py"]
    counts = Counter(package(e["where"]) for e in real)
    grown = {name: count for name, count in counts.items() if count > STILL_FOUND.get(name, 0)}
    assert not grown, f"new type errors in {grown}:\n" + shown([e for e in real if package(e["where"]) in grown])


def test_the_counts_only_fall(findings):
    counts = Counter(package(e["where"]) for e in findings if e["where"] != "mistake.py")
    fallen = {name: counts.get(name, 0) for name, count in STILL_FOUND.items() if counts.get(name, 0) < count}
    assert not fallen, f"fewer findings now: lower STILL_FOUND to {fallen}"


def test_a_wrong_type_passed_to_decode_steps_is_an_error(findings):
    mistakes = [e for e in findings if e["where"] == "mistake.py"]
    assert any('parameter "target"' in e["message"] and "decode_steps" in e["message"] for e in mistakes), shown(mistakes)
