"""The bench harness: its arithmetic on made-up replies, and a whole run on tiny models.

These tests check what the harness computes and that every field is filled from the
same run; they do not time anything (speed on two shared cores says nothing).
"""

from __future__ import annotations

import json
import statistics
from dataclasses import replace

import pytest
from typer.testing import CliRunner

from spectui.bench.measure import BASELINE, Case, round_order, run_case
from spectui.bench.plan import BenchResult, plan_arms, plan_cases, run_bench
from spectui.bench.report import category_rows, markdown, targets
from spectui.bench.runs import Arm, ArmReply
from spectui.bench.workloads import Workload
from spectui.core.events import Source, Step
from spectui.measure.costs import slope_through_one, timings_of


def step(n_tokens: int, drafted: int = 0, accepted: int = 0, k: int = 0, draft_s: float = 0.0, verify_s: float = 1.0):
    sources = [Source.DRAFT] * accepted + [Source.TARGET if not drafted else Source.RECOVERED]
    sources += [Source.TARGET] * (n_tokens - len(sources))
    return Step(tuple(range(n_tokens)), tuple(sources[:n_tokens]), "", drafted=tuple(range(drafted)), k=k,
                draft_seconds=draft_s, verify_seconds=verify_s)


def test_decode_rate_leaves_the_first_token_out():
    reply = ArmReply(BASELINE, list(range(11)), wall_seconds=6.0, first_token_seconds=1.0)
    assert reply.tokens_per_s == pytest.approx(11 / 6)
    assert reply.decode_tokens_per_s == pytest.approx(10 / 5)
    assert ArmReply(BASELINE, [1], 1.0, 0.5).decode_tokens_per_s is None
    # A prefill that also verified 4 drafts brought 5 tokens at once: they are not decode tokens.
    assisted = ArmReply(Arm("transformers", "assisted", 4), list(range(11)), 6.0, 1.0, first_chunk_tokens=5)
    assert assisted.decode_tokens_per_s == pytest.approx(6 / 5)


def test_the_streamer_counts_what_arrives_with_the_first_token():
    import torch

    from spectui.bench.runners import FirstTokenTimer

    ticks = iter([0.0, 0.5, 0.9])
    timer = FirstTokenTimer(lambda: next(ticks))
    timer.start()
    timer.put(torch.tensor([[7, 8, 9]]))  # the prompt
    timer.put(torch.tensor([1, 2, 3, 4, 5]))  # a verified step: four drafts and the target's token
    timer.put(torch.tensor([6]))
    assert (timer.first_token_seconds, timer.first_chunk_tokens) == (0.5, 5)


def test_costs_are_relative_to_one_plain_target_step():
    # first step of each reply is prefill (10 s) and is left out; decode steps take 0.1 s
    baseline = [[step(1, verify_s=10.0), step(1, verify_s=0.1), step(1, verify_s=0.1)]]
    target = timings_of(baseline).target_seconds()
    assert target == pytest.approx(0.1)
    drafted = timings_of([[step(1, verify_s=10.0),
                           step(3, drafted=4, accepted=2, k=4, draft_s=0.08, verify_s=0.15),
                           step(5, drafted=4, accepted=4, k=4, draft_s=0.08, verify_s=0.15),
                           step(2, drafted=2, accepted=1, k=4, draft_s=0.04, verify_s=0.12)]])  # cut short: not v(4)
    assert drafted.draft_cost(target) == pytest.approx(0.2)  # 0.02 s per drafted token / 0.1 s
    assert drafted.verify_cost(4, target) == pytest.approx(1.5)
    assert drafted.verify_cost(2, target) == pytest.approx(1.2)
    assert drafted.draft_cost(None) is None and drafted.target_seconds() is None


