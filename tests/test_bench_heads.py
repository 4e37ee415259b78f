"""Trained heads in `spectui bench`: beside the other drafters on one loaded target, with
what each drafter costs in memory, on tiny models (nothing here is timed)."""

from __future__ import annotations

import pytest
import torch
from typer.testing import CliRunner

from spectui.bench.measure import BASELINE
from spectui.bench.plan import BenchOptions, plan_arms, plan_cases, run_bench
from spectui.bench.runs import Arm
from spectui.bench.workloads import Workload

METHODS = ["ngram", "medusa", "eagle"]


@pytest.fixture
def heads_setup(tmp_path, tiny_target, tiny_tokenizer):
    from spectui.heads.store import fingerprint, save_heads
    from spectui.heads.train import new_heads

    target = tmp_path / "target"
    tiny_target.save_pretrained(target)
    tiny_tokenizer.save_pretrained(target)
    folders = []
    for kind in ("medusa", "eagle"):
        torch.manual_seed(0)
        heads = new_heads(kind, tiny_target.config.hidden_size, 3)
        record = {"steps": 7, "seconds": 1.5, "tokens": 100, "suite": "train"}
        folders.append(save_heads(tmp_path / kind, kind, heads, fingerprint(tiny_target, str(target)), record))
    return str(target), folders


def test_bench_runs_heads_beside_ngram_and_says_what_each_drafter_costs(heads_setup, tmp_path):
    from spectui.bench.drafters import heads_by_method
    from spectui.bench.report import markdown
    from spectui.cli.bench import build_runners
    from spectui.models.registry import resolve_pair
    from spectui.settings.options import EngineOptions

    target, folders = heads_setup
    options = EngineOptions(model=target, method="ngram", dtype="float32", device="cpu")
    heads = heads_by_method(folders, METHODS)
    bench = BenchOptions("quick", ["spectui"], METHODS, [0, 2], False, 2, 1, heads=heads)
    runners, engines, drafters = build_runners(options, resolve_pair(target, None), bench, None)
    engine = engines[0]
    assert engine.with_method("medusa").info.draft == str(folders[0])
    assert engine.with_method("eagle").proposer.method == "eagle"
    assert drafters["ngram"]["resident_bytes"] == 0
    for method, folder in zip(("medusa", "eagle"), folders):
        cost = drafters[method]
        assert cost["name"] == str(folder) and cost["training"]["steps"] == 7
        assert cost["file_bytes"] > (folder / "heads.safetensors").stat().st_size
        assert isinstance(cost["resident_bytes"], int)
    hidden = 64  # tiny_models' hidden size
    assert drafters["medusa"]["weights_bytes"] == 3 * (hidden * hidden + hidden) * 4  # 3 residual blocks, float32

    workload = Workload("code-python", "py-x", ({"role": "user", "content": "def add(a, b):"},), 0.0, 10, 5)
    arms = plan_arms(["spectui"], METHODS, [0, 2], anchor_k=2)
    assert {Arm("spectui", "medusa", 2), Arm("spectui", "eagle", 2)} <= set(arms)
    settings = {"methods": METHODS, "ks": [0, 2], "anchor_k": 2, "runners": ["spectui"], "drafters": drafters}
    result = run_bench(plan_cases([workload], None), arms, runners, 1, settings)
    (case,) = result.cases
    for arm_result in case.arms:
        assert arm_result.same_tokens_as_baseline is True, arm_result.arm.label  # lossless at T = 0
    for method in ("medusa", "eagle"):
        drafted = case.arm(Arm("spectui", method, 2))
        assert drafted.gamma is not None and 1 <= drafted.tau <= 3  # the heads drafted, and were verified
    assert case.arm(BASELINE) is not None

    text = markdown(result, "cmd")
    assert "## What each drafter costs" in text
    assert f"| medusa | {folders[0]} |" in text and "7 steps, 0.0 min, 100 tokens (train prompts)" in text
    assert "HF medusa" not in text  # transformers has no medusa anchor: no such column
    from spectui.bench.plots import method_bars

    assert set(method_bars(result)["code-python"]) == set(METHODS)


@pytest.mark.parametrize(
    "args, words",
    [
        (["--methods", "ngram,medusa"], "--methods medusa needs --heads DIR with medusa heads"),
        (["--methods", "ngram", "--heads", "/no/such/heads"], "/no/such/heads holds no trained heads"),
    ],
)
def test_heads_options_get_one_line_and_exit_2(args, words):
    from spectui.cli.app import app

    result = CliRunner().invoke(app, ["bench", *args])
    assert result.exit_code in (1, 2), result.output
    assert words in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_weights_are_counted_once_each_and_int8_at_its_packed_size():
    from spectui.bench.drafters import weights_bytes

    linear = torch.nn.Linear(64, 64)
    assert weights_bytes(linear) == (64 * 64 + 64) * 4
    tied = torch.nn.Sequential(linear, torch.nn.Linear(64, 64))
    tied[1].weight = linear.weight
    assert weights_bytes(tied) == (64 * 64 + 64) * 4 + 64 * 4  # the shared weight once, and the second bias
    packed = torch.ao.quantization.quantize_dynamic(torch.nn.Sequential(torch.nn.Linear(64, 64)), {torch.nn.Linear}, torch.qint8)
    assert 64 * 64 <= weights_bytes(packed) < (64 * 64 + 64) * 4 / 2


def test_spectui_int8_and_block_embeddings_count_at_their_size():
    # Neither is in a state dict: fbgemm holds the packed int8, the blocks are a mapped file.
    import numpy as np

    from spectui.bench.drafters import weights_bytes
    from spectui.models.embedding import BlockEmbedding
    from spectui.models.quantize import Int8Linear, quantize_int8

    model = quantize_int8(torch.nn.Sequential(torch.nn.Linear(64, 48), torch.nn.Linear(48, 32, bias=False)))
    assert all(isinstance(layer, Int8Linear) for layer in model)
    scales_and_bias = (48 + 48 + 32) * 4
    assert weights_bytes(model) == 64 * 48 + 48 * 32 + scales_and_bias
    blocks = np.zeros((100, 34), dtype=np.uint8)  # Q8_0: 34 bytes per 32 values
    assert weights_bytes(BlockEmbedding(blocks, 8, 32)) == 100 * 34


def test_the_cost_table_signs_a_shrinking_rss_and_shortens_the_home_folder():
    # Loading heads into pages the process had freed can shrink its RSS: the table shows the
    # sign rather than a raw byte count, and a heads folder under ~ is written that way.
    from pathlib import Path

    from spectui.bench.plan import BenchResult
    from spectui.bench.report import drafter_rows

    folder = str(Path.home() / ".cache" / "spectui" / "heads" / "m-eagle")
    result = BenchResult({"methods": ["eagle"], "drafters": {"eagle": {
        "name": folder, "weights_bytes": 3 << 20, "resident_bytes": -(1 << 20)}}})
    (row,) = drafter_rows(result)
    assert row[1] == "~/.cache/spectui/heads/m-eagle"
    assert row[2:4] == ["3.0 MiB", "−1.0 MiB"]
