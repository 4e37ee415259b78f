"""Every script in benchmarks/ runs in the suite in a tiny form (issue 61): a refactor that moves
a name a script uses, or changes what it reads, fails here instead of on the next person to run
the script. Each runs as a subprocess, as its README line runs it, on SmolLM2 (the cached GGUF
and int8 folder), a tiny torch model, or the committed replay data, and must exit 0 having
written what its real run writes.

A new script gets a row in TINY, or in ELSEWHERE with the test that already runs it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"


@dataclass(frozen=True)
class Tiny:
    argv: tuple[str, ...]  # after the script; {tmp}: the test's folder, {port}: a free one, {cache}: the models
    shows: tuple[str, ...]  # in stdout + stderr
    writes: dict[str, tuple[str, ...]] = field(default_factory=dict)  # a file under {tmp} -> what it holds
    slow: bool = False  # past ~10 s on a busy 2-core box (a torch child process or a TUI)
    needs: str | None = None  # a program on PATH
    tiny_model: bool = False  # {model} is a tiny random Llama folder (conftest's tiny_folders)
    timeout: int = 600


SMOL = "smollm2-135m"
TINY: dict[str, Tiny] = {
    "adaptive_replay.py": Tiny(("replay", "--seeds", "1", "--rounds", "1", "--max-tokens", "16"),
                               ("auto / best fixed k: worst", "auto / k 0: worst")),
    "lookup_replay.py": Tiny(("replay", "--lookup-max", "4", "--slope", "0.05"),
                             ("slope 0.05, lookup_max 4:", "auto / the best fixed k:")),
    "exactness_cost.py": Tiny(("--model", SMOL, "--lengths", "16", "--rows", "1,3", "--repeats", "1", "--prefill", "32",
                               "--markdown", "{tmp}/exact.md"),
                              (), {"exact.md": ("| 16 | 3 |", "Prefill of a 32-token prompt")}),
    "identity.py": Tiny(("--model", SMOL, "--draft", SMOL, "--prompts", "1", "--tokens", "8", "--per-prompt", "2",
                         "--cross-draft", "", "--markdown", "{tmp}/identity.md"),
                        (), {"identity.md": ("replies that left the plain reply | **0** of 2",)}, slow=True),
    "llamacpp_verify_cost.py": Tiny(("--model", SMOL, "--draft", SMOL, "--quants", "Q4_K_M", "--batches", "1,2",
                                     "--repeats", "1", "--tokens", "4", "--prefill", "16", "--markdown", "{tmp}/cost.md"),
                                    (), {"cost.md": ("| Q4_K_M |", "v(2)")}, slow=True),
    "followup_ttft.py": Tiny(("--model", SMOL, "--k", "2", "--max-tokens", "4", "--markdown", "{tmp}/turns.md"),
                             (), {"turns.md": ("| 1 |", "| 2 |", "| 3 |")}, slow=True),
    "prefill.py": Tiny(("--model", SMOL, "--rounds", "1", "--threads", "1", "--markdown", "{tmp}/prefill.md"),
                       (), {"prefill.md": ("| spectui (fast prefill) |", "| llama.cpp defaults | ")}, slow=True),
    "prefill_parts.py": Tiny(("--model", SMOL, "--rounds", "1", "--threads", "1", "--markdown", "{tmp}/parts.md"),
                             (), {"parts.md": ("| prefill in the second context |", "| state in |",
                                               "| llama.cpp defaults, one decode |")}, slow=True),
    "record_check.py": Tiny(("--engines", "embedded", "-k", "2", "--max-tokens", "6", "--prompts", "1"),
                            ("all records re-derive from their steps",), slow=True),
    "int8_slices.py": Tiny(("--model", SMOL, "--tokens", "2", "--rounds", "1", "--arm", "loaded",
                            "--markdown", "{tmp}/int8.md"),
                           (), {"int8.md": ("| loaded |",)}, slow=True),
    "contended_threads.py": Tiny(("--model", SMOL, "--tokens", "2", "--rounds", "1", "--policies", "fit",
                                  "--markdown", "{tmp}/contended.md"),
                                 (), {"contended.md": ("| fit |",)}, slow=True),
    "lean_forward.py": Tiny(("--model", "{model}", "--dtype", "float32", "--rounds", "1"),
                            ("transformers           1 token", "lean                   1 token"), slow=True, tiny_model=True),
    "precision.py": Tiny(("--model", "{model}", "--phases", "fp32,int8-row", "--rounds", "1", "--out", "{tmp}/precision.md",
                          "--state", ""),
                         (), {"precision.md": ("int8-row",)}, slow=True, tiny_model=True),
    "tokenview.py": Tiny(("--tokens", "400", "--json"), ('"shown_tokens": 400', '"driver": "pty')),
    "tui_vs_generate.py": Tiny(("--model", SMOL, "--method", "ngram", "-k", "2", "--max-tokens", "6", "--rounds", "1",
                                "--engine-in", "thread", "--json"),
                               ('"identical_tokens": true',), slow=True),
    "startup.py": Tiny(("--pairs", "smollm2", "--scenarios", "warm", "--cache-dir", "{cache}", "--out", "{tmp}/startup.md"),
                       (), {"startup.md": ("smollm2",)}, slow=True),
    "gpu_vllm.py": Tiny(("--tiny", "--out", "{tmp}"), ("| check | result |", "in-process baseline | pass"), slow=True),
    # The one that is not seconds: SmolLM2's replies to the 10 quick prompts (4 tokens each, kept
    # in the cache for the next run) cost minutes on a busy 2-core box before 2 training steps.
    "heads.sh": Tiny(("tiny",), (), {"reports/bench-heads-tiny.md": ("medusa", "eagle")}, slow=True, timeout=1500),
    "cross_vocab.py": Tiny(("--targets", "qwen2.5-coder-0.5b", "--draft", SMOL, "--k", "2", "--tokens", "4",
                            "--markdown", "{tmp}/cross.md"), (), {"cross.md": ("qwen2.5-coder-0.5b", "| slem |")}, slow=True),
    "tmux_plain_server.sh": Tiny(("{port}",), (" tokens in ",), needs="tmux"),
    "advise_vs_timed.py": Tiny(("--tiny", "--markdown", "{tmp}/advise.md"), ("wrote",),
                               {"advise.md": ("| chat-code-python |", "Full run", "| ngram k auto |", "replayed vs k 0")},
                               slow=True, timeout=1500),
}
# Scripts another test already runs, and which one.
ELSEWHERE = {
    "gpu_embedded.py": "tests/test_gpu_embedded_tiny.py",
    "copy_replay.py": "tests/test_copy_replay.py",
    "advise_speed.py": "tests/test_advise_speed.py",
    "terminal.py": "the pseudo-terminal tokenview.py and tui_vs_generate.py run in (above)",
}


def test_every_script_has_a_tiny_form_or_names_its_test():
    scripts = sorted(p.name for p in BENCHMARKS.iterdir() if p.suffix in (".py", ".sh"))
    assert [name for name in scripts if name not in TINY and name not in ELSEWHERE] == []
    assert sorted(set(TINY) | set(ELSEWHERE)) == scripts  # no row for a script that is gone
    assert not set(TINY) & set(ELSEWHERE)
    assert all((ROOT / path).exists() for path in ELSEWHERE.values() if path.startswith("tests/"))


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def params():
    for name, tiny in TINY.items():
        marks = [pytest.mark.slow] if tiny.slow else []
        if tiny.needs and shutil.which(tiny.needs) is None:
            marks.append(pytest.mark.skip(reason=f"needs {tiny.needs}"))
        yield pytest.param(name, tiny, id=name, marks=marks)


@pytest.mark.parametrize(("name", "tiny"), list(params()))
def test_the_script_runs_in_its_tiny_form(name: str, tiny: Tiny, tmp_path: Path, request: pytest.FixtureRequest):
    model = request.getfixturevalue("tiny_folders")["target"] if tiny.tiny_model else ""
    from spectui.models.registry import cache_dir

    argv = [arg.format(tmp=tmp_path, model=model, port=free_port(), cache=cache_dir()) for arg in tiny.argv]
    script = BENCHMARKS / name
    command = ["bash", str(script)] if name.endswith(".sh") else [sys.executable, str(script)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "SPECTUI_HEADS_OUT": str(tmp_path)}
    result = subprocess.run(command + argv, cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                            capture_output=True, text=True, timeout=tiny.timeout)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert [line for line in tiny.shows if line not in output] == [], output[-3000:]
    for file, lines in tiny.writes.items():
        text = (tmp_path / file).read_text()
        assert [line for line in lines if line not in text] == [], text