def test_replayed_speed_charges_every_step_at_the_cases_median_costs():
    from spectui.bench.runs import case_costs, replayed_rate, replayed_seconds

    # one plain step and one drafting step each hit a slow moment of the machine
    plain = [step(1, verify_s=5.0)] + [step(1, verify_s=v) for v in (0.1, 0.1, 0.4)]
    drafted = [step(1, verify_s=5.0)] + [step(3, drafted=2, accepted=2, k=2, draft_s=d, verify_s=v)
                                         for d, v in ((0.1, 0.12), (0.1, 0.12), (0.6, 0.5))]
    costs = case_costs([("none", plain), ("draft", drafted)])
    assert set(costs.verify) == {0, 2} and set(costs.draft) == {"draft"}
    assert costs.verify_seconds(0) == pytest.approx(0.1) and costs.verify_seconds(2) == pytest.approx(0.12)
    assert costs.draft_seconds("draft") == pytest.approx(0.05)
    assert replayed_seconds(plain, "none", costs) == pytest.approx(0.3)
    assert replayed_seconds(drafted, "draft", costs) == pytest.approx(3 * (0.12 + 2 * 0.05))
    speedup = replayed_rate([drafted], "draft", costs) / replayed_rate([plain], "none", costs)
    assert speedup == pytest.approx((9 / 0.66) / (3 / 0.3))
    # after two plain steps a draft model first reads the two tokens it missed: one forward
    # over them, scaled as the target's forward over as many tokens is
    resumed = [step(1, verify_s=5.0), step(1, verify_s=0.1), step(1, verify_s=0.1),
               step(3, drafted=2, accepted=2, k=2, draft_s=0.1, verify_s=0.12)]
    assert replayed_seconds(resumed, "draft", costs) == pytest.approx(0.2 + 0.12 + 0.1 + 0.05 * 0.12 / 0.1)
    assert replayed_seconds(resumed, "ngram", case_costs([("none", plain), ("ngram", resumed)])) == pytest.approx(
        0.2 + 0.12 + 0.1)
    tree = replace(drafted[1], tree_nodes=6)
    assert replayed_seconds([drafted[0], tree], "draft", costs) is None


def test_the_verify_cost_line_goes_through_one_at_k0_and_the_measured_points():
    assert slope_through_one([(2, 2.0), (4, 3.0)]) == pytest.approx(0.5)
    assert slope_through_one([]) is None
    # weighted by how many steps measured each point: 3 at n = 1 (v 2.0), 1 at n = 2 (v 2.0)
    assert slope_through_one([(1, 2.0), (2, 2.0)], [3, 1]) == pytest.approx((3 * 1 * 1.0 + 1 * 2 * 1.0) / (3 * 1 + 1 * 4))


def test_rounds_alternate_so_no_arm_is_always_first():
    arms = [BASELINE, Arm("spectui", "draft", 4), Arm("transformers", "none", 0)]
    assert round_order(arms, 0) == arms
    assert round_order(arms, 1) == arms[::-1]


def test_plan_pairs_each_anchor_with_spectui_at_the_same_k():
    arms = plan_arms(["spectui", "transformers", "vllm"], ["draft", "ngram"], [0, 2, 4], anchor_k=4)
    assert arms[0] == BASELINE
    assert Arm("transformers", "assisted", 4) in arms and Arm("transformers", "prompt-lookup", 4) in arms
    assert Arm("spectui", "draft", 4) in arms and Arm("spectui", "ngram", 4) in arms
    assert Arm("vllm", "none", 0) in arms and Arm("vllm", "draft", 4) in arms
    assert len(arms) == len(set(arms))
    # Each vLLM method is one more engine in memory: --vllm-methods can name fewer.
    fewer = plan_arms(["spectui", "vllm"], ["draft", "ngram"], [0, 4], anchor_k=4, vllm_methods=["draft"])
    assert [a for a in fewer if a.runner == "vllm"] == [Arm("vllm", "none", 0), Arm("vllm", "draft", 4)]
    assert Arm("spectui", "ngram", 4) in fewer
    workload = Workload("json", "json-x", ({"role": "user", "content": "hi"},), 0.0, 8, 1)
    assert [c.temperature for c in plan_cases([workload], None)] == [0.0]
    assert [c.temperature for c in plan_cases([workload], [0.0, 1.0])] == [0.0, 1.0]


