"""Where a draft with another tokenizer used to be refused: the torch build reads the draft's
tokenizer for TLI, vLLM (in process and `spectui serve`'s `vllm serve` line) gets
use_heterogeneous_vocab where the installed vLLM has it (one line where not), and
`spectui models list --for` shows which drafts a target can use and how."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from spectui.core.errors import UsageError
from spectui.engines.vllm.args import VllmModels, speculative_config
from spectui.models.registry import ModelPair, resolve
from spectui.settings.options import EngineOptions


def other_tokenizer(folder: Path) -> Path:
    """A byte-level BPE trained on the tiny corpus to another size: the same bytes, other ids."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from tiny_models import CORPUS

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=290, special_tokens=["<s>", "<eos>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(CORPUS, trainer)
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token="<eos>").save_pretrained(folder)
    (folder / "config.json").write_text(json.dumps({"vocab_size": 290}))
    return folder


def tiny_folder(folder: Path, tiny_tokenizer) -> Path:
    tiny_tokenizer.save_pretrained(folder)
    (folder / "config.json").write_text(json.dumps({"vocab_size": 320}))
    return folder


def test_the_torch_build_reads_a_cross_vocabulary_drafts_tokenizer(tmp_path, monkeypatch, tiny_tokenizer):
    from spectui.engines.torch_backend.build import checked_draft_vocab

    monkeypatch.setenv("SPECTUI_CACHE_DIR", str(tmp_path / "cache"))
    tiny_folder(tmp_path / "target", tiny_tokenizer)
    vocab, encode = checked_draft_vocab(resolve(str(tmp_path / "target")), resolve(str(other_tokenizer(tmp_path / "draft"))))
    assert not vocab.identical and 0.5 < vocab.draft_overlap <= 1.0
    assert encode is not None
    ids = encode("def add(a, b):")
    draft = json.loads((tmp_path / "draft" / "tokenizer.json").read_text())["model"]["vocab"]
    assert ids and max(ids) < len(draft) + 2  # the draft's own ids, no special token added
    same, none = checked_draft_vocab(resolve(str(tmp_path / "target")), resolve(str(tmp_path / "target")))
    assert same.identical and none is None


def test_vllm_gets_tli_only_for_a_draft_with_another_tokenizer():
    other = VllmModels("/models/target", "/models/draft", other_vocab=True)
    assert speculative_config(EngineOptions(method="draft", k=3), other) == {
        "method": "draft_model", "num_speculative_tokens": 3, "model": "/models/draft", "use_heterogeneous_vocab": True,
    }
    assert "use_heterogeneous_vocab" not in speculative_config(EngineOptions(method="draft", k=3), VllmModels("/t", "/d"))


def test_a_vllm_without_tli_refuses_a_cross_vocabulary_draft_in_one_line(tmp_path, monkeypatch, tiny_tokenizer):
    from spectui.engines.vllm import build

    monkeypatch.setenv("SPECTUI_CACHE_DIR", str(tmp_path / "cache"))
    tiny_folder(tmp_path / "target", tiny_tokenizer)
    models = ModelPair(resolve(str(tmp_path / "target")), resolve(str(other_tokenizer(tmp_path / "draft"))))
    monkeypatch.setattr(build, "vllm_has_heterogeneous_vocab", lambda: False)
    with pytest.raises(UsageError, match="has no use_heterogeneous_vocab; run it with --engine embedded"):
        build.vllm_draft(EngineOptions(method="draft", k=3), models, lambda *args: None)
    monkeypatch.setattr(build, "vllm_has_heterogeneous_vocab", lambda: True)
    assert build.vllm_draft(EngineOptions(method="draft", k=3), models, lambda *args: None) == models.draft
    assert not build.same_tokenizer(models.target, models.draft)
    with pytest.raises(UsageError, match="--vocab slem runs on the embedded engine"):  # vLLM has TLI, no SLEM
        build.vllm_draft(EngineOptions(method="draft", k=3, vocab="slem"), models, lambda *args: None)


@pytest.mark.vllm
def test_the_installed_vllm_is_asked_for_the_option():
    pytest.importorskip("vllm")
    from spectui.engines.vllm.build import vllm_has_heterogeneous_vocab

    from vllm.config import SpeculativeConfig

    fields = getattr(SpeculativeConfig, "__dataclass_fields__", None) or SpeculativeConfig.model_fields
    assert vllm_has_heterogeneous_vocab() == ("use_heterogeneous_vocab" in fields)


def write_tokenizer(folder: Path, vocab: dict[str, int]) -> None:
    folder.mkdir(parents=True)
    (folder / "tokenizer.json").write_text(json.dumps({"model": {"type": "BPE", "vocab": vocab}, "added_tokens": []}))


