"""Compare mode: speculative against its own k = 0 baseline, timed, never overlapping."""

from __future__ import annotations

import json
import statistics
from dataclasses import replace

import pytest
from typer.testing import CliRunner

from spectui.measure.compare import (
    PATHS,
    Comparison,
    SweepPoint,
    alternating_order,
    best_k,
    compare,
    first_difference,
    run_pair,
    sweep_k,
)
from spectui.core.engine import Capabilities, EngineInfo
from spectui.core.events import Control, Done, GenerationParams, Source, Step

from fake_engines import ClockedEngine, VirtualClock  # speeds are exact numbers

MESSAGES = [{"role": "user", "content": "def add(a, b):"}]


def test_first_difference():
    assert first_difference([], []) is None
    assert first_difference([1, 2, 3], [1, 2, 3]) is None
    assert first_difference([1, 2, 3], [1, 9, 3]) == 1
    assert first_difference([5], [6]) == 0
    assert first_difference([1, 2], [1, 2, 3]) == 2
    assert first_difference([1, 2, 3], [1, 2]) == 2
    assert first_difference([], [1]) == 0
    assert first_difference((1, 2), [1, 2]) is None


def test_alternating_order():
    assert alternating_order(0) == ("speculative", "baseline")
    assert alternating_order(1) == ("baseline", "speculative")
    assert alternating_order(2) == alternating_order(0)
    assert set(alternating_order(7)) == set(PATHS)


def test_speedup_is_exact_on_a_virtual_clock():
    clock = VirtualClock()
    # 12 tokens. Speculative k=3: 3 steps of 1.5 s = 4.5 s, plus 0 / 3 / 1.5 s overhead
    # -> 12/4.5, 12/7.5, 12/6 tok/s, median 2.0. Baseline: 12 steps of 1 s, plus 0 / 12 / 6
    # -> 1, 0.5, 0.67 tok/s, median 0.67. The speedup divides decode speeds (after the first
    # step: the overheads fall before it) round by round: (8 tokens / 3 s) / (11 / 11 s) = 8/3.
    engine = ClockedEngine(clock, overheads={"speculative": [0, 3, 1.5], "baseline": [0, 12, 6]})
    comparison = compare(engine, MESSAGES, GenerationParams(max_tokens=12), 3, 0.0, 3, clock=clock)
    assert [run.path for run in comparison.runs] == [
        "speculative", "baseline", "baseline", "speculative", "speculative", "baseline",
    ]
    assert [(run.path, run.index) for run in comparison.runs if run.path == "baseline"] == [
        ("baseline", 0), ("baseline", 1), ("baseline", 2),
    ]
    assert [call[0] for call in engine.calls] == [3, 0, 0, 3, 3, 0]
    assert comparison.speculative_tokens_per_s == pytest.approx(2.0)
    assert comparison.baseline_tokens_per_s == pytest.approx(2 / 3)
    assert comparison.speedup == pytest.approx(8 / 3)
    assert comparison.tokens_per_forward == pytest.approx(4.0)
    assert comparison.identical is True and comparison.difference is None
    assert not comparison.overlapping()
    median_spec = comparison.median_run("speculative")
    assert (median_spec.index, median_spec.wall_seconds) == (2, pytest.approx(6.0))

    data = comparison.as_dict(engine, 3)
    assert data["speedup"] == pytest.approx(8 / 3)
    assert data["runs"] == 3 and data["identical"] is True and data["first_difference"] is None
    assert data["speculative"]["stats"]["tokens_per_s_wall"] == pytest.approx(2.0)
    assert data["speculative"]["model"]["k"] == 3 and data["baseline"]["model"]["k"] == 0
    assert data["baseline"]["stats"]["tokens_per_s_wall"] == pytest.approx(2 / 3)
    assert data["tokens_per_s_median"] == {"speculative": pytest.approx(2.0), "baseline": pytest.approx(2 / 3)}
    assert data["tokens_per_forward"] == pytest.approx(4.0)
    timeline = data["timeline"]
    assert [entry["path"] for entry in timeline] == [run.path for run in comparison.runs]
    assert timeline[0]["started"] == 0.0 and timeline[0]["ended"] == pytest.approx(4.5)
    assert all(entry["tokens"] == 12 for entry in timeline)
    json.dumps(data)  # plain JSON all the way down


