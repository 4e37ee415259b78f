"""The embedded engine on ggml (llama.cpp's kernels): lossless at T = 0 on real weights, the
target's distribution at T > 0, the backend choice and its fallback, the tokenizer without
transformers, and the glibc shim's checks."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy
import pytest

from spectui.core.events import Control, Done, GenerationParams, Step
from spectui.models.registry import resolve, resolve_pair
from spectui.settings.options import EngineOptions
from test_heads import chi2_critical_0_001

pytest.importorskip("llama_cpp_py_sync")

MESSAGES = [{"role": "user", "content": "List the numbers one to twelve in words, one per line, then again in reverse."}]
SECOND_TURN = [{"role": "user", "content": "Now the same for thirteen to twenty."}]


def reply_tokens(engine, messages, control, max_tokens=48):
    events = list(engine.stream(messages, GenerationParams(max_tokens=max_tokens, top_p=1.0, seed=0), control))
    assert isinstance(events[-1], Done) and events[-1].finish_reason in ("stop", "length"), events[-1]
    steps = [event for event in events if isinstance(event, Step)]
    return [t for step in steps for t in step.token_ids], steps


# ---------------------------------------------------------------- T = 0 on real weights


@pytest.mark.real_weights
@pytest.mark.parametrize("method", ["draft", "ngram", "suffix"])
def test_every_k_writes_the_engines_own_plain_greedy_reply(smollm2_ggml, method):
    plain_engine = smollm2_ggml.with_method("ngram")
    plain_engine.forget_prompts()
    plain, _ = reply_tokens(plain_engine, MESSAGES, Control(0, 0.0))
    drafting = smollm2_ggml.with_method(method)
    accepted = 0
    for control in (Control(1, 0.0), Control(4, 0.0), Control(8, 0.0), Control(4, 0.0, auto=True)):
        drafting.forget_prompts()
        tokens, steps = reply_tokens(drafting, MESSAGES, control)
        assert tokens == plain, (method, control.k, control.auto)
        assert all(step.exact for step in steps)
        accepted += sum(step.num_accepted for step in steps)
    assert accepted > 0


@pytest.mark.real_weights
def test_a_second_turn_is_lossless_after_drafts_accepted_past_the_stop_token(smollm2_ggml):
    """The next prompt prefills the reply's last token in a batch; a cache that kept it from a
    verify (rounded one way) would give the second reply other logits than plain decoding."""
    plains, drafted = [], []
    for engine, control, out in ((smollm2_ggml.with_method("ngram"), Control(0, 0.0), plains),
                                 (smollm2_ggml.with_method("ngram"), Control(8, 0.0), drafted)):
        engine.forget_prompts()
        first, _ = reply_tokens(engine, MESSAGES, control, max_tokens=96)
        history = MESSAGES + [{"role": "assistant", "content": engine.tokenizer.decode(first, skip_special_tokens=True)}]
        second, _ = reply_tokens(engine, history + SECOND_TURN, control, max_tokens=48)
        out += [first, second]
    assert drafted == plains


@pytest.mark.real_weights
@pytest.mark.slow
def test_the_default_pair_drafts_losslessly_on_ggml():
    from spectui.engines.ggml.build import build_ggml_engine

    engine = build_ggml_engine(EngineOptions(method="draft"), resolve_pair(None, None))
    try:
        assert engine.info.backend.startswith("ggml ") and engine.target.exact_rows >= 1
        plain, _ = reply_tokens(engine, MESSAGES, Control(0, 0.0), max_tokens=40)
        drafts = {}
        for auto in (False, True):
            engine.forget_prompts()
            tokens, steps = reply_tokens(engine, MESSAGES, Control(4, 0.0, auto=auto), max_tokens=40)
            assert tokens == plain, auto
            drafts[auto] = (sum(step.num_drafted for step in steps), sum(step.num_accepted for step in steps))
        assert drafts[False][1] > 0  # k 4's drafts were accepted: the identity held over drafted tokens
        # auto drafts at least to measure; on 2 cores, where the 0.5B does not pay, it may then step aside
        assert drafts[True][0] > 0
    finally:
        engine.close()



def resident_bytes_of(path: Path) -> int:
    """This process's resident bytes in its mappings of `path` (/proc/self/smaps)."""
    resident, inside = 0, False
    target = str(path.resolve())
    with open("/proc/self/smaps", encoding="utf-8", errors="replace") as smaps:
        for line in smaps:
            fields = line.split()
            if "-" in fields[0] and len(fields) >= 5 and not fields[0].endswith(":"):  # a mapping's header
                inside = len(fields) == 6 and fields[5] == target
            elif inside and fields[0] == "Rss:":
                resident += int(fields[1]) * 1024
    return resident


