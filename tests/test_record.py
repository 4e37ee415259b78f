"""One record for a reply: `generate --json`, the history's JSONL trace and every engine write
the same step shape, and γ, per-position acceptance and every count recompute from the steps."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from spectui.core.events import Done, Source, Step
from spectui.core.record import reply_record, step_from_record, step_record
from spectui.core.stats import per_position_acceptance, summarize

PROMPT = "def add(a, b):"


def generate_json(monkeypatch, tiny_target, tiny_tokenizer, stop_ids=None) -> dict:
    """`spectui generate --json` on the tiny target drafting for itself (every draft accepted)."""
    from spectui.cli.app import app

    monkeypatch.setattr("spectui.models.load.load_models", lambda requests, *args, **kwargs: [
        (tiny_target, tiny_tokenizer) for _ in requests])  # the pair loads together, never from the real cache
    monkeypatch.setattr("spectui.engines.torch_backend.build.checked_draft_vocab", lambda *args, **kwargs: (None, None))
    if stop_ids is not None:
        monkeypatch.setattr("spectui.engines.speculative.engine.stop_token_ids", lambda *args: set(stop_ids))
    result = CliRunner().invoke(app, [
        "generate", PROMPT, "--json", "--engine", "embedded", "--model", "smollm2-135m", "--draft", "smollm2-135m",
        "--method", "draft", "-k", "8", "--device", "cpu", "--dtype", "float32", "--max-tokens", "24",
    ])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_generate_json_stops_inside_a_step_and_its_stats_recompute_from_the_steps(monkeypatch, tiny_target, tiny_tokenizer):
    free = generate_json(monkeypatch, tiny_target, tiny_tokenizer, stop_ids=())["token_ids"]
    stop = free[3]  # the second step's third draft: the target accepted 8, the reply ends at 3
    assert stop not in free[:3]
    reply = generate_json(monkeypatch, tiny_target, tiny_tokenizer, stop_ids={stop})
    assert reply["token_ids"] == free[:4] and reply["token_ids"][-1] == stop
    assert (reply["finish_reason"], reply["stop_token_id"]) == ("stop", stop)
    assert all(step["token_ids"] for step in reply["steps"]), "no empty steps"
    last = reply["steps"][-1]
    assert last["sources"] == ["draft"] * 3 and (last["num_drafted"], last["num_accepted"]) == (8, 8)
    steps, stats = reply["steps"], reply["stats"]
    drafted = sum(step["num_drafted"] for step in steps)
    accepted = sum(step["num_accepted"] for step in steps)
    assert (stats["num_drafted"], stats["num_accepted"], stats["gamma"]) == (drafted, accepted, accepted / drafted)
    assert (stats["num_steps"], stats["num_tokens"]) == (len(steps), len(reply["token_ids"]))
    assert stats["per_position_acceptance"] == [1.0] * 8
    assert reply["model"]["engine"] == "embedded" and reply["model"]["exact_provenance"] is True


def a_step(**fields) -> Step:
    base = dict(token_ids=(5, 6, 7), sources=(Source.DRAFT, Source.DRAFT, Source.RECOVERED), text="abc",
                drafted=(5, 6, 9), k=3, pieces=("a", "b", "c"), rejected_text="z")
    return Step(**{**base, **fields})


def test_a_step_record_reads_back_as_the_step():
    stopped = a_step(token_ids=(5,), sources=(Source.DRAFT,), text="a", pieces=("a",), drafted=(5, 6, 8), accepted_count=3)
    for step in (a_step(), stopped, a_step(draft_count=4, drafted=(), exact=False), a_step(tree_nodes=11, method="medusa")):
        assert step_from_record(json.loads(json.dumps(step_record(step)))) == step
    assert step_record(stopped)["num_accepted"] == 3  # what the target accepted, not the draft sources shown


def test_the_reply_record_counts_what_the_target_accepted():
    steps = [a_step(token_ids=(1,), sources=(Source.TARGET,), text="x", pieces=("x",), drafted=(), k=0),
             a_step(), a_step(token_ids=(5,), sources=(Source.DRAFT,), text="a", pieces=("a",), accepted_count=2)]
    done = Done("stop", (1, 2), stop_token_id=5)
    record = reply_record(steps, done, summarize(steps, 1.0).as_dict())
    assert record["token_ids"] == [1, 5, 6, 7, 5] and record["stop_token_id"] == 5
    assert record["stats"]["num_accepted"] == 4 and record["stats"]["gamma"] == 4 / 6
    assert record["stats"]["per_position_acceptance"] == per_position_acceptance(steps) == [1.0, 1.0, 0.0]


def test_the_jsonl_trace_writes_the_same_step_record(tmp_path):
    from spectui.store import Store, export_trace_jsonl

    store = Store(tmp_path / "history.sqlite3")
    conversation = store.new_conversation({})
    reply = store.add_message(conversation, "assistant", "")
    step = a_step(accepted_count=3, pieces=(), rejected_text="")
    store.add_step(reply, 0, step, ["a", "b", "c"], "z", 0.5)
    [line] = [json.loads(line) for line in export_trace_jsonl(store.load_conversation(conversation))]
    where = {name: line.pop(name) for name in ("conversation_id", "message_id", "step", "arrived")}
    assert where == {"conversation_id": conversation, "message_id": reply, "step": 0, "arrived": 0.5}
    assert line == step_record(a_step(accepted_count=3))  # the pieces and ghost as shown
    store.close()


def test_every_step_of_the_scripted_engine_carries_its_words():
    from spectui.core.events import Control, GenerationParams
    from spectui.engines.scripted import ScriptedEngine

    engine = ScriptedEngine(alpha=0.6, seed=3)
    events = list(engine.stream([{"role": "user", "content": "hi"}], GenerationParams(max_tokens=30), Control(k=4)))
    steps = [event for event in events if isinstance(event, Step)]
    assert all(step.pieces == tuple(engine.vocab[i] for i in step.token_ids) for step in steps)
    assert any(step.rejected_text for step in steps)
    assert all(step.rejected_text == engine.decode(step.rejected) for step in steps)


# --- which kernels ran: the record names them (the bar said "ggml Q4_K_M · 2 threads", the record only the dtype)


def test_generate_json_names_the_torch_kernels_threads_and_version(monkeypatch, tiny_target, tiny_tokenizer):
    import torch

    model = generate_json(monkeypatch, tiny_target, tiny_tokenizer)["model"]
    assert model["dtype"] == "float32"
    assert (model["backend"], model["threads"], model["library"], model["library_version"]) == (
        "torch", torch.get_num_threads(), "torch", torch.__version__)


def test_generate_takes_the_scripted_engine_and_its_record_says_so():
    # `chat --engine scripted` ran; `generate --engine scripted` was refused as no engine.
    from importlib.metadata import version

    from spectui.cli.app import app

    shown = CliRunner().invoke(app, ["generate", "hi", "--engine", "scripted", "--max-tokens", "6"])
    assert shown.exit_code == 0, shown.output
    assert "You asked" in shown.stdout and "k=4" in " ".join(shown.stderr.split())  # no auto k nobody asked for
    result = CliRunner().invoke(app, ["generate", "hi", "--engine", "scripted", "--max-tokens", "6", "--json"])
    assert result.exit_code == 0, result.output
    model = json.loads(result.stdout)["model"]
    assert model["engine"] == "scripted" and model["k"] == 4
    assert (model["backend"], model["threads"], model["library"], model["library_version"]) == (
        "scripted", None, "spectui", version("spectui"))


@pytest.mark.real_weights
@pytest.mark.slow
def test_generate_json_on_ggml_names_its_threads_and_the_library_version():
    import llama_cpp_py_sync
    from spectui.cli.app import app

    result = CliRunner().invoke(app, ["generate", "Hi", "--json", "--model", "smollm2-135m", "--backend", "ggml",
                                      "--method", "ngram", "--max-tokens", "4", "--engine", "embedded"])
    assert result.exit_code == 0, result.output
    model = json.loads(result.stdout)["model"]
    assert model["backend"] == "ggml" and model["library"] == "llama-cpp-py-sync"
    assert model["library_version"] == llama_cpp_py_sync.__version__
    assert isinstance(model["threads"], int) and model["threads"] >= 1 and model["dtype"]


def test_a_verify_that_stopped_early_keeps_its_verified_count_through_the_record():
    step = Step((4, 9), (Source.DRAFT, Source.RECOVERED), "ab", drafted=(4, 5, 6, 7, 8), k=5, verified_count=2)
    again = step_from_record(json.loads(json.dumps(step_record(step))))
    assert again.verified_count == 2 and again.num_verified == 2 and again.num_drafted == 5