class ScriptedRunner:
    """Replies whose timing is set per arm: speedups must come out of these exact numbers."""

    def __init__(self, seconds_per_token: dict[Arm, float]) -> None:
        self.seconds_per_token = seconds_per_token
        self.calls: list[Arm] = []

    def __call__(self, arm, messages, params, temperature) -> ArmReply:
        self.calls.append(arm)
        per = self.seconds_per_token[arm]
        tokens = list(range(params.max_tokens))
        steps = [step(1)] if not arm.speculative else [step(3, drafted=arm.k, accepted=2, k=arm.k)]
        return ArmReply(arm, tokens, wall_seconds=1.0 + per * (len(tokens) - 1), first_token_seconds=1.0, steps=steps)


def test_speedups_divide_arms_of_the_same_case():
    spec = Arm("spectui", "draft", 4)
    hf = Arm("transformers", "none", 0)
    auto = Arm("spectui", "draft", 4, auto=True)
    runner = ScriptedRunner({BASELINE: 0.2, spec: 0.1, hf: 0.25, auto: 0.104})
    workload = Workload("code-go", "go-x", ({"role": "user", "content": "go"},), 0.0, 11, 3)
    result = run_case(Case(workload, 0.0), [BASELINE, spec, hf, auto], {"spectui": runner, "transformers": runner},
                      repeats=2)
    assert runner.calls == [BASELINE, spec, hf, auto, auto, hf, spec, BASELINE]
    assert result.best["draft"]["measured_k"] == 4  # adaptive k is not a fixed k to pick
    assert result.arm(spec).speedup == pytest.approx(2.0)
    assert result.arm(hf).speedup == pytest.approx(0.8)
    assert result.arm(spec).gamma == pytest.approx(0.5) and result.arm(spec).tau == pytest.approx(3.0)
    assert result.arm(spec).same_tokens_as_baseline is True
    bench = BenchResult({"methods": ["draft"], "anchor_k": 4, "runners": ["spectui", "transformers"]}, [result])
    row = category_rows(bench)[0]
    assert row.best["draft"][0] == 4 and row.best["draft"][1] == pytest.approx(2.0)
    assert row.vs_transformers == pytest.approx(0.25 / 0.2)
    by_claim = {t.claim: t for t in targets(bench)}
    assert by_claim["spectui k=0 vs transformers greedy generate"].met is True
    assert by_claim["spectui best draft k vs its k=0, code and JSON"].measured == pytest.approx(2.0)
    assert by_claim["spectui draft vs transformers assisted generation, k=4"].met is None  # not run
    assert by_claim["adaptive k (draft) vs the best fixed k, worst category"].measured == pytest.approx(0.1 / 0.104)
    assert by_claim["adaptive k (draft) vs k=0, worst category"].measured == pytest.approx(0.2 / 0.104)
    text = markdown(bench, "spectui bench --categories code-go")
    assert "spectui bench --categories code-go" in text and "| code-go | 0 |" in text


