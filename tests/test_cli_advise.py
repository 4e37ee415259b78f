"""`spectui advise` on a history written through the store (no model runs: SmolLM2's tokenizer
gives the ids, a cost profile from a file the costs): the table, --json, and the bad-input lines."""

from __future__ import annotations

import json
import sqlite3

import pytest
from typer.testing import CliRunner

from spectui.advise.costs import profile_json

from advise_chats import CODE, COSTS, save_chat

pytestmark = [pytest.mark.real_weights, pytest.mark.usefixtures("fetched_ggufs")]  # SmolLM2's tokenizer, from the cache



@pytest.fixture(scope="module")
def tokenizer():
    from spectui.advise.measure import cached_gguf
    from spectui.models.registry import resolve
    from spectui.models.tokenizer_json import JsonTokenizer

    return JsonTokenizer(cached_gguf(resolve("smollm2-135m")).tokenizer)


def advise(*arguments: str):
    from spectui.cli.app import app

    return CliRunner().invoke(app, ["advise", "--model", "smollm2-135m", *arguments])


@pytest.fixture
def history(data_dir, tokenizer, tmp_path):
    """Two chats that copy their prompt's code, and one sampled at T 0.7; the costs in a file."""
    path = data_dir / "history.sqlite3"
    save_chat(path, tokenizer, f"Repeat this code:\n{CODE}", f"Here it is:\n{CODE}")
    save_chat(path, tokenizer, f"Show this again:\n{CODE}", f"Sure:\n{CODE}")
    save_chat(path, tokenizer, "Say hello.", "Hello there!", temperature=0.7)
    costs = tmp_path / "costs.json"
    costs.write_text(profile_json(COSTS))
    return path, costs


def test_the_table_predicts_every_drafter_and_k_and_recommends_one(history):
    _, costs = history
    result = advise("--costs", str(costs))
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    for drafter in ("suffix", "suffix (no history)", "ngram 1-8", "ngram 3-8"):
        assert drafter in out
    assert "predicted" in out.lower() and "replayed at T = 0" in out
    assert "left out: 1 sampled at T > 0" in out
    # copying the prompt's code pays at these costs: a drafter is recommended, not k 0
    assert "for your chats: " in out and "k 0 (plain" not in out
    table = out.split("predicted:")[0]  # the suite's console is 80 columns wide, as a fresh terminal
    assert "…" not in table and "llama.cpp" in table and "coloured" in table


