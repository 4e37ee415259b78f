"""basedpyright over spectui/ in the suite ([tool.basedpyright] in pyproject): nothing beyond its baseline,
and the baseline only shrinks."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BASELINE = "tests/types_baseline.json"
MISSING = "reportMissingParameterType"
# Optional packages (cairosvg for the screenshots' PNGs) come and go with the environment: where
# one is missing its imports are findings, which basedpyright drops from the baseline where it is not.
OPTIONAL_IMPORTS = "reportMissingImports"
# What the baseline holds now: parameters without a type, and every other finding. The numbers
# may only fall: fix some, run `basedpyright --writebaseline`, and lower them here (the test
# below says to); a regenerated baseline that took in new findings fails.
BASELINE_MAX = {MISSING: 0, "other": 2}


def basedpyright(root: Path) -> subprocess.CompletedProcess:
    # This interpreter's site-packages for the third-party types; `root`'s spectui first.
    return subprocess.run([sys.executable, "-m", "basedpyright", "--pythonpath", sys.executable], cwd=root,
                          capture_output=True, text=True, timeout=300)


def baseline_counts(path: Path) -> dict[str, int]:
    """The baseline's findings: parameters without a type, and all the others (but optional imports)."""
    codes = [finding["code"] for findings in json.loads(path.read_text())["files"].values() for finding in findings]
    missing, optional = codes.count(MISSING), codes.count(OPTIONAL_IMPORTS)
    return {MISSING: missing, "other": len(codes) - missing - optional}


def test_the_baseline_only_shrinks():
    counts = baseline_counts(ROOT / BASELINE)
    grown = {name: (counts[name], most) for name, most in BASELINE_MAX.items() if counts[name] > most}
    assert grown == {}, f"the baseline took in new findings (now, at most): {grown}: fix them instead"
    assert counts == BASELINE_MAX, f"fewer findings now: lower BASELINE_MAX to {counts}"


def test_the_count_sees_a_missing_parameter_type(tmp_path):
    finding = {"code": MISSING, "range": {"startColumn": 1, "endColumn": 2, "lineCount": 1}}
    other = {**finding, "code": "reportArgumentType"}
    optional = {**finding, "code": OPTIONAL_IMPORTS}
    (tmp_path / "baseline.json").write_text(json.dumps({"files": {"./a.py": [finding, other, optional, finding]}}))
    assert baseline_counts(tmp_path / "baseline.json") == {MISSING: 2, "other": 1}


@pytest.mark.slow
def test_spectui_type_checks_and_a_wrong_type_passed_to_the_loop_fails_the_check(tmp_path):
    """One basedpyright run over a copy of spectui/ with one mistake added (a string where
    decode_steps wants a model with its KV cache, and parameters without a type): its findings are
    the only ones, so the rest of spectui type-checks, and the check can fail."""
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
    errors = [line for line in result.stdout.splitlines() if " - error:" in line]
    elsewhere = [line for line in errors if "mistake.py:" not in line]
    assert elsewhere == [], "\n".join(elsewhere)[-5000:]
    found = result.stdout[result.stdout.find("mistake.py:5:"):]
    assert 'type "Literal[\'a model\']" cannot be assigned to parameter "target" of type "CachedLogits"' in found, result.stdout[-3000:]
    assert "(reportArgumentType)" in found
    # and its four bare parameters: a new function's parameters take types
    assert result.stdout.count("(reportMissingParameterType)") == 4
    assert 'Type annotation is missing for parameter "proposer"' in result.stdout
    assert len(errors) == 5 and "5 errors" in result.stdout


def test_every_silenced_finding_says_why_on_its_line():
    """A `# type: ignore` or `# pyright: ignore` needs its reason beside it: `# type: ignore[code]  # why`."""
    import re

    silenced = re.compile(r"#\s*(type|pyright):\s*ignore(\[[^\]]*\])?(?P<rest>.*)$")
    bare = []
    for path in sorted((ROOT / "spectui").rglob("*.py")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            found = silenced.search(line)
            if found and not re.match(r"\s*#\s*\S", found["rest"]):
                bare.append(f"{path.relative_to(ROOT)}:{number}")
    assert bare == []