def test_a_slowdown_that_starts_mid_round_does_not_move_the_speedup():
    # Rounds S B | B S | S B | B S | S B, every step 1.5 times as long from the sixth call on:
    # the speculative path has 2 slow runs of 5, the baseline 3. Two medians come from
    # different regimes (8/3 over 2/3 = 4x); paired within rounds, four of five rounds say 8/3.
    clock = VirtualClock()
    engine = ClockedEngine(clock, slow_from_call=6)
    comparison = compare(engine, MESSAGES, GenerationParams(max_tokens=12), 3, 0.0, 5, clock=clock)
    assert comparison.speedup == pytest.approx(8 / 3)
    medians = [statistics.median(run.reply.decode_tokens_per_s for run in comparison.of(path)) for path in PATHS]
    assert medians[0] / medians[1] == pytest.approx(4.0)


def test_compare_and_bench_give_the_same_speedup_for_the_same_runs():
    from spectui.bench.measure import BASELINE, Case, summarize_case
    from spectui.bench.runs import Arm, ArmReply
    from spectui.bench.workloads import Workload

    clock = VirtualClock()
    engine = ClockedEngine(clock, overheads={"speculative": [0, 3, 1.5], "baseline": [0, 12, 6]}, slow_from_call=4)
    comparison = compare(engine, MESSAGES, GenerationParams(max_tokens=12), 3, 0.0, 3, clock=clock)
    # The very same replies, as the bench keeps them: each arm's in round order.
    drafting = Arm("spectui", "draft", 3)
    arms = {"speculative": drafting, "baseline": BASELINE}
    replies = {arms[path]: [ArmReply.of(arms[path], run.reply) for run in comparison.of(path)] for path in PATHS}
    workload = Workload("code-go", "go-x", tuple(MESSAGES), 0.0, 12, 0)
    bench = summarize_case(Case(workload, 0.0), replies)
    assert comparison.speedup is not None
    assert bench.arm(drafting).speedup == pytest.approx(comparison.speedup)


def test_warm_up_runs_are_not_counted():
    clock = VirtualClock()
    engine = ClockedEngine(clock)
    seen = []
    comparison = compare(engine, MESSAGES, GenerationParams(max_tokens=12), 3, 0.0, 2, warmup=True, clock=clock, on_run=seen.append)
    assert [call[0] for call in engine.calls] == [3, 0, 3, 0, 0, 3]  # warm-up pair first
    assert seen == comparison.runs and len(comparison.runs) == 4
    assert [run.index for run in comparison.of("speculative")] == [0, 1]
    assert all(run.num_tokens == 12 for run in comparison.runs)  # the warm-up was k + 2 = 5 tokens


def test_a_difference_at_t0_is_found():
    clock = VirtualClock()
    engine = ClockedEngine(clock, diverge_at=5)
    comparison = compare(engine, MESSAGES, GenerationParams(max_tokens=10), 2, 0.0, 2, clock=clock)
    assert comparison.identical is False
    assert comparison.difference == 5


def test_identical_is_none_above_t0():
    clock = VirtualClock()
    comparison = compare(ClockedEngine(clock, diverge_at=1), MESSAGES, GenerationParams(max_tokens=6), 2, 0.7, 1, clock=clock)
    assert comparison.identical is None and comparison.difference is None


def test_overlap_is_detected():
    clock = VirtualClock()
    comparison = compare(ClockedEngine(clock), MESSAGES, GenerationParams(max_tokens=4), 1, 0.0, 2, clock=clock)
    assert not comparison.overlapping()
    comparison.runs[1].reply.started = comparison.runs[0].ended - 0.1
    assert comparison.overlapping()