def test_json_carries_every_arm_and_each_replys_recorded_vs_replayed_acceptance(history):
    _, costs = history
    result = advise("--costs", str(costs), "--json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["replies"] == 2 and data["skipped"] == {"sampled at T > 0": 1}
    assert len(data["arms"]) == 4 * 9
    arms = {(arm["drafter"], arm["k"]): arm for arm in data["arms"]}
    assert arms[("suffix", 4)]["predicted_speedup"] > 1 and arms[("suffix", 4)]["coloured_share"] > 0.3
    # the replies ran at k 0: nothing recorded as accepted, and the replay of k 0 agrees
    assert [(c["ran"], c["replayed_as"], c["recorded_accepted"], c["replayed_accepted"]) for c in data["checks"]] == \
        [("k 0", "k 0", 0, 0)] * 2
    assert [c["recorded_steps"] for c in data["checks"]] == [c["replayed_steps"] for c in data["checks"]]


def test_only_the_conversation_asked_for_is_replayed(history):
    _, costs = history
    result = advise("--costs", str(costs), "--json", "--conversation", "2")
    assert result.exit_code == 0, result.stderr
    assert [check["conversation"] for check in json.loads(result.stdout)["checks"]] == [2]
    result = advise("--costs", str(costs), "--json", "--last", "2")
    assert [check["conversation"] for check in json.loads(result.stdout)["checks"]] == [2]  # 3 is T 0.7


def one_error_line(result, *words: str) -> None:
    assert result.exit_code == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("spectui: error: "), result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    for word in words:
        assert word in lines[0]


def test_no_history_is_one_line(data_dir, tmp_path):
    saved = tmp_path / "saved.json"
    one_error_line(advise("--save-costs", str(saved), "--conversation", "1"), "no conversation 1")
    one_error_line(advise(), "no history at")
    assert not saved.exists() and list(data_dir.iterdir()) == []


def test_an_unknown_conversation_is_one_line(history):
    _, costs = history
    one_error_line(advise("--costs", str(costs), "--conversation", "99"), "no conversation 99")


def test_a_damaged_history_is_one_line(data_dir, tmp_path):
    (data_dir / "history.sqlite3").write_bytes(b"this is not a database" * 100)
    one_error_line(advise(), "damaged")


def test_a_locked_history_is_one_line(history, monkeypatch):
    import spectui.store.database as database

    path, costs = history
    monkeypatch.setattr(database, "LOCK_WAIT_S", 0.05)
    holder = sqlite3.connect(path)
    holder.execute("PRAGMA journal_mode = DELETE")
    holder.execute("PRAGMA locking_mode = EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        one_error_line(advise("--costs", str(costs)), "locked")
    finally:
        holder.rollback()
        holder.close()


def test_a_model_that_is_not_cached_is_one_line(history, monkeypatch, tmp_path):
    monkeypatch.setenv("SPECTUI_CACHE_DIR", str(tmp_path / "empty-cache"))
    one_error_line(advise(), "smollm2-135m is not cached", "spectui models fetch")
    assert not (tmp_path / "empty-cache").exists()


@pytest.mark.parametrize("content, words", [
    ("{not json", ("not JSON",)),
    (json.dumps({"model": "m", "backend": "b", "verify": {"1": 1.0}}), ("lacks plain_seconds",)),
    (json.dumps({"model": "m", "backend": "b", "plain_seconds": 0.01, "verify": {"2": 1.5}}), ('"1"',)),
    (json.dumps({"model": "m", "backend": "b", "plain_seconds": -1, "verify": {"1": 1}}), ("plain_seconds",)),
    (json.dumps([1, 2]), ("JSON object",)),
])
def test_a_bad_costs_file_is_one_line_and_nothing_is_written(history, tmp_path, content, words):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    saved = tmp_path / "saved.json"
    one_error_line(advise("--costs", str(bad), "--save-costs", str(saved)), f"--costs {bad}", *words)
    assert not saved.exists()


def test_a_bad_since_is_one_line(history):
    one_error_line(advise("--since", "last tuesday"), "--since")


def test_save_costs_writes_the_profile_it_charged(history, tmp_path):
    _, costs = history
    saved = tmp_path / "out.json"
    result = advise("--costs", str(costs), "--save-costs", str(saved), "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(saved.read_text()) == json.loads(costs.read_text())


def test_a_draft_with_a_costs_file_that_has_no_draft_cost_is_one_line(history, tmp_path):
    _, costs = history
    one_error_line(advise("--costs", str(costs), "--draft", "smollm2-135m"), "no draft model's cost")


def test_without_llama_cpps_plain_step_the_column_shows_a_dash(history):
    _, costs = history
    result = advise("--costs", str(costs))
    assert result.exit_code == 0, result.stderr
    plain_row = next(line for line in result.stdout.splitlines() if line.startswith("plain"))
    assert "—" in plain_row and "vs llama.cpp plain" not in " ".join(result.stdout.split()).split("for your chats")[1]
    data = json.loads(advise("--costs", str(costs), "--json").stdout)
    assert data["baseline"]["predicted_vs_llamacpp_plain"] is None


def test_llama_cpps_plain_step_gives_every_arm_its_speed_over_llama_cpp(history, tmp_path):
    from dataclasses import replace

    path = tmp_path / "anchored.json"
    # llama.cpp's plain step 0.011 s where spectui's is 0.010 s: k 0 is ×1.10 llama.cpp plain
    path.write_text(profile_json(replace(COSTS, llamacpp_plain_seconds=0.011)))
    data = json.loads(advise("--costs", str(path), "--json").stdout)
    assert data["baseline"]["predicted_vs_llamacpp_plain"] == pytest.approx(1.1)
    for arm in data["arms"]:
        assert arm["predicted_vs_llamacpp_plain"] == pytest.approx(1.1 * arm["predicted_speedup"])
    assert "vs llama.cpp plain" in data["recommendation"]
    result = advise("--costs", str(path))
    assert result.exit_code == 0, result.stderr
    plain_row = next(line for line in result.stdout.splitlines() if line.startswith("plain"))
    assert "×1.10" in plain_row and "—" not in plain_row
    words = " ".join(result.stdout.split())  # rich wraps the long lines at the terminal's width
    assert "llama.cpp plain 11.0 ms" in words and "vs llama.cpp plain" in words.split("for your chats")[1]