def test_adaptive_k_is_held_to_one_fixed_k_for_the_whole_category():
    from spectui.bench.plots import adaptive_bars

    k2, k4, auto = Arm("spectui", "draft", 2), Arm("spectui", "draft", 4), Arm("spectui", "draft", 4, auto=True)
    # k 2 wins the first prompt (2.0x against 1.6x), k 4 the second (2.5x against 1.6x):
    # a user sets one k for SQL, and k 4's 2.0x geometric mean beats k 2's 1.79x. Against each
    # prompt's own fastest arm, adaptive k would have been 0.8x on the second.
    timings = [{BASELINE: 0.2, k2: 0.1, k4: 0.125, auto: 0.1},
               {BASELINE: 0.2, k2: 0.125, k4: 0.08, auto: 0.1}]
    results = []
    for index, seconds in enumerate(timings):
        workload = Workload("sql", f"sql-{index}", ({"role": "user", "content": "join"},), 0.0, 11, 3)
        results.append(run_case(Case(workload, 0.0), [BASELINE, k2, k4, auto], {"spectui": ScriptedRunner(seconds)}, repeats=1))
    bench = BenchResult({"methods": ["draft"], "anchor_k": 4}, results)
    found = category_rows(bench)[0].auto["draft"]
    assert found.best_k == 4 and found.best_speedup == pytest.approx(2.0)
    assert found.auto_speedup == pytest.approx(2.0) and found.over_best == pytest.approx(1.0)
    by_claim = {t.claim: t for t in targets(bench)}
    assert by_claim["adaptive k (draft) vs the best fixed k, worst category"].measured == pytest.approx(1.0)
    assert by_claim["adaptive k (draft) vs k=0, worst category"].measured == pytest.approx(2.0)
    assert adaptive_bars(bench, "draft") == {"sql": (pytest.approx(2.0), pytest.approx(2.0))}
    assert "1.00× k=4 / 2.00×" in markdown(bench, "spectui bench")
    # a category where adaptive k did not run on every prompt has no figure
    partial = replace(results[1], arms=[r for r in results[1].arms if not r.arm.auto])
    assert category_rows(BenchResult(bench.settings, [results[0], partial]))[0].auto["draft"] is None


def test_best_config_takes_each_cases_fastest_method():
    draft, ngram = Arm("spectui", "draft", 4), Arm("spectui", "ngram", 4)
    # Go favours the draft model (2x), Python prompt lookup (4x): the best config is per case.
    timings = {"code-go": {BASELINE: 0.2, draft: 0.1, ngram: 0.16}, "code-python": {BASELINE: 0.2, draft: 0.25, ngram: 0.05}}
    results = []
    for category, seconds in timings.items():
        workload = Workload(category, f"{category}-x", ({"role": "user", "content": "hi"},), 0.0, 11, 3)
        runner = ScriptedRunner(seconds)
        results.append(run_case(Case(workload, 0.0), [BASELINE, draft, ngram], {"spectui": runner}, repeats=1))
    by_claim = {t.claim: t for t in targets(BenchResult({"methods": ["draft", "ngram"], "anchor_k": 4}, results))}
    assert by_claim["spectui best draft k vs its k=0, code and JSON"].measured == pytest.approx((2.0 + 1.0) / 2)
    best_config = by_claim["spectui best config (any method, any k) vs its k=0, code and JSON"]
    assert best_config.measured == pytest.approx((2.0 + 4.0) / 2) and best_config.met
    one_method = targets(BenchResult({"methods": ["draft"], "anchor_k": 4}, results))
    assert not [t for t in one_method if "best config" in t.claim]  # the draft line already says it


def test_adaptive_prompt_lookup_is_a_config_of_its_own_against_the_copying_target():
    ngram, auto = Arm("spectui", "ngram", 4), Arm("spectui", "ngram", 4, auto=True)
    workload = Workload("retrieval", "retrieval-x", ({"role": "user", "content": "quote"},), 0.0, 11, 3)
    runner = ScriptedRunner({BASELINE: 0.3, ngram: 0.15, auto: 0.1})
    result = run_case(Case(workload, 0.0), [BASELINE, ngram, auto], {"spectui": runner}, repeats=1)
    by_claim = {t.claim: t for t in targets(BenchResult({"methods": ["ngram"], "anchor_k": 4}, [result]))}
    fixed = by_claim["spectui best n-gram k vs its k=0, summarize and retrieval"]
    adaptive = by_claim["spectui n-gram with adaptive k vs its k=0, summarize and retrieval"]
    assert fixed.measured == pytest.approx(2.0) and not fixed.met
    assert adaptive.measured == pytest.approx(3.0) and adaptive.met
    without_auto = run_case(Case(workload, 0.0), [BASELINE, ngram], {"spectui": runner}, repeats=1)
    claims = [t.claim for t in targets(BenchResult({"methods": ["ngram"], "anchor_k": 4}, [without_auto]))]
    assert not [claim for claim in claims if "adaptive" in claim]