def test_run_pair_passes_order_indices_and_callbacks():
    clock = VirtualClock()
    engine = ClockedEngine(clock)
    seen_steps, seen_runs, controls = [], [], []

    def factory(path, k, temperature):
        controls.append((path, k, temperature))
        return Control(k, temperature)

    runs = run_pair(
        engine, MESSAGES, GenerationParams(max_tokens=6), 2, 0.0,
        order=("baseline", "speculative"), clock=clock, control_factory=factory,
        on_step=lambda path, step: seen_steps.append(path), on_run=seen_runs.append,
        start_index={"speculative": 4, "baseline": 7},
    )
    assert [(run.path, run.index, run.k) for run in runs] == [("baseline", 7, 0), ("speculative", 4, 2)]
    assert controls == [("baseline", 0, 0.0), ("speculative", 2, 0.0)]
    assert seen_runs == runs
    assert seen_steps == ["baseline"] * 6 + ["speculative"] * 2
    with pytest.raises(ValueError):
        run_pair(engine, MESSAGES, GenerationParams(), 2, 0.0, order=("fast",))


def test_sweep_on_a_virtual_clock_finds_the_best_k():
    clock = VirtualClock()
    # tokens/s = (k + 1) / (1 + k/6) on whole steps: rises with k (12 tokens, k=5: 2 steps).
    points = sweep_k(ClockedEngine(clock), MESSAGES, GenerationParams(max_tokens=12), 0.0, ks=[0, 1, 2, 5], clock=clock)
    assert [point.k for point in points] == [0, 1, 2, 5]
    assert points[0] == SweepPoint(0, pytest.approx(1.0), None, 12, 12)
    assert points[3].tokens_per_s == pytest.approx(12 / (2 * (1 + 5 / 6)))
    assert best_k(points).k == 5
    assert best_k([]) is None
    stop_after = iter([False, False, True])
    shown = []
    points = sweep_k(ClockedEngine(clock), MESSAGES, GenerationParams(max_tokens=4), 0.0, clock=clock,
                     should_stop=lambda: next(stop_after), on_point=shown.append)
    assert [point.k for point in points] == [0, 1] and shown == points


# --- the embedded engine on tiny random models ------------------------------------------


@pytest.fixture(scope="module")
def tiny_engines(tiny_target, tiny_draft, tiny_tokenizer):
    from spectui.engines.torch_backend.backend import torch_engine
    from spectui.engines.speculative.proposers import NgramProposer
    from spectui.engines.torch_backend.backend import torch_draft_proposer

    def engine(proposer):
        info = EngineInfo("embedded", "tiny", None, proposer.method, "float32", "cpu", Capabilities(live_controls=True))
        return torch_engine(tiny_target, tiny_tokenizer, proposer, info)

    return {"draft": engine(torch_draft_proposer(tiny_draft)), "ngram": engine(NgramProposer(1, 3))}


@pytest.mark.parametrize("method", ["draft", "ngram"])
@pytest.mark.parametrize("k", [1, 3, 6])
def test_tiny_models_compare_identical_at_t0(tiny_engines, method, k):
    engine = tiny_engines[method]
    comparison = compare(engine, MESSAGES, GenerationParams(max_tokens=32), k, 0.0, 2)
    assert len(comparison.runs) == 4 and all(run.finished for run in comparison.runs)
    assert comparison.identical is True and comparison.difference is None
    assert comparison.runs[0].reply.token_ids  # not vacuously identical
    assert comparison.tokens_per_forward >= 1.0
    # Real clock: each run ends before the next begins.
    assert not comparison.overlapping()
    for earlier, later in zip(comparison.runs, comparison.runs[1:]):
        assert earlier.started < earlier.ended <= later.started
    # The speedup is recomputed from exactly the runs the Comparison holds, paired by round.
    per_round = [spec.reply.decode_tokens_per_s / base.reply.decode_tokens_per_s for spec, base in comparison.rounds()]
    assert len(per_round) == 2 and comparison.speedup == pytest.approx(statistics.median(per_round))
    baseline_steps = [step for run in comparison.of("baseline") for step in run.reply.steps]
    assert {source for step in baseline_steps for source in step.sources} == {Source.TARGET}


