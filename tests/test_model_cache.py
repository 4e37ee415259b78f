"""The model cache: a conversion keeps the int8 weights the engine runs, with checksums; every
load checks them; a damaged, partial or old cache is rebuilt with one line, never loaded;
`spectui models rm` frees one model. Offline, on a tiny GGUF made here."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from spectui.core.errors import ModelError  # noqa: E402
from spectui.models import cache as cache_module  # noqa: E402
from spectui.models import integrity  # noqa: E402
from spectui.models import load as load_module  # noqa: E402
from spectui.models.fetch import is_note  # noqa: E402
from spectui.models.registry import MARKER_FILE, read_marker, resolve  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

PROMPT = "def add(a, b):\n    return a + b"


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECTUI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(cache_module, "_checked", {})


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory) -> Path:
    from tiny_gguf import write_tiny_gguf

    return write_tiny_gguf(tmp_path_factory.mktemp("gguf") / "tiny.gguf")


@pytest.fixture(scope="module")
def reference_logits(tiny_gguf):
    """Logits of today's way: transformers loads the GGUF in float32, then spectui quantises."""
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    from spectui.models.quantize import quantize_int8, use_batch_invariant_attention

    model = AutoModelForCausalLM.from_pretrained(str(tiny_gguf.parent), gguf_file=tiny_gguf.name,
                                                 dtype=torch.float32, quantization_config=GgufConfig(dequantize=True))
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_gguf.parent), gguf_file=tiny_gguf.name)
    ids = tokenizer(PROMPT, return_tensors="pt").input_ids
    exact = use_batch_invariant_attention(quantize_int8(model.eval()))
    with torch.no_grad():
        return ids, exact(ids).logits


def logits_of(model, ids):
    with torch.no_grad():
        return model(ids).logits


def test_a_stored_model_gives_the_logits_of_a_fresh_conversion_bit_for_bit(tiny_gguf, reference_logits):
    ids, expected = reference_logits
    model, tokenizer = load_module.load_model(resolve(str(tiny_gguf)), "int8")
    assert tokenizer(PROMPT, return_tensors="pt").input_ids.tolist() == ids.tolist()
    assert torch.equal(logits_of(model, ids), expected)
    again, _ = load_module.load_model(resolve(str(tiny_gguf)), "int8")  # the warm start: read back, not converted
    assert torch.equal(logits_of(again, ids), expected)


def test_a_stored_draft_runs_as_a_float_loaded_draft_activations_per_tensor(tiny_gguf, reference_logits):
    # A draft ("int8-dynamic") quantises activations per tensor: one product call per layer
    # instead of the target's exact per-row path (its rounding changes acceptance, not output).
    from transformers import AutoModelForCausalLM, GgufConfig

    from spectui.models.quantize import Int8Linear, quantize_int8

    ids, _ = reference_logits
    model = AutoModelForCausalLM.from_pretrained(str(tiny_gguf.parent), gguf_file=tiny_gguf.name,
                                                 dtype=torch.float32, quantization_config=GgufConfig(dequantize=True))
    expected = logits_of(quantize_int8(model.eval(), per_row=False), ids)
    draft, _ = load_module.load_model(resolve(str(tiny_gguf)), "int8-dynamic")
    assert all(not layer.per_row for layer in draft.modules() if isinstance(layer, Int8Linear))
    assert torch.equal(logits_of(draft, ids), expected)


def test_the_cache_holds_int8_weights_a_tokenizer_and_their_checksums(tiny_gguf):
    folder = load_module.model_folder(resolve(str(tiny_gguf)))
    marker = read_marker(folder)
    assert marker["format"] == 2 and marker["weights"] == "int8"
    files = {path.name for path in folder.iterdir()} - {MARKER_FILE}
    assert files == set(marker["files"]) and {"int8.safetensors", "tokenizer.json", "config.json"} <= files
    assert not list(folder.glob("model*.safetensors")), "no float32 copy unless one is asked for"
    from spectui.models.tensorfile import TensorFile

    stored = TensorFile(folder / "int8.safetensors")
    kinds = {stored.header[name]["dtype"] for name in stored.names() if name.endswith("proj.weight")}
    assert kinds == {"I8"}
    assert stored.header["model.embed_tokens.weight_blocks"]["dtype"] == "U8"  # the GGUF's own blocks


def _rebuild_notes(tiny_gguf) -> list[str]:
    seen = []
    load_module.model_folder(resolve(str(tiny_gguf)), lambda stage, done, total: seen.append(stage))
    return [stage for stage in seen if is_note(stage)]


