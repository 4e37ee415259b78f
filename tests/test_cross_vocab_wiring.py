"""Where a draft with another tokenizer used to be refused: the torch build reads the draft's
tokenizer for TLI, vLLM gets use_heterogeneous_vocab where the installed vLLM has it (one line
where not), and `spectui models list --for` shows which drafts a target can use and how."""

from __future__ import annotations

import json
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