def test_baseline_never_calls_the_proposer(tiny_target, tiny_tokenizer):
    from spectui.engines.torch_backend.backend import torch_engine
    from spectui.engines.speculative.proposers import Proposer

    class RefusingProposer(Proposer):
        method = "draft"

        def prefill(self, token_ids):
            raise AssertionError("k = 0 must not read the prompt into a drafter")

        def propose(self, *args):
            raise AssertionError("k = 0 must not draft")

    info = EngineInfo("embedded", "tiny", None, "draft", "float32", "cpu", Capabilities(live_controls=True))
    engine = torch_engine(tiny_target, tiny_tokenizer, RefusingProposer(), info)
    runs = run_pair(engine, MESSAGES, GenerationParams(max_tokens=8), 4, 0.0, order=("baseline",))
    assert runs[0].finished and runs[0].num_forwards == runs[0].num_tokens


def test_tiny_models_identical_is_none_above_t0(tiny_engines):
    comparison = compare(tiny_engines["draft"], MESSAGES, GenerationParams(max_tokens=16, seed=3), 3, 0.8, 1)
    assert comparison.identical is None and comparison.difference is None
    assert comparison.speedup is not None


def test_cancelling_a_run_stops_run_pair(tiny_engines):
    controls = {}
    runs_seen = []

    def factory(path, k, temperature):
        controls[path] = Control(k, temperature)
        return controls[path]

    def on_step(path, step):
        runs_seen.append(path)
        if len(runs_seen) == 2:
            controls[path].cancel()

    runs = run_pair(
        tiny_engines["ngram"], MESSAGES, GenerationParams(max_tokens=64), 3, 0.0,
        order=("speculative", "baseline"), control_factory=factory, on_step=on_step,
    )
    assert [run.path for run in runs] == ["speculative"]
    assert runs[0].cancelled and runs[0].num_forwards == 2
    comparison = Comparison(runs, 0.0)
    assert comparison.cancelled and comparison.speedup is None and comparison.identical is None


def test_cancel_ends_compare_early(tiny_engines):
    def factory(path, k, temperature):
        control = Control(k, temperature)
        if path == "baseline":
            control.cancel()
        return control

    comparison = compare(tiny_engines["ngram"], MESSAGES, GenerationParams(max_tokens=8), 2, 0.0, 3, control_factory=factory)
    assert [(run.path, run.finish_reason) for run in comparison.runs] == [("speculative", "length"), ("baseline", "cancelled")]


def test_tiny_models_sweep_k(tiny_engines):
    points = sweep_k(tiny_engines["draft"], MESSAGES, GenerationParams(max_tokens=16), 0.0, ks=range(0, 5))
    assert [point.k for point in points] == [0, 1, 2, 3, 4]
    assert points[0].gamma is None and points[0].num_forwards == points[0].tokens
    assert all(point.gamma is not None and 0.0 <= point.gamma <= 1.0 for point in points[1:])
    assert len({point.tokens for point in points}) == 1  # T=0: the same reply at every k
    assert best_k(points).tokens_per_s == max(point.tokens_per_s for point in points)


# --- the CLI --------------------------------------------------------------------------


def invoke(*args):
    from spectui.cli.app import app

    return CliRunner().invoke(app, ["compare", *args])


def tiny_args(folders, *extra):
    return ["hello world", "--model", folders["target"], "--draft", folders["draft"],
            "--dtype", "float32", "--device", "cpu", "--max-tokens", "16", *extra]


def test_cli_compare_json_on_tiny_models(tiny_folders):
    result = invoke(*tiny_args(tiny_folders, "--k", "3", "--runs", "2", "--json"))
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["identical"] is True and data["first_difference"] is None
    assert data["runs"] == 2 and len(data["timeline"]) == 4
    assert [entry["path"] for entry in data["timeline"]] == ["speculative", "baseline", "baseline", "speculative"]
    assert data["speculative"]["model"]["k"] == 3 and data["baseline"]["model"]["k"] == 0
    assert data["speculative"]["token_ids"] == data["baseline"]["token_ids"]
    assert data["speedup"] > 0 and data["tokens_per_forward"] >= 1
    # the speedup re-derived from the timeline: each round's decode speeds, then their median
    decode = {(entry["path"], entry["index"]): entry["decode_tokens_per_s"] for entry in data["timeline"]}
    per_round = [decode["speculative", index] / decode["baseline", index] for index in range(2)]
    assert data["speedup"] == pytest.approx(statistics.median(per_round))