def test_models_list_for_a_target_shows_each_cached_drafts_way_of_drafting(tmp_path, monkeypatch):
    from spectui.cli.app import app

    monkeypatch.setenv("SPECTUI_CACHE_DIR", str(tmp_path))
    qwen = {"Ġa": 0, "Ġb": 1, "c": 2, "Ġdd": 3}
    write_tokenizer(tmp_path / "models" / "qwen2.5-coder-1.5b", qwen)
    write_tokenizer(tmp_path / "models" / "qwen2.5-coder-0.5b", qwen)
    write_tokenizer(tmp_path / "models" / "smollm2-135m", {"c": 0, "Ġa": 1, "Ġd": 2, "d": 3})
    result = CliRunner().invoke(app, ["models", "list", "--for", "qwen2.5-coder-1.5b", "--json"])
    assert result.exit_code == 0, result.output
    rows = {row["draft"]: row["how"] for row in json.loads(result.stdout)}
    assert rows["qwen2.5-coder-0.5b"] == "same vocabulary"
    assert rows["smollm2-135m"] == "TLI: draft vocabulary 50% shared (2 tokens)"
    assert rows["llama-3.2-1b"].startswith("not cached")
    missing = CliRunner().invoke(app, ["models", "list", "--for", "llama-3.2-1b"])
    assert missing.exit_code == 2 and "spectui models fetch llama-3.2-1b" in missing.output
    assert "Traceback" not in missing.output


def serve(*args: str):
    from spectui.cli.app import app

    return CliRunner().invoke(app, ["serve", *args])


def test_serve_passes_a_cross_vocabulary_draft_to_vllm_by_tli(tmp_path, monkeypatch, tiny_tokenizer):
    """`spectui serve` gave vLLM a draft with another tokenizer without use_heterogeneous_vocab
    (vLLM then failed on the vocabularies); --print's line has it, with a note on stderr."""
    monkeypatch.setenv("SPECTUI_CACHE_DIR", str(tmp_path / "cache"))
    target = str(tiny_folder(tmp_path / "target", tiny_tokenizer))
    draft = str(other_tokenizer(tmp_path / "draft"))
    result = serve("--model", target, "--draft", draft, "-k", "3", "--print")
    assert result.exit_code == 0, result.output
    config = json.loads(shlex.split(result.stdout.strip())[-1])
    assert config == {"method": "draft_model", "num_speculative_tokens": 3, "model": draft, "use_heterogeneous_vocab": True}
    assert "another tokenizer" in result.stderr and "TLI" in result.stderr
    same = serve("--model", target, "--draft", target, "-k", "3", "--print")
    assert same.exit_code == 0 and "use_heterogeneous_vocab" not in same.stdout and "another tokenizer" not in same.stderr
    slem = serve("--model", target, "--draft", draft, "-k", "3", "--vocab", "slem", "--print")
    assert slem.exit_code == 2 and slem.stdout == ""
    assert slem.stderr.strip().splitlines() == ["spectui: error: --vocab slem runs on the embedded engine: vLLM drafts "
                                                "across tokenizers by TLI (--vocab tli), or chat with --engine embedded"]


@pytest.mark.parametrize("has_tli", [True, False])
def test_serve_asks_the_installed_vllm_for_tli_and_refuses_in_one_line_where_it_lacks_it(tmp_path, monkeypatch, tiny_tokenizer, has_tli):
    from spectui.engines.vllm import build, serve_plan
    from spectui.engines.vllm.server_process import Launcher

    monkeypatch.setenv("SPECTUI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(serve_plan, "find_launcher", lambda: Launcher("cli"))
    monkeypatch.setattr(serve_plan, "check_port_free", lambda host, port: None)
    monkeypatch.setattr(build, "vllm_has_heterogeneous_vocab", lambda: has_tli)
    models = ModelPair(resolve(str(tiny_folder(tmp_path / "target", tiny_tokenizer))), resolve(str(other_tokenizer(tmp_path / "draft"))))
    notes = []
    options = EngineOptions(engine="vllm", method="draft", k=2)
    if not has_tli:
        with pytest.raises(UsageError, match=r"the installed vLLM \(.*\) has no use_heterogeneous_vocab; chat with --engine embedded"):
            serve_plan.plan_serve(options, models, "127.0.0.1", 8000, print_only=False, note=notes.append)
        return
    plan, launch = serve_plan.plan_serve(options, models, "127.0.0.1", 8000, print_only=False, note=notes.append)
    assert launch is not None and json.loads(plan.argv[plan.argv.index("--speculative-config") + 1])["use_heterogeneous_vocab"] is True
    assert len(notes) == 1 and "vLLM drafts by TLI" in notes[0]