@pytest.fixture(scope="module")
def tiny_engine(tiny_target, tiny_draft, tiny_tokenizer):
    from spectui.core.engine import Capabilities, EngineInfo
    from spectui.engines.torch_backend.backend import torch_engine
    from spectui.engines.torch_backend.backend import torch_draft_proposer

    info = EngineInfo("embedded", "tiny", "tiny-draft", "draft", "float32", "cpu", Capabilities(live_controls=True))
    return torch_engine(tiny_target, tiny_tokenizer, torch_draft_proposer(tiny_draft), info)


class SlowingRunner(ScriptedRunner):
    """The machine slows by half from one call on, as a VM does when its neighbours wake."""

    def __init__(self, seconds_per_token: dict[Arm, float], slow_from_call: int) -> None:
        super().__init__(seconds_per_token)
        self.slow_from_call = slow_from_call

    def __call__(self, arm, messages, params, temperature) -> ArmReply:
        slow = len(self.calls) >= self.slow_from_call
        reply = super().__call__(arm, messages, params, temperature)
        if slow:
            first = reply.first_token_seconds
            reply.wall_seconds = first + (reply.wall_seconds - first) * 1.5
        return reply


def test_a_slowdown_that_starts_mid_round_does_not_move_the_speedup():
    # Calls B S | S B | B S | S B | B S: slow from the sixth, so k = 0 has 2 slow replies of
    # 5 and the drafting arm 3. Their medians come from different regimes (2.0 / 1.5 = 1.33x);
    # paired within rounds, four of the five rounds say 2x.
    spec = Arm("spectui", "draft", 4)
    runner = SlowingRunner({BASELINE: 0.2, spec: 0.1}, slow_from_call=5)
    workload = Workload("code-go", "go-x", ({"role": "user", "content": "go"},), 0.0, 11, 3)
    result = run_case(Case(workload, 0.0), [BASELINE, spec], {"spectui": runner}, repeats=5)
    base, drafting = result.arm(BASELINE), result.arm(spec)
    assert drafting.decode_tokens_per_s / base.decode_tokens_per_s == pytest.approx(2 / 1.5)
    assert drafting.speedup == pytest.approx(2.0)
    assert result.best["draft"]["measured_speedup"] == pytest.approx(2.0)


