"""benchmarks/gpu_embedded.py --tiny (issue 50): the GPU check's every arm runs end to end on a
CPU at tiny shapes, and what it writes holds every number the GPU table needs."""

from __future__ import annotations

import json
import os
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
        # The static caches the GPU runs on (graphs off on a CPU): the path under test.
        env={**os.environ, "SPECTUI_STATIC_KV": "1"},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    data = json.loads(out.with_suffix(".json").read_text())
    assert data["static"] == ["target", "draft"]
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