@pytest.mark.parametrize("damage", ["overwrite", "truncate", "tokenizer", "unfinished"])
def test_a_damaged_or_partial_cache_is_rebuilt_with_one_line_never_loaded(tiny_gguf, reference_logits, damage):
    folder = load_module.model_folder(resolve(str(tiny_gguf)))
    weights = folder / "int8.safetensors"
    size = weights.stat().st_size
    if damage == "overwrite":
        with open(weights, "r+b") as handle:
            handle.seek(size // 2)
            handle.write(os.urandom(4096))
    elif damage == "truncate":
        os.truncate(weights, size - 1000)
    elif damage == "tokenizer":
        (folder / "tokenizer.json").write_text("{}")
    else:  # a conversion cut short before spectui.json was written
        (folder / MARKER_FILE).unlink()
    cache_module._checked.clear()  # a new process

    notes = _rebuild_notes(tiny_gguf)
    assert len(notes) == 1 and notes[0].endswith("rebuilding it"), notes
    assert ("incomplete" if damage == "unfinished" else "is damaged") in notes[0]
    marker = read_marker(folder)
    assert integrity.full_problem(folder, marker["files"]) is None
    ids, expected = reference_logits
    model, _ = load_module.load_model(resolve(str(tiny_gguf)), "int8")
    assert torch.equal(logits_of(model, ids), expected)
    assert _rebuild_notes(tiny_gguf) == []


def test_a_cache_written_by_an_older_spectui_is_rebuilt_not_used(tiny_gguf, reference_logits, tiny_tokenizer):
    from tiny_models import make_tiny_model

    folder = load_module.model_folder(resolve(str(tiny_gguf)))
    shutil.rmtree(folder)
    # Yesterday's format: a float32 model.safetensors (here of other weights) and a marker
    # without "format". Used as it is, it would answer with the wrong weights.
    make_tiny_model(len(tiny_tokenizer), seed=9).save_pretrained(folder)
    tiny_tokenizer.save_pretrained(folder)
    (folder / MARKER_FILE).write_text(json.dumps({"source_file": tiny_gguf.name, "storage_dtype": "float32"}))

    seen = []
    model, _ = load_module.load_model(resolve(str(tiny_gguf)), "int8", progress=lambda stage, *_: seen.append(stage))
    notes = [stage for stage in seen if is_note(stage)]
    assert len(notes) == 1 and "older spectui (float32 weights)" in notes[0]
    assert any(stage.endswith(" convert") for stage in seen), "the rebuild shows its progress"
    assert read_marker(folder)["format"] == 2 and not (folder / "model.safetensors").exists()
    ids, expected = reference_logits
    assert torch.equal(logits_of(model, ids), expected)


def test_float32_is_converted_on_demand_beside_the_int8_weights(tiny_gguf):
    import numpy as np
    from transformers import AutoModelForCausalLM

    seen = []
    folder = load_module.ensure_local(resolve(str(tiny_gguf)), lambda stage, *_: seen.append(stage))
    assert folder.name == "float32" and folder.parent == load_module.model_folder(resolve(str(tiny_gguf)))
    assert any("float32 convert" in stage for stage in seen), "the bar says a float32 copy is being made"
    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32)
    reference = AutoModelForCausalLM.from_pretrained(str(tiny_gguf.parent), gguf_file=tiny_gguf.name,
                                                     dtype=torch.float32)
    converted = model.state_dict()
    for name, expected in reference.state_dict().items():
        assert np.array_equal(converted[name].numpy(), expected.numpy()), name
    assert cache_module.verify_folder(folder.parent) is None


def test_rm_frees_only_that_model(tiny_gguf, tmp_path):
    other = tmp_path / "other.gguf"
    shutil.copy(tiny_gguf, other)
    kept = load_module.model_folder(resolve(str(other)))
    removed = load_module.model_folder(resolve(str(tiny_gguf)))
    gguf_copy = removed.parent.parent / "gguf" / removed.name
    gguf_copy.mkdir(parents=True)
    (gguf_copy / "x.gguf").write_bytes(b"GGUF")
    size = cache_module.tree_size(removed) + 4

    assert cache_module.remove_model(removed.name) == size
    assert not removed.exists() and not gguf_copy.exists()
    assert kept.exists() and integrity.full_problem(kept, read_marker(kept)["files"]) is None
    with pytest.raises(ModelError, match="not in the cache"):
        cache_module.remove_model(removed.name)
    with pytest.raises(ModelError, match="Hugging Face cache"):
        cache_module.remove_model("qwen2.5-7b")


def test_verify_hashes_every_byte_where_the_load_check_samples(tmp_path):
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(integrity.SMALL_FILE_BYTES + 3 * 1024 * 1024))
    records = integrity.record(tmp_path, ["big.bin"])
    assert "sampled_sha256" in records["big.bin"]
    with open(big, "r+b") as handle:  # one byte between two samples
        handle.seek(integrity.SAMPLE_STRIDE * 10 + integrity.SAMPLE_BYTES + 100)
        handle.write(b"\x00" if handle.read(1) != b"\x00" else b"\x01")
    assert "does not match" in integrity.quick_problem(tmp_path, records)  # written: its stamp changed
    records["big.bin"]["stamp"] = integrity.stamp_of(big)  # a flip the filesystem never saw (the disk's own)
    assert integrity.quick_problem(tmp_path, records) is None
    assert "does not match" in integrity.full_problem(tmp_path, records)


@pytest.mark.parametrize("offset", [0, 5_000, 1_000_000, 20_000_000])
def test_the_load_check_catches_256_KiB_overwritten_anywhere(tmp_path, offset):
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(integrity.SMALL_FILE_BYTES + 1024 * 1024))
    records = integrity.record(tmp_path, ["big.bin"])
    with open(big, "r+b") as handle:
        handle.seek(offset)
        handle.write(os.urandom(256 * 1024))
    assert "does not match" in integrity.quick_problem(tmp_path, records)


def test_an_older_spectui_does_not_take_this_format_for_its_own(tiny_gguf):
    # spectui before the int8 store loaded a folder whose spectui.json named the pinned hash
    # under "source_sha256" with from_pretrained (model.safetensors): it must see no such hash
    # here, and convert again rather than fail to load.
    marker = read_marker(load_module.model_folder(resolve(str(tiny_gguf))))
    assert "source_sha256" not in marker and "gguf_sha256" in marker
