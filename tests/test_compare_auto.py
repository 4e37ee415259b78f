"""Compare runs what the user runs: adaptive k when k is auto, and says so."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from spectui.core.events import GenerationParams
from spectui.engines.scripted import ScriptedEngine
from spectui.measure.compare import compare
from spectui.measure.run import prompt_messages


def invoke(*args):
    from spectui.cli.app import app

    return CliRunner().invoke(app, ["compare", *args])


def test_compare_with_auto_runs_adaptive_k_on_the_speculative_path_only():
    comparison = compare(ScriptedEngine(alpha=0.85, seed=1), prompt_messages("hi", None), GenerationParams(max_tokens=24),
                         4, 0.0, 1, auto=True)
    speculative, baseline = comparison.of("speculative")[0], comparison.of("baseline")[0]
    assert comparison.auto_k and any(step.auto is not None for step in speculative.reply.steps)
    assert all(step.auto is None and step.k == 0 for step in baseline.reply.steps)


def test_cli_compare_k_auto_says_auto_and_runs_it(monkeypatch):
    # Pinned to torch: the stand-in replaces the torch builder (auto would pick ggml on this box).
    import spectui.engines.torch_backend.build as build

    engines: list[ScriptedEngine] = []
    monkeypatch.setattr(build, "build_embedded_engine",
                        lambda options, models, progress=None, **_: engines.append(ScriptedEngine(alpha=0.85)) or engines[-1])
    table = invoke("hi", "-k", "auto", "--max-tokens", "16", "--runs", "1", "--table", "--engine", "embedded", "--backend", "torch")
    assert table.exit_code == 0, table.stderr
    assert "speculative (k auto)" in table.stdout and "(k=4)" not in table.stdout
    result = invoke("hi", "-k", "auto", "--max-tokens", "16", "--runs", "1", "--json", "--engine", "embedded", "--backend", "torch")
    data = json.loads(result.stdout)
    assert data["auto_k"] is True
    assert any(step["k"] != 4 for step in data["speculative"]["steps"][1:])  # adaptive k chose them


def test_compare_json_writes_each_path_in_generate_json_s_one_reply_record(monkeypatch):
    from spectui.cli.app import app
    from spectui.core.record import reply_record, step_record
    from spectui.core.events import Source, Step
    from spectui.core.stats import summarize
    import spectui.engines.torch_backend.build as build

    monkeypatch.setattr(build, "build_embedded_engine", lambda options, models, progress=None, **_: ScriptedEngine(alpha=0.85))
    args = ["hi", "-k", "4", "--max-tokens", "16", "--json", "--engine", "embedded", "--backend", "torch"]
    compared = invoke(*args, "--runs", "1")
    generated = CliRunner().invoke(app, ["generate", *args])
    assert compared.exit_code == 0 and generated.exit_code == 0, compared.stderr + generated.stderr
    data, reply = json.loads(compared.stdout), json.loads(generated.stdout)
    record = reply_record([], None, summarize([], 0.0).as_dict())
    for entry in (data["speculative"], data["baseline"], reply):
        assert set(entry) == set(record) | {"model"}
        assert set(entry["stats"]) == set(record["stats"])
        assert all(set(step) == set(step_record(Step((1,), (Source.TARGET,), "a"))) for step in entry["steps"])
    assert set(data["speculative"]["model"]) == set(reply["model"])
    assert data["speculative"]["token_ids"] == reply["token_ids"]
    assert data["tokens_per_s_median"]["speculative"] > 0 and data["speculative"]["stats"]["tokens_per_s_wall"] > 0
