"""benchmarks/gpu_embedded.py --tiny (issue 50): the GPU check's every arm runs end to end on a
CPU at tiny shapes, and what it writes holds every number the GPU table needs."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SPECTUI_ARMS = ["k 0", "draft k 2", "draft k 4", "draft auto", "ngram auto", "suffix auto"]


@pytest.mark.slow  # about 25 s on a busy 2-core box: two models, eight replies, a profile each
def test_the_tiny_gpu_check_writes_every_arm_and_keeps_t0_identity(tmp_path):
    out = tmp_path / "tiny"
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu_embedded.py"), "--tiny", "--out", str(out)],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600, cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    data = json.loads(out.with_suffix(".json").read_text())
    # --tiny runs the static caches the GPU runs on; what captured is said, not what was asked for
    assert data["static"] == ["target", "draft"]
    assert data["graphs"] == data["graphs_at_end"] == "off (CUDA graphs need a CUDA device, not cpu)"
    assert list(data["arms"]) == SPECTUI_ARMS
    assert set(data["transformers"]) == {"transformers plain", "transformers assisted"}
    assert set(data["profile"]) == set(SPECTUI_ARMS) and all(p["operators"] > 0 for p in data["profile"].values())
    for name in SPECTUI_ARMS:  # fp32 on a CPU: speculation changes no token at T = 0
        arm = data["arms"][name]
        assert arm["num_tokens"] == 24 and arm["identical_to_k0"], name
    assert data["arms"]["draft k 4"]["drafted"] > 0 and data["arms"]["k 0"]["drafted"] == 0
    assert data["transformers"]["transformers plain"]["tokens"] == data["arms"]["k 0"]["tokens"]
    assert sorted(map(int, data["costs"]["v"])) == list(range(1, 17)) and data["costs"]["v"]["1"] == 1.0
    assert data["costs"]["draft_cost_c"] > 0 and data["ceiling_tok_s"] > 0 and data["first_reply"]["num_tokens"] == 24
    table = out.with_suffix(".md").read_text()
    assert all(f"| {name} |" in table for name in SPECTUI_ARMS + ["transformers plain", "transformers assisted"])
    for line in ("building the target", "first reply after load", "suffix auto:", "transformers:", "done in"):
        assert line in result.stdout, line


def gpu_embedded():
    spec = importlib.util.spec_from_file_location("gpu_embedded", ROOT / "benchmarks" / "gpu_embedded.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_benchmarks_models_hold_no_autograd():
    import torch

    bench = gpu_embedded()
    model = bench.build_model(bench.TINY["draft"], 64, torch.float32, torch.device("cpu"), 1, [0], 0)
    assert not any(parameter.requires_grad for parameter in model.parameters())


def llama3_like_tokenizer(path: Path) -> Path:
    """A tokenizer.json whose special tokens sit past the tiny vocabulary, as Llama 3's do (128,000 on)."""
    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers

    inner = Tokenizer(models.WordLevel({f"w{i}": i for i in range(1000)}, unk_token="w0"))
    inner.pre_tokenizer = pre_tokenizers.Whitespace()
    inner.add_special_tokens([AddedToken("<|begin_of_text|>", special=True), AddedToken("<|eot_id|>", special=True)])
    inner.save(str(path))
    return path


@pytest.mark.slow  # the whole tiny check once more, with a real tokenizer's shape (about 25 s)
def test_the_tiny_check_takes_a_tokenizer_wider_than_its_vocabulary(tmp_path):
    tokenizer = llama3_like_tokenizer(tmp_path / "tokenizer.json")
    out = tmp_path / "tiny"
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu_embedded.py"), "--tiny", "--tokenizer", str(tokenizer),
         "--max-tokens", "8", "--repeats", "1", "--out", str(out)],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600, cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr[-2000:]  # was an IndexError: special rows past the tiny vocabulary
    data = json.loads(out.with_suffix(".json").read_text())
    assert data["settings"]["tokenizer"] == str(tokenizer) and all(arm["identical_to_k0"] for arm in data["arms"].values())