@pytest.mark.real_weights
@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="reads Linux's /proc/self/smaps")
def test_weights_repacked_at_load_are_not_resident_twice():
    from spectui.engines.ggml.lib import LlamaModel
    from spectui.models.gguf_local import local_gguf
    from spectui.models.registry import DEFAULT_TARGET

    path = local_gguf(resolve(DEFAULT_TARGET))
    model = LlamaModel(path, context=256)
    try:
        assert model.weight_type == "Q4_K_M"  # repacked for AVX2's kernels at load
        model.decode(list(range(100, 140)), 1)
        for token in range(200, 208):
            model.decode([token], 1)
        # Only the tensors read from the mapping (embeddings, norms) stay resident there.
        assert resident_bytes_of(path) < 0.5 * path.stat().st_size
    finally:
        model.close()


# ---------------------------------------------------------------- verify width


class FakeModel:
    """decode/keep as LlamaModel has them; rows are one-hot on the context's length."""

    def __init__(self) -> None:
        self.cache: list[int] = []
        self.calls: list[int] = []

    def keep(self, positions):
        del self.cache[positions:]

    def clear(self):
        self.cache = []

    def decode(self, tokens, rows):
        self.calls.append(len(tokens))
        self.cache += list(tokens)
        out = numpy.zeros((rows, 64), dtype=numpy.float32)
        for row in range(rows):
            out[row, len(self.cache) - rows + row] = 1.0
        return out


def test_a_verify_runs_in_pieces_no_wider_than_the_kernels_keep_exact():
    from spectui.engines.ggml.cached import LlamaCached

    model = FakeModel()
    cached = LlamaCached(model, rows=3)
    cached.logits(list(range(20)), 1)  # a prompt: one batch, however long, then its last token alone
    assert model.calls == [19, 1]
    cached.logits(list(range(20)), 1)  # the same prompt, cached: its last token alone again (issue 58)
    assert model.calls[2:] == [1]
    rows = cached.logits(list(range(27)), 8)  # last token and 6 drafts... plus one: 7 new tokens, 8 rows
    assert model.calls[3:] == [3, 3, 2] and rows.shape == (8, 64)
    assert [int(row.argmax()) for row in rows] == list(range(19, 27))
    cached.forget_after(22)
    assert model.cache == list(range(22)) and cached.seen == list(range(22))


