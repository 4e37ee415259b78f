"""spectui bench's --json, --markdown and --plots go through the one safe writer (issue 48):
a FIFO or a device is refused without being opened, an existing file is replaced only with
--force, and both are said before anything loads (a run lasts an hour)."""

from __future__ import annotations

import json
import os

import pytest
from typer.testing import CliRunner

# a saved run with no cases: enough for --report to write its Markdown and plots
SAVED = {"settings": {"methods": ["draft"], "ks": [0, 4], "runners": ["spectui"], "command": "spectui bench"},
         "machine": {}, "seconds": 1.0, "cases": []}


def bench(*args: str):
    from spectui.cli.app import app

    return CliRunner().invoke(app, ["bench", *args])


@pytest.fixture
def nothing_runs(monkeypatch):
    monkeypatch.setattr("spectui.cli.bench.build_runners", lambda *a, **k: pytest.fail("a model was loaded"))
    monkeypatch.setattr("spectui.cli.bench.run_bench", lambda *a, **k: pytest.fail("the bench ran"))


@pytest.fixture
def saved(tmp_path):
    path = tmp_path / "run.json"
    path.write_text(json.dumps(SAVED))
    return path


def test_json_onto_a_fifo_is_refused_before_anything_loads(tmp_path, nothing_runs):
    fifo = tmp_path / "out.json"
    os.mkfifo(fifo)
    result = bench("--json", str(fifo))
    assert result.exit_code == 2, result.output
    assert result.output.strip() == f"spectui: error: --json {fifo}: cannot write it (a FIFO, not a regular file)"
    fifo_again = bench("--json", str(fifo), "--force")  # --force never replaces what is not a file
    assert fifo_again.exit_code == 2 and "a FIFO" in fifo_again.output


def test_json_onto_an_existing_file_is_refused_unless_forced(tmp_path, nothing_runs):
    existing = tmp_path / "out.json"
    existing.write_text("an earlier run")
    result = bench("--json", str(existing))
    assert result.exit_code == 2, result.output
    assert "exists: name a new file, or add --force to replace it" in result.output
    assert len(result.output.strip().splitlines()) == 1 and existing.read_text() == "an earlier run"


def test_json_onto_a_read_only_file_is_refused_even_with_force(tmp_path, nothing_runs):
    existing = tmp_path / "out.json"
    existing.write_text("an earlier run")
    existing.chmod(0o444)
    result = bench("--json", str(existing), "--force")
    assert result.exit_code == 2, result.output
    assert result.output.strip() == f"spectui: error: --json {existing}: cannot write it (read-only, mode 0444)"
    assert existing.read_text() == "an earlier run"


def test_markdown_is_written_new_refused_when_it_exists_or_is_a_fifo_and_replaced_with_force(tmp_path, saved):
    markdown = tmp_path / "bench.md"
    assert bench("--report", str(saved), "--markdown", str(markdown)).exit_code == 0
    assert markdown.read_text().startswith("# spectui bench")
    markdown.write_text("kept")
    again = bench("--report", str(saved), "--markdown", str(markdown))
    assert again.exit_code == 2 and "--markdown" in again.output and "add --force" in again.output
    assert markdown.read_text() == "kept"
    assert bench("--report", str(saved), "--markdown", str(markdown), "--force").exit_code == 0
    assert markdown.read_text().startswith("# spectui bench")
    fifo = tmp_path / "fifo.md"
    os.mkfifo(fifo)
    refused = bench("--report", str(saved), "--markdown", str(fifo), "--force")
    assert refused.exit_code == 2 and "a FIFO, not a regular file" in " ".join(refused.output.split())


def test_a_plot_is_replaced_only_with_force_and_never_written_into_a_fifo(tmp_path, saved):
    pytest.importorskip("matplotlib")
    plots = tmp_path / "plots"
    plots.mkdir()
    old = plots / "speedup_vs_k_draft.png"
    old.write_bytes(b"an older plot")
    os.mkfifo(plots / "per_position_draft.png")
    result = bench("--report", str(saved), "--plots", str(plots))
    assert result.exit_code == 0 and "--plots" in result.output and "exists" in result.output
    assert old.read_bytes() == b"an older plot"
    forced = bench("--report", str(saved), "--plots", str(plots), "--force")
    assert "a FIFO, not a regular file" in " ".join(forced.output.split())  # said, never opened (it would block)
    assert old.read_bytes()[:4] == b"\x89PNG"
