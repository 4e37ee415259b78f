"""`spectui bench` end to end on fake runners: the options given on the command line reach the
plan, the run, the saved settings and the outputs (nothing loads: build_runners is replaced)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from spectui.bench.runs import ArmReply
from spectui.core.engine import EngineInfo


class FakeEngine:
    info = EngineInfo("embedded", "fake-target", None, "ngram", "int8", "cpu")

    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True


def test_the_command_lines_options_reach_the_run_and_its_record(monkeypatch, tmp_path):
    from spectui.cli.app import app

    engine = FakeEngine()
    built = {}
    calls = []

    def run(arm, messages, params, temperature):
        calls.append((arm.label, params.max_tokens, temperature))
        return ArmReply(arm, list(range(params.max_tokens)), 1.0, 0.25)

    def build_runners(options, models, *rest, **named):
        built["options"] = options
        return {"spectui": run}, [engine], {}

    monkeypatch.setattr("spectui.cli.bench.build_runners", build_runners)
    json_path, markdown_path = tmp_path / "run.json", tmp_path / "run.md"
    result = CliRunner().invoke(app, [
        "bench", "--device", "cpu", "--engines", "spectui", "--method", "ngram", "--k", "0,2,auto", "--anchor-k", "3",
        "--categories", "json", "--repeats", "2", "--max-tokens", "8", "-t", "0,0.5",
        "--json", str(json_path), "--markdown", str(markdown_path),
    ])
    assert result.exit_code == 0, result.output
    settings = json.loads(json_path.read_text())["settings"]
    assert {name: settings[name] for name in ("suite", "model", "runners", "methods", "ks", "auto", "anchor_k",
                                              "temperatures", "max_tokens", "categories", "contended")} == {
        "suite": "quick", "model": "fake-target", "runners": ["spectui"], "methods": ["ngram"], "ks": [0, 2],
        "auto": True, "anchor_k": 3, "temperatures": [0.0, 0.5], "max_tokens": 8, "categories": ["json"],
        "contended": False,
    }
    assert (built["options"].method, built["options"].k) == ("ngram", 3)
    # k = 0, 2, the anchor's 3 and auto, at two temperatures, two rounds, after one warm-up each
    arms = {label for label, _, _ in calls}
    assert arms == {"spectui none", "spectui ngram k=2", "spectui ngram k=3", "spectui ngram k=auto"}
    assert sorted(t for _, tokens, t in calls if tokens == 8) == [0.0] * 8 + [0.5] * 8
    assert markdown_path.read_text().startswith("# spectui bench")
    assert engine.closed