@pytest.mark.parametrize("drafted, runs, verdict", [
    ([9, 10, 99, 12, 13, 14, 15, 16], [3], (2, 11, "recovered")),  # rejected in the first piece: one piece runs
    ([9, 10, 11, 12, 99, 14, 15, 16], [3, 3], (4, 13, "recovered")),
    ([9, 10, 11, 12, 13, 14, 15, 16], [3, 3, 3], (8, 17, "bonus")),  # all kept: every piece, then the bonus row
])
def test_a_greedy_verify_wider_than_exact_stops_at_the_piece_of_its_first_rejection(drafted, runs, verdict):
    """The fake predicts each position's own index, so a draft is kept while it counts on from
    the prompt's last position; the verdict is the one the whole verify gives."""
    from spectui.core.events import GenerationParams
    from spectui.engines.ggml.cached import LlamaCached
    from spectui.engines.speculative.loop import Draft, start_reply, verify_chain
    from spectui.engines.speculative.verify import verify_greedy

    model = FakeModel()
    cached = LlamaCached(model, rows=3)
    cached.logits(list(range(10)), 1)  # the prompt, cached
    reply = start_reply(list(range(10)), GenerationParams(max_tokens=64), "cpu", "numpy")
    checked = verify_chain(cached, reply, Draft(k=8, temperature=0.0, drafted=drafted))
    assert model.calls[2:] == runs  # after the prompt's batch and its last token
    assert (checked.verdict.num_accepted, checked.verdict.next_token, checked.verdict.next_source.value) == verdict
    whole = LlamaCached(FakeModel()).logits(list(range(10)) + drafted, len(drafted) + 1)
    assert checked.verdict == verify_greedy(drafted, whole)
    assert len(checked.margins) == checked.verdict.num_accepted + 1
    assert checked.verified == (3 * len(runs) - 1 if len(runs) < 3 else None)  # the drafts with rows: adaptive k's cost


def test_the_probe_finds_the_widest_batch_whose_rows_equal_one_at_a_time():
    from spectui.engines.ggml.lib import invariant_rows

    class RoundsPastFour(FakeModel):
        vocab_size = 64

        def decode(self, tokens, rows):
            out = super().decode(tokens, rows)
            return out + (1e-6 if len(tokens) > 4 else 0.0)

    assert invariant_rows(RoundsPastFour()).rows == 4


# ---------------------------------------------------------------- T > 0: the target's distribution


@pytest.fixture(scope="module")
def tiny_pair(tmp_path_factory):
    from tiny_gguf import write_tiny_gguf

    folder = tmp_path_factory.mktemp("gguf")
    return write_tiny_gguf(folder / "target.gguf", seed=0), write_tiny_gguf(folder / "draft.gguf", seed=1)


def second_token_distribution(gguf: Path, prompt: list[int], temperature: float) -> numpy.ndarray:
    """The target's exact marginal of its second sampled token, through llama.cpp's logits."""
    from spectui.engines.ggml.lib import LlamaModel

    model = LlamaModel(gguf, context=256, threads=1)
    try:
        def probs(ids):
            model.clear()
            logits = model.decode(ids, 1)[0].astype(numpy.float64) / temperature
            e = numpy.exp(logits - logits.max())
            return e / e.sum()

        first = probs(prompt)
        return sum(first[a] * probs(prompt + [a]) for a in range(len(first)) if first[a] > 1e-12)
    finally:
        model.close()


def chi_square_binned(counts: numpy.ndarray, expected: numpy.ndarray, draws: int) -> tuple[float, int]:
    """Bins of expected count >= 5 (the rarest tokens pooled), then Pearson's statistic."""
    order = numpy.argsort(-expected)
    bins, pooled_e, pooled_o = [], 0.0, 0.0
    for token in order:
        e, o = expected[token] * draws, counts[token]
        if e >= 5:
            bins.append((o, e))
        else:
            pooled_e, pooled_o = pooled_e + e, pooled_o + o
    bins.append((pooled_o, pooled_e))
    statistic = sum((o - e) ** 2 / e for o, e in bins if e > 0)
    return statistic, len(bins) - 1


def sampled_second_tokens(tiny_pair, tiny_tokenizer, replies: int, temperature: float) -> numpy.ndarray:
    from spectui.engines.ggml.load import load_ggml_engine

    target, draft = tiny_pair
    engine = load_ggml_engine(target, tiny_tokenizer, "draft", draft_gguf=draft, threads=1)
    engine.stop_ids = set()
    counts = numpy.zeros(engine.target.model.vocab_size)
    try:
        for seed in range(replies):
            events = list(engine.stream_ids(PROMPT, GenerationParams(max_tokens=4, top_p=1.0, seed=seed),
                                            Control(3, temperature)))
            tokens = [t for event in events if isinstance(event, Step) for t in event.token_ids]
            counts[tokens[1]] += 1
    finally:
        engine.close()
    return counts