def test_a_whole_run_on_tiny_models_fills_every_field(tiny_engine, tmp_path):
    from spectui.bench.plots import write_plots
    from spectui.bench.runners import TransformersRunner, run_engine

    workloads = [
        Workload("code-python", "py-x", ({"role": "user", "content": "def add(a, b):"},), 0.0, 12, 5),
        Workload("summarize", "sum-x", ({"role": "user", "content": "SELECT id, name FROM users WHERE age > 30"},), 0.0, 12, 6),
    ]
    anchor = TransformersRunner(tiny_engine)
    runners = {"spectui": lambda arm, *rest: run_engine(tiny_engine, arm, *rest), "transformers": anchor.run}
    arms = plan_arms(["spectui", "transformers"], ["draft", "ngram"], [0, 2, 4], anchor_k=4, auto=True)
    assert Arm("spectui", "draft", 4, auto=True) in arms and Arm("spectui", "ngram", 4, auto=True) in arms
    settings = {"methods": ["draft", "ngram"], "ks": [0, 2, 4], "anchor_k": 4, "runners": ["spectui", "transformers"]}
    result = run_bench(plan_cases(workloads, [0.0, 1.0]), arms, runners, 2, settings)

    assert len(result.cases) == 4
    for case in result.cases:
        base = case.arm(BASELINE)
        for arm_result in case.arms:
            assert len(arm_result.replies) == 2
            assert arm_result.decode_tokens_per_s > 0 and arm_result.time_to_first_token > 0
            # the ratio is the median over this very case's rounds of the two arms' replies in each
            per_round = [a.decode_tokens_per_s / b.decode_tokens_per_s for a, b in zip(arm_result.replies, base.replies)]
            assert arm_result.speedup == pytest.approx(statistics.median(per_round))
            if arm_result.arm.runner == "spectui":
                assert arm_result.replayed_speedup > 0
            if arm_result.arm.runner == "spectui" and arm_result.arm.speculative and not arm_result.arm.auto:
                if arm_result.gamma is None:  # a sampled reply that never repeated its context
                    assert arm_result.arm.method == "ngram" and case.case.temperature > 0
                    assert not arm_result.per_position and arm_result.same_tokens_as_baseline is True
                    continue
                assert 0 <= arm_result.gamma <= 1 and 1 <= arm_result.tau <= arm_result.arm.k + 1
                # a draft model always drafts k; n-gram lookup drafts what the context matches
                assert 1 <= len(arm_result.per_position) <= arm_result.arm.k
            if arm_result.arm.auto:  # it may have chosen k = 0 all along: then nothing was drafted
                assert 0 <= arm_result.mean_k <= 8
                assert arm_result.gamma is None or 1 <= arm_result.tau <= 9
            elif arm_result.arm.method == "draft":
                assert len(arm_result.per_position) == arm_result.arm.k
                assert arm_result.draft_cost > 0 and arm_result.verify_cost > 0
                assert arm_result.predicted_speedup > 0
            if case.case.temperature == 0 or (arm_result.arm.runner == "spectui" and arm_result.arm.method == "ngram"):
                # lossless at T = 0: spectui at any k, transformers plain, assisted and
                # prompt lookup all emit the target's greedy tokens; spectui's prompt lookup
                # also samples the reply its k = 0 samples
                assert arm_result.same_tokens_as_baseline is True, arm_result.arm.label
        assert "predicted_k" in case.best["draft"] and "measured_k" in case.best["ngram"]
        assert base.replayed_speedup == pytest.approx(1.0)

    encoded = json.loads(json.dumps(result.as_dict()))
    first_arm = encoded["cases"][0]["arms"][0]
    assert {"tokens_per_s", "decode_tokens_per_s", "time_to_first_token", "gamma", "tau", "per_position",
            "draft_cost", "verify_cost", "speedup", "replayed_speedup", "predicted_speedup", "runs"} <= set(first_arm)
    assert encoded["machine"]["cpus"] >= 1
    written = write_plots(result, tmp_path)
    assert len(written) == 9 and all(path.read_bytes()[:4] == b"\x89PNG" for path in written)
    assert tmp_path / "methods.png" in written  # the methods side by side

    # Read back from its JSON (split over two files), the report is the same report.
    from spectui.bench.report import markdown
    from spectui.bench.saved import load_results

    halves = [tmp_path / "a.json", tmp_path / "b.json"]
    halves[0].write_text(json.dumps({**encoded, "cases": encoded["cases"][:2]}))
    halves[1].write_text(json.dumps({**encoded, "cases": encoded["cases"][2:], "seconds": 0.0}))  # times add up
    loaded = load_results(halves)
    assert markdown(loaded, "cmd") == markdown(result, "cmd")
    assert json.loads(json.dumps(loaded.as_dict()))["cases"] == encoded["cases"]


def test_assisted_generation_drafts_exactly_k_and_restores_the_draft_settings(tiny_engine):
    from spectui.bench.runners import TransformersRunner
    from spectui.core.events import GenerationParams

    anchor = TransformersRunner(tiny_engine)
    config = anchor.draft.generation_config
    before = (config.num_assistant_tokens, config.num_assistant_tokens_schedule)
    reply = anchor.run(Arm("transformers", "assisted", 3), [{"role": "user", "content": "def add(a, b):"}],
                       GenerationParams(max_tokens=10, seed=0), 0.0)
    assert reply.num_tokens > 0 and reply.first_token_seconds is not None
    assert (config.num_assistant_tokens, config.num_assistant_tokens_schedule) == before


