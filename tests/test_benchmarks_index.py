"""benchmarks/ keeps scripts, reports and data apart, and its README indexes every script and
report (issue 51): a report left at the top, or one added and not indexed, fails here."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
INDEX = BENCHMARKS / "README.md"
MANUALS = {"README.md", "README-gpu.md"}  # the index and gpu_vllm.py's manual, beside the scripts


def test_reports_live_in_reports_and_scripts_at_the_top():
    assert sorted(p.name for p in BENCHMARKS.glob("*.md") if p.name not in MANUALS) == []
    assert list((BENCHMARKS / "reports").glob("*.md"))
    assert [p.name for p in (BENCHMARKS / "reports").iterdir() if p.suffix in (".py", ".sh")] == []


def test_the_index_names_every_script_and_links_every_report():
    text = INDEX.read_text()
    scripts = sorted(p.name for p in BENCHMARKS.iterdir() if p.suffix in (".py", ".sh"))
    assert [name for name in scripts if f"| `{name}` |" not in text] == []
    reports = sorted(p.name for p in (BENCHMARKS / "reports").glob("*.md"))
    assert [name for name in reports if f"](reports/{name})" not in text] == []


def test_the_index_links_resolve():
    text = INDEX.read_text()
    targets = [m.group(1) for m in re.finditer(r"\]\(([^)\s#]+)\)", text) if not m.group(1).startswith("http")]
    assert targets
    assert [target for target in targets if not (BENCHMARKS / target).exists()] == []