PROMPT = [5, 17, 42, 9, 30]
TEMPERATURE = 1.0
REPLIES = 1500


@pytest.mark.slow
def test_sampled_replies_on_ggml_follow_the_targets_distribution(tiny_pair, tiny_tokenizer):
    expected = second_token_distribution(tiny_pair[0], PROMPT, TEMPERATURE)
    counts = sampled_second_tokens(tiny_pair, tiny_tokenizer, REPLIES, TEMPERATURE)
    statistic, df = chi_square_binned(counts, expected, REPLIES)
    assert df >= 3 and statistic < chi2_critical_0_001(df), (statistic, df)


@pytest.mark.slow
def test_the_statistic_rejects_a_rule_that_keeps_every_draft(tiny_pair, tiny_tokenizer, monkeypatch):
    from spectui.engines.speculative import loop
    from spectui.engines.speculative.verify import Verdict

    def keep_every_draft(drafted, p_target, p_draft, generator):
        return Verdict(len(drafted), int(drafted[-1]), loop.Source.BONUS)

    monkeypatch.setattr(loop, "verify_sampled", keep_every_draft)
    expected = second_token_distribution(tiny_pair[0], PROMPT, TEMPERATURE)
    counts = sampled_second_tokens(tiny_pair, tiny_tokenizer, 400, TEMPERATURE)
    statistic, df = chi_square_binned(counts, expected, 400)
    assert statistic > chi2_critical_0_001(df)


# ---------------------------------------------------------------- choosing the backend


def test_auto_picks_ggml_on_a_cpu_for_a_model_with_a_gguf(monkeypatch):
    from spectui.engines.ggml import build
    from spectui.engines.vllm import build as vllm_build

    monkeypatch.setattr(vllm_build, "cuda_present", lambda: False)
    smollm2 = resolve_pair("smollm2-135m", None)
    assert build.chosen_backend(EngineOptions(model="smollm2-135m", method="ngram"), smollm2).name == "ggml"
    assert build.chosen_backend(EngineOptions(model="smollm2-135m", method="ngram", backend="torch"), smollm2).name == "torch"
    for options, why in (
        (EngineOptions(model="smollm2-135m", method="ngram", dtype="float32"), "--dtype float32 runs on torch"),
        (EngineOptions(model="smollm2-135m", method="ngram", dtype="int8"), "--dtype int8 runs on torch"),
        (EngineOptions(model="smollm2-135m", method="medusa"), "medusa heads run on torch"),
        (EngineOptions(model="qwen2.5-1.5b", method="ngram"), "qwen2.5-1.5b has no GGUF"),
        (EngineOptions(model="smollm2-135m", method="ngram", device="cuda"), "--device cuda runs on torch"),
    ):
        assert build.chosen_backend(options, resolve_pair(options.model, None)) == build.BackendChoice("torch", why)


def test_ggml_asked_for_where_it_cannot_run_is_one_line():
    from spectui.core.errors import UsageError
    from spectui.engines.ggml.build import chosen_backend

    with pytest.raises(UsageError, match=r"^--backend ggml: --dtype float32 runs on torch$"):
        chosen_backend(EngineOptions(model="smollm2-135m", method="ngram", dtype="float32", backend="ggml"),
                       resolve_pair("smollm2-135m", None))