@pytest.mark.parametrize(
    "args, words",
    [
        (["--k", "0,99"], "from 0 to 16"),
        (["--engines", "spectui,ollama"], "--engines takes"),
        (["--suite", "huge"], "--suite must be one of"),
        (["--repeats", "0"], "--repeats must be"),
        (["--temperatures", "0,-1"], "temperature must be from 0 to 2, got -1.0"),
        (["--temperatures", "0,inf"], "temperature must be from 0 to 2, got inf"),
        (["--temperatures", "0.7,3"], "temperature must be from 0 to 2, got 3.0"),
        (["--temperatures", "0,warm"], "--temperatures takes a comma list of numbers"),
        (["--max-tokens", "-5"], "max_tokens must be > 0, got -5"),
        (["--max-tokens", "0"], "max_tokens must be > 0, got 0"),
        (["--k", "2,1.5"], "--k takes a comma list of k from 0 to 16 or auto"),
        (["--k", ","], "--k takes a comma list"),
        (["--anchor-k", "0"], "--anchor-k must be from 1 to 16"),
        (["--anchor-k", "17"], "--anchor-k must be from 1 to 16"),
        (["--repeats", "21"], "--repeats must be"),
        (["--lookup-min", "0"], "lookup_min must be >= 1, got 0"),
        (["--gpu-memory-utilization", "nan"], "gpu_memory_utilization must be in (0, 1]"),
        (["--max-model-len", "8"], "max_model_len must be >= 16, got 8"),
        (["--categories", "poetry"], "--categories takes"),
        (["--report", "no-such-run.json"], "--report no-such-run.json: No such file or directory"),
    ],
)
def test_bad_options_get_one_line_and_exit_2(args, words, monkeypatch):
    from spectui.cli.app import app

    # refused at once: nothing loads, nothing runs
    monkeypatch.setattr("spectui.cli.bench.build_runners", lambda *a, **k: pytest.fail("a model was loaded"))
    monkeypatch.setattr("spectui.cli.bench.run_bench", lambda *a, **k: pytest.fail("the bench ran"))
    result = CliRunner().invoke(app, ["bench", *args])
    assert result.exit_code == 2, result.output
    assert words in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_kv_bytes_per_token_reads_the_dtype_the_embedding_hands_on(tiny_target):
    # A model loaded from the int8 store embeds through GGUF blocks: a module without .weight.
    import torch

    from spectui.bench.drafters import kv_bytes_per_token

    class Blocks(torch.nn.Module):
        def forward(self, input_ids):
            return torch.zeros(*input_ids.shape, 8, dtype=torch.float32)

    config = tiny_target.config
    expected = 2 * config.num_hidden_layers * config.num_key_value_heads * (config.hidden_size // config.num_attention_heads) * 4
    original = tiny_target.get_input_embeddings()
    assert kv_bytes_per_token(tiny_target) == expected
    tiny_target.set_input_embeddings(Blocks())
    try:
        assert kv_bytes_per_token(tiny_target) == expected
    finally:
        tiny_target.set_input_embeddings(original)


def test_an_arm_of_another_method_is_refused_by_an_engine_that_cannot_switch():
    # Read from the engine's declared capability, not a hasattr probe that the Engine base
    # always satisfies: a server (or scripted) engine cannot draft another way over its target.
    from spectui.bench.runners import engine_for
    from spectui.core.errors import UsageError
    from spectui.engines.scripted import ScriptedEngine

    engine = ScriptedEngine()
    assert not engine.info.capabilities.method_switch
    assert engine_for(engine, Arm("spectui", "none", 0)) is engine
    assert engine_for(engine, Arm("spectui", engine.info.method, 4)) is engine
    with pytest.raises(UsageError, match="drafts by"):
        engine_for(engine, Arm("spectui", "suffix", 4))
