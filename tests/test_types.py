"""basedpyright over spectui/ in the suite ([tool.basedpyright] in pyproject): nothing beyond its baseline."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BASELINE = "tests/types_baseline.json"


def basedpyright(root: Path) -> subprocess.CompletedProcess:
    # This interpreter's site-packages for the third-party types; `root`'s spectui first.
    return subprocess.run([sys.executable, "-m", "basedpyright", "--pythonpath", sys.executable], cwd=root,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_spectui_type_checks():
    result = basedpyright(ROOT)
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-2000:]
    assert "0 errors" in result.stdout


@pytest.mark.slow
def test_a_wrong_type_passed_to_the_loop_fails_the_check(tmp_path):
    """The check can fail: a string where decode_steps wants a model with its KV cache."""
    copy = tmp_path / "tree"
    (copy / "tests").mkdir(parents=True)
    shutil.copy(ROOT / "pyproject.toml", copy)
    shutil.copy(ROOT / BASELINE, copy / BASELINE)
    shutil.copytree(ROOT / "spectui", copy / "spectui", ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "spectui" / "engines" / "speculative" / "mistake.py").write_text(
        "from spectui.engines.speculative.loop import decode_steps\n\n\n"
        "def mistake(proposer, params, control, detokenizer):\n"
        "    return decode_steps('a model', proposer, [1, 2], params, control, set(), detokenizer)\n"
    )
    result = basedpyright(copy)
    assert result.returncode == 1
    found = result.stdout[result.stdout.find("mistake.py:5:"):]
    assert 'type "Literal[\'a model\']" cannot be assigned to parameter "target" of type "CachedLogits"' in found, result.stdout[-3000:]
    assert "(reportArgumentType)" in found
    assert "1 error" in result.stdout