def test_a_library_that_cannot_load_falls_back_to_torch_with_the_reason(monkeypatch):
    from spectui.engines.ggml import lib
    from spectui.engines.vllm import build as vllm_build

    def broken():
        raise OSError("libggml-cpu.so.0: cannot open shared object file")

    monkeypatch.setattr(vllm_build, "cuda_present", lambda: False)
    monkeypatch.setattr(lib, "library", broken)
    from spectui.engines.ggml.build import chosen_backend

    backend = chosen_backend(EngineOptions(model="smollm2-135m", method="ngram"), resolve_pair("smollm2-135m", None))
    assert backend.name == "torch"
    assert backend.why == "libllama could not load: OSError: libggml-cpu.so.0: cannot open shared object file"


@pytest.mark.real_weights
def test_the_fallback_engine_runs_on_torch_and_says_why(monkeypatch):
    from spectui.engines import factory
    from spectui.engines.ggml import lib
    from spectui.engines.vllm import build as vllm_build

    monkeypatch.setattr(vllm_build, "cuda_present", lambda: False)
    monkeypatch.setattr(lib, "library", lambda: (_ for _ in ()).throw(ImportError("no module named _cffi_backend")))
    engine = factory.build_engine(EngineOptions(model="smollm2-135m", method="ngram"), resolve_pair("smollm2-135m", None))
    try:
        assert type(engine).__name__ == "SpeculativeEngine" and engine.backend.name == "torch"
        assert engine.info.backend == "torch int8: libllama could not load: ImportError: no module named _cffi_backend"
        tokens, _ = reply_tokens(engine, MESSAGES, Control(2, 0.0), max_tokens=8)
        assert len(tokens) == 8
    finally:
        engine.close()


# ---------------------------------------------------------------- the tokenizer without transformers


@pytest.mark.real_weights
@pytest.mark.parametrize("name", ["smollm2-135m", "qwen2.5-coder-0.5b"])
def test_the_json_tokenizer_gives_what_transformers_gives(name):
    from transformers import AutoTokenizer

    from spectui.engines.prompt import chat_prompt_ids, stop_token_ids
    from spectui.models.gguf_local import local_gguf, tokenizer_folder
    from spectui.models.tokenizer_json import JsonTokenizer

    model = resolve(name)
    folder = tokenizer_folder(model, local_gguf(model))
    ours, theirs = JsonTokenizer(folder), AutoTokenizer.from_pretrained(str(folder))
    messages = [{"role": "system", "content": "Be brief."}, *MESSAGES,
                {"role": "assistant", "content": "one\ntwo ✓ — «naïve» 日本"}, *SECOND_TURN]
    assert chat_prompt_ids(ours, messages) == chat_prompt_ids(theirs, messages)
    ids = chat_prompt_ids(theirs, messages)
    assert ours.decode(ids, skip_special_tokens=True) == theirs.decode(ids, skip_special_tokens=True)
    assert ours.decode(ids) == theirs.decode(ids)
    assert stop_token_ids(ours) == stop_token_ids(theirs)
    assert set(ours.all_special_ids) == set(theirs.all_special_ids)


# ---------------------------------------------------------------- the glibc shim


def wheel_library() -> bytes:
    from spectui.engines.ggml.lib import package_dir

    return (package_dir() / "libllama.so").read_bytes()


def test_a_glibc_238_import_the_shim_does_not_know_is_refused():
    from spectui.engines.ggml.compat import ElfPatchError, c23_imports, needs_c23_glibc, patch_c23_imports

    data = wheel_library()
    if not needs_c23_glibc(data):
        pytest.skip("this wheel's libllama needs no glibc 2.38")
    assert set(c23_imports(data)) <= {b"__isoc23_strtol", b"__isoc23_strtoul", b"__isoc23_strtoull", b"__isoc23_sscanf"}
    strange = data.replace(b"\0__isoc23_sscanf\0", b"\0__isoc23_sscanX\0")
    with pytest.raises(ElfPatchError, match="__isoc23_sscanX from glibc 2.38"):
        patch_c23_imports(strange)