def test_cli_compare_table_on_tiny_models(tiny_folders):
    result = invoke(*tiny_args(tiny_folders, "--method", "ngram", "--runs", "1", "--table"))
    assert result.exit_code == 0, result.stderr
    assert "identical: yes" in result.stdout and "speedup" in result.stdout
    assert "speculative" in result.stdout and "baseline" in result.stdout
    assert "median of 1 run" in result.stdout and "1 runs" not in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--runs", "0"], "spectui: error: runs must be from 1 to 50, got 0"),
        (["--runs", "51"], "spectui: error: runs must be from 1 to 50, got 51"),
        (["--engine", "server"], "spectui: error: --engine server needs --server URL (e.g. http://127.0.0.1:8000)"),
        (["--method", "eagle", "--engine", "embedded"],
         "spectui: error: --method eagle needs trained heads (pass --heads DIR from spectui heads train): use --engine vllm, or draft / ngram"),
        (["-k", "40"], "spectui: error: k must be from 0 to 16 or auto, got 40"),
    ],
)
def test_cli_option_errors_are_one_line(args, message):
    result = invoke("hi", *args)
    assert result.exit_code == 2
    assert result.stderr.strip() == message


def test_cli_unknown_model_is_one_line():
    result = invoke("hi", "--model", "no-such-model-xyz", "--device", "cpu", "--table")
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("spectui: error: unknown model")


def test_cli_reports_a_difference_and_exits_1(monkeypatch):
    """A broken engine whose baseline differs at token 5: the table says so, exit code 1."""
    import spectui.engines.torch_backend.build as build

    monkeypatch.setattr(build, "build_embedded_engine", lambda options, models, progress=None, **_: ClockedEngine(VirtualClock(), diverge_at=5))
    result = invoke("hi", "--max-tokens", "8", "--runs", "1", "--table", "--backend", "torch")
    assert result.exit_code == 1
    assert "DIFFERENT at token 5" in result.stdout
    result = invoke("hi", "--max-tokens", "8", "--runs", "1", "--json", "--backend", "torch")
    assert result.exit_code == 1 and json.loads(result.stdout)["first_difference"] == 5


def test_cli_reports_where_kernels_that_promise_nothing_left_the_plain_path(monkeypatch):
    """bf16 and other kernels that do not promise identity: the near-tie is reported with its
    position, both tokens and the plain path's top-two gap there, and it is not an error."""
    import spectui.engines.torch_backend.build as build

    monkeypatch.setattr(build, "build_embedded_engine",
                        lambda options, models, progress=None, **_: ClockedEngine(VirtualClock(), diverge_at=5, promised=False))
    result = invoke("hi", "--max-tokens", "8", "--runs", "1", "--table", "--backend", "torch")
    assert result.exit_code == 0, result.stdout
    said = " ".join(result.stdout.split())  # the console wraps the line
    assert "left the plain path at token 5: 'x' where plain decoding wrote 'x', top-two gap 0.0039" in said
    assert "broken" not in said


# --- real weights -----------------------------------------------------------------------


def smollm2_or_skip() -> None:
    """Real weights only when already converted in the local cache: a test never fetches."""
    from spectui.models.convert import is_converted
    from spectui.models.registry import converted_dir, get_spec

    spec = get_spec("smollm2-135m")
    if spec is None or not is_converted(converted_dir(spec.alias), spec.index.sha256):
        pytest.skip("smollm2-135m is not in the local cache (`spectui models fetch smollm2-135m`)")


@pytest.fixture(scope="module")
def smollm2_draft_engine():
    """Loaded once for both methods: prompt lookup is the same target with_method("ngram")."""
    smollm2_or_skip()
    from spectui.engines.torch_backend.build import build_embedded_engine
    from spectui.models.registry import resolve_pair
    from spectui.settings.options import EngineOptions

    # As test_engine_real: no smaller SmolLM2 exists, so the draft is the same weights in
    # dynamic int8 (build's CPU choice for a draft), which agrees often but not always.
    options = EngineOptions(model="smollm2-135m", draft="smollm2-135m", method="draft", dtype="float32", device="cpu")
    engine = build_embedded_engine(options, resolve_pair(options.model, options.draft))
    yield engine
    engine.close()


