"""`spectui bench --history` on a history written through the store (SmolLM2's tokenizer gives
the ids; no model loads: the runners are fakes that answer each saved prompt with its saved
reply at set speeds): every timed arm beside the replay's prediction, and the bad-input lines."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from spectui.advise.costs import cached_profile_path, profile_json
from spectui.bench.runs import ArmReply
from spectui.core.engine import EngineInfo

from advise_chats import CODE, COSTS, save_chat

pytestmark = [pytest.mark.real_weights, pytest.mark.usefixtures("fetched_ggufs")]  # SmolLM2's tokenizer, from the cache

CHATS = {f"Repeat this code:\n{CODE}": f"Here it is:\n{CODE}", f"Show this again:\n{CODE}": f"Sure:\n{CODE}"}


@pytest.fixture(scope="module")
def tokenizer():
    from spectui.advise.measure import cached_gguf
    from spectui.models.registry import resolve
    from spectui.models.tokenizer_json import JsonTokenizer

    return JsonTokenizer(cached_gguf(resolve("smollm2-135m")).tokenizer)


class FakeEngine:
    info = EngineInfo("embedded", "smollm2-135m", None, "ngram", "q4", "cpu", backend="ggml test")

    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def history(data_dir, tokenizer):
    path = data_dir / "history.sqlite3"
    for question, answer in CHATS.items():
        save_chat(path, tokenizer, question, answer)
    kept = cached_profile_path(data_dir, COSTS.model, COSTS.backend)
    kept.parent.mkdir()
    kept.write_text(profile_json(COSTS))
    return path


def fake_runners(monkeypatch, tokenizer, seconds_per_token: dict[str, float]):
    """build_runners replaced: each arm answers a saved prompt with its saved reply, decoding
    at seconds_per_token[arm.label] after a first token of 0.1 s."""
    engine, calls = FakeEngine(), []

    def run(arm, messages, params, temperature):
        ids = tokenizer(CHATS[messages[-1]["content"]], add_special_tokens=False)["input_ids"][:params.max_tokens]
        calls.append((arm.label, params.max_tokens, temperature))
        return ArmReply(arm, ids, 0.1 + seconds_per_token[arm.label] * (len(ids) - 1), 0.1)

    monkeypatch.setattr("spectui.cli.bench.build_runners", lambda *args: ({"spectui": run}, [engine], {}))
    return engine, calls


def bench(*arguments: str):
    from spectui.cli.app import app

    return CliRunner().invoke(app, ["bench", "--history", "--model", "smollm2-135m", *arguments])


def test_each_timed_arm_is_shown_beside_the_replays_prediction(history, tokenizer, monkeypatch, tmp_path):
    speeds = {"spectui none": 0.010, "spectui ngram k=2": 0.005, "spectui suffix k=2": 0.008}
    engine, calls = fake_runners(monkeypatch, tokenizer, speeds)
    out = tmp_path / "history.json"
    result = bench("--method", "ngram,suffix", "--k", "0,2", "--repeats", "1", "--json", str(out))
    assert result.exit_code == 0, result.output
    assert engine.closed
    # every reply was timed at T = 0 with room past its length (it ended on its stop)
    assert {t for _, _, t in calls} == {0.0} and {label for label, _, _ in calls} == set(speeds)
    rows = {row["arm"]: row for row in json.loads(out.read_text())["history"]}
    assert rows["spectui ngram k=2"]["timed_speedup"] == pytest.approx(2.0)
    assert rows["spectui suffix k=2"]["timed_speedup"] == pytest.approx(1.25)
    assert rows["spectui none"]["timed_speedup"] == pytest.approx(1.0)
    # the replay of the same replies at the kept costs: the numbers advise gives for these arms
    from spectui.advise.advice import Drafter, replay_arm
    from spectui.advise.chats import chat_replies, read_conversations

    replies = chat_replies(read_conversations(history), tokenizer, 49152).replies
    base = replay_arm(replies, None, 0, COSTS)
    for label, drafter in (("spectui ngram k=2", Drafter("ngram 1-8", "ngram")),
                           ("spectui suffix k=2", Drafter("suffix (no history)", "suffix", history=False))):
        predicted = base.seconds / replay_arm(replies, drafter, 2, COSTS).seconds
        assert rows[label]["predicted_speedup"] == pytest.approx(predicted)
        assert rows[label]["difference"] == pytest.approx(predicted / rows[label]["timed_speedup"] - 1)
        assert rows[label]["same_replies"] == 2 == rows[label]["replies"]
    words = " ".join(result.stdout.split())
    assert "Timed vs replayed on 2 of your saved prompts" in words and "spectui ngram k=2" in words and "×2.00" in words


def test_max_tokens_cuts_the_replies_timed_and_replayed_alike(history, tokenizer, monkeypatch, tmp_path):
    speeds = {"spectui none": 0.010, "spectui ngram k=2": 0.005}
    _, calls = fake_runners(monkeypatch, tokenizer, speeds)
    out = tmp_path / "cut.json"
    result = bench("--method", "ngram", "--k", "0,2", "--repeats", "1", "--max-tokens", "5", "--json", str(out))
    assert result.exit_code == 0, result.output
    assert {tokens for label, tokens, _ in calls if tokens != 4} == {5}  # 4: the warm-up's
    # the saved replies are cut at 5 too: each timed reply equals its saved one, cut
    assert [row["same_replies"] for row in json.loads(out.read_text())["history"]] == [2, 2]


def one_error_line(result, *words: str) -> None:
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("spectui: error: "), result.stderr
    assert "Traceback" not in result.stderr
    for word in words:
        assert word in lines[0]


def test_bad_input_is_one_line(history, tokenizer, monkeypatch, data_dir):
    fake_runners(monkeypatch, tokenizer, {})
    one_error_line(bench("--method", "draft"), "--history times the drafters advise replays")
    one_error_line(bench("--conversation", "99"), "no conversation 99")
    one_error_line(bench("--since", "someday"), "--since")
    one_error_line(bench("--last", "0"), "--last must be 1 or more")
    one_error_line(bench("--markdown", "x.md"), "--markdown is the suite's")
    from spectui.cli.app import app

    one_error_line(CliRunner().invoke(app, ["bench", "--last", "2"]), "--last", "--history")


def test_no_history_is_one_line(data_dir):
    one_error_line(bench(), "no history at")


@pytest.mark.slow
def test_a_real_history_is_timed_token_for_token_and_kept_as_the_replay_keeps(data_dir, tmp_path):
    """SmolLM2 on ggml writes a chat into the history; bench --history times it again with the
    real engine: every timed reply equals the saved one (the prompt rebuilt as the chat built it),
    and prompt lookup at a fixed k keeps the drafts the replay keeps."""
    pytest.importorskip("llama_cpp_py_sync")
    from advise_chats import CHATS, recorded_history
    from spectui.advise.measure import cached_gguf
    from spectui.core.events import Control
    from spectui.engines.ggml.load import load_ggml_engine
    from spectui.models.registry import resolve
    from spectui.models.tokenizer_json import JsonTokenizer

    model = cached_gguf(resolve("smollm2-135m"))
    engine = load_ggml_engine(model.gguf, JsonTokenizer(model.tokenizer), "ngram", threads=1, target_name=model.name)
    try:
        recorded_history(data_dir / "history.sqlite3", engine, {"ngram": Control(0, 0.0)}, chats=(CHATS[0][:1],))
    finally:
        engine.close()
    kept = cached_profile_path(data_dir, COSTS.model, COSTS.backend)
    kept.parent.mkdir()
    kept.write_text(profile_json(COSTS))
    out = tmp_path / "real.json"
    result = bench("--method", "ngram", "--k", "0,3", "--repeats", "1", "--max-tokens", "16", "--json", str(out))
    assert result.exit_code == 0, result.output
    rows = {row["arm"]: row for row in json.loads(out.read_text())["history"]}
    assert [row["same_replies"] for row in rows.values()] == [1, 1]
    assert rows["spectui ngram k=3"]["timed_accepted"] == rows["spectui ngram k=3"]["replayed_accepted"]