def test_the_shim_refuses_off_x86_64_and_makes_one_copy_for_two_starts(monkeypatch, tmp_path):
    from spectui.engines.ggml import compat
    from spectui.engines.ggml.lib import package_dir

    if not compat.needs_c23_glibc(wheel_library()):
        pytest.skip("this wheel's libllama needs no glibc 2.38")
    monkeypatch.setattr(compat, "glibc_has_c23", lambda: False)
    monkeypatch.setattr(compat.platform, "machine", lambda: "aarch64")
    with pytest.raises(compat.ElfPatchError, match="x86-64 only .this machine is aarch64"):
        compat.loadable_library_dir(package_dir(), tmp_path / "lib")
    monkeypatch.setattr(compat.platform, "machine", lambda: "x86_64")
    results, errors = [], []

    def start():
        try:
            results.append(compat.loadable_library_dir(package_dir(), tmp_path / "lib"))
        except Exception as error:  # noqa: BLE001 (the test reports it)
            errors.append(error)

    threads = [threading.Thread(target=start) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and results == [tmp_path / "lib"] * 2
    assert not (tmp_path / "lib.partial").exists() and (tmp_path / "lib" / "libllama.so").is_file()


def test_a_reply_leaves_cached_what_plain_decoding_leaves(tiny_pair, tiny_tokenizer):
    """Plain decoding never runs a reply's last token; drafts a verify ran past it (rejected, or
    accepted beyond a stop token) must not stay cached for the next prompt to reuse."""
    from spectui.engines.ggml.load import load_ggml_engine

    target, _ = tiny_pair
    engine = load_ggml_engine(target, tiny_tokenizer, "draft", draft_gguf=target, threads=1)  # accepts all
    params = GenerationParams(max_tokens=16, seed=0)
    try:
        engine.stop_ids = set()
        plain = [t for e in engine.stream_ids(PROMPT, params, Control(0, 0.0)) if isinstance(e, Step) for t in e.token_ids]
        stops = [token for i, token in enumerate(plain[2:12], 2) if token not in plain[:i]]
        assert stops
        for stop in stops:
            engine.stop_ids = {stop}
            engine.forget_prompts()
            events = list(engine.stream_ids(PROMPT, params, Control(6, 0.0)))
            tokens = [t for event in events if isinstance(event, Step) for t in event.token_ids]
            assert tokens == plain[: plain.index(stop) + 1] and events[-1].finish_reason == "stop"
            assert engine.target.seen == PROMPT + tokens[:-1]
            assert engine.target.model.cached == len(PROMPT) + len(tokens) - 1
    finally:
        engine.close()


NO_TORCH_ON_GGML = """
import sys
from spectui.core.events import Control, GenerationParams
from spectui.engines.ggml.build import build_ggml_engine
from spectui.models.registry import resolve_pair
from spectui.settings.options import EngineOptions

engine = build_ggml_engine(EngineOptions(model="smollm2-135m", method="draft", draft="smollm2-135m"),
                           resolve_pair("smollm2-135m", "smollm2-135m"))
messages = [{"role": "user", "content": "Count to five."}]
ends = []
for method, control in (("draft", Control(3, 0.8)), ("draft", Control(2, 0.0)), ("ngram", Control(2, 0.7))):
    events = list(engine.with_method(method).stream(messages, GenerationParams(max_tokens=12, seed=1), control))
    ends.append(events[-1].finish_reason if events[-1].finish_reason in ("stop", "length") else events[-1].error)
engine.close()
print(ends, sorted(name for name in sys.modules if name == "torch" or name.startswith("torch.")))
"""


@pytest.mark.slow
def test_a_reply_on_ggml_never_imports_torch():
    """The loop samples and verifies llama.cpp's numpy rows with numpy: building the engine and
    running replies (T = 0 and T > 0, a draft model and prompt lookup) loads no torch."""
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-c", NO_TORCH_ON_GGML], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    ends, modules = result.stdout.strip().rsplit(" ", 1)
    assert set(eval(ends)) <= {"stop", "length"} and modules == "[]", result.stdout