@pytest.mark.real_weights
@pytest.mark.parametrize("method", ["draft", "ngram"])
def test_smollm2_compare_is_identical_at_t0(method, smollm2_draft_engine):
    engine = smollm2_draft_engine.with_method(method)
    assert engine.info.method == method
    messages = [{"role": "user", "content": "Give me a JSON object describing a book with title, author, year and tags."}]
    comparison = compare(engine, messages, GenerationParams(max_tokens=32), 4, 0.0, 2)
    assert [run.path for run in comparison.runs] == ["speculative", "baseline", "baseline", "speculative"]
    assert all(run.finished for run in comparison.runs)
    assert comparison.identical is True
    assert not comparison.overlapping()
    assert sum(step.num_drafted for run in comparison.of("speculative") for step in run.reply.steps) > 0
    assert comparison.speedup is not None and comparison.tokens_per_forward >= 1.0


def test_with_method_swaps_drafting_and_keeps_the_output(tiny_target, tiny_draft, tiny_tokenizer):
    from spectui.engines.torch_backend.backend import torch_engine
    from spectui.engines.speculative.proposers import NgramProposer
    from spectui.engines.torch_backend.backend import torch_draft_proposer
    from spectui.core.errors import UsageError

    info = EngineInfo("embedded", "tiny", "tiny-draft", "draft", "float32", "cpu", Capabilities(live_controls=True))
    engine = torch_engine(tiny_target, tiny_tokenizer, torch_draft_proposer(tiny_draft), info)
    lookup = engine.with_method("ngram")
    assert isinstance(lookup.proposer, NgramProposer) and lookup.info.method == "ngram" and lookup.info.draft is None
    back = lookup.with_method("draft")
    assert back.proposer is engine.proposer and back.info == engine.info
    params = GenerationParams(max_tokens=24)
    outputs = [compare(e, MESSAGES, params, 3, 0.0, 1).runs[0].reply.token_ids for e in (engine, lookup, back)]
    assert outputs[0] == outputs[1] == outputs[2] and outputs[0]

    ngram_only = torch_engine(tiny_target, tiny_tokenizer, NgramProposer(), replace(info, method="ngram", draft=None))
    with pytest.raises(UsageError, match="no draft model is loaded"):
        ngram_only.with_method("draft")


def test_a_forward_that_sampled_only_the_stop_token_still_counts_its_token():
    from spectui.measure.compare import TimedRun
    from spectui.measure.run import MeasuredReply

    # Step 1 keeps 2 of 3 drafts and recovers; step 2 refuses its draft and the target's
    # token is the stop token, left out of the reply: 3 + 1 tokens from 2 forwards.
    steps = [Step((1, 2, 3), (Source.DRAFT, Source.DRAFT, Source.RECOVERED), "", drafted=(1, 2, 9), k=3),
             Step((), (), "", drafted=(7,), k=3)]
    reply = MeasuredReply(steps, Done("stop"), started=0.0, ended=1.0)
    comparison = Comparison([TimedRun("speculative", 0, reply, 3)], 0.0)
    assert comparison.tokens_per_forward == pytest.approx(2.0)  # was 3 / 2


def test_rounds_pair_runs_that_ran_back_to_back_and_skip_a_cancelled_ones_partner():
    from spectui.measure.compare import TimedRun
    from spectui.measure.run import MeasuredReply

    def run(path, index, finish="length"):
        return TimedRun(path, index, MeasuredReply([], Done(finish)), 3 if path == "speculative" else 0)

    # S B | B S(cancelled) | and a rerun from the view: start indices 2 and 2, order S B
    runs = [run("speculative", 0), run("baseline", 0), run("baseline", 1), run("speculative", 1, "cancelled"),
            run("speculative", 2), run("baseline", 2)]
    pairs = Comparison(runs, 0.0).rounds()
    assert [(spec.index, base.index) for spec, base in pairs] == [(0, 0), (2, 2)]
    # S B | S(cancelled), then a rerun whose indices no longer match: start 2 and 1, order B S
    runs = [run("speculative", 0), run("baseline", 0), run("speculative", 1, "cancelled"),
            run("baseline", 1), run("speculative", 2)]
    pairs = Comparison(runs, 0.0).rounds()
    assert [(spec.index, base.index) for spec, base in pairs] == [(0, 0), (2, 1)]
