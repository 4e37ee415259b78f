"""Int8Linear is batch-invariant bit for bit, close to fp32, and makes a verify forward equal
to one-token-at-a-time decoding on a small transformers model."""

import pathlib
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from spectui.core.errors import SpectuiError  # noqa: E402
from spectui.models.quantize import (  # noqa: E402
    ACTIVATION_MAX,
    WEIGHT_MAX,
    Int8Linear,
    quantize_int8,
    quantize_weight_per_channel,
    use_batch_invariant_attention,
)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _linear(in_features, out_features, bias=True, seed=0):
    torch.manual_seed(seed)
    linear = torch.nn.Linear(in_features, out_features, bias=bias)
    torch.nn.init.normal_(linear.weight, std=0.02)
    return linear


@pytest.mark.parametrize("in_features,out_features", [(64, 48), (1536, 256), (300, 37)])
def test_each_row_is_bitwise_the_same_whatever_the_other_rows(in_features, out_features):
    layer = Int8Linear.from_linear(_linear(in_features, out_features))
    generator = torch.Generator().manual_seed(1)
    rows = torch.randn(9, in_features, generator=generator)
    rows[:, 3] *= 30  # an outlier channel, as in real activations
    alone = layer(rows[:1])[0]
    for num_rows in range(2, 10):
        batch = layer(rows[:num_rows])
        assert torch.equal(batch[0], alone), num_rows
        # the same row at another position, among unrelated rows of a larger scale
        noise = 100 * torch.randn(3, in_features, generator=generator)
        surrounded = layer(torch.cat([noise, rows[:num_rows], noise]))
        assert torch.equal(surrounded[3:3 + num_rows], batch)
    # every row of a 9-row batch equals that row computed on its own
    batch = layer(rows)
    for i in range(9):
        assert torch.equal(batch[i], layer(rows[i:i + 1])[0])


def test_integer_sums_are_exact_at_the_extremes():
    # fbgemm's AVX2 kernel adds u8*s8 pairs in int16 with saturation; the chosen ranges must not
    # saturate: all-max and alternating-sign inputs against all-max weights.
    in_features, out_features = 1024, 16
    weight_int8 = torch.full((out_features, in_features), WEIGHT_MAX, dtype=torch.int8)
    weight_int8[1::2] = -WEIGHT_MAX
    layer = Int8Linear(weight_int8, torch.ones(out_features))
    rows = torch.full((4, in_features), float(ACTIVATION_MAX))
    rows[1] = -ACTIVATION_MAX
    rows[2, ::2] = -ACTIVATION_MAX
    rows[3] = torch.arange(in_features) % (2 * ACTIVATION_MAX + 1) - ACTIVATION_MAX
    # each row's absmax is 127, so the row scale is 1 and the output is the integer product
    expected = rows.double() @ weight_int8.double().t()
    assert torch.equal(layer(rows).double(), expected)


def test_close_to_fp32():
    linear = _linear(1536, 512)
    layer = Int8Linear.from_linear(linear)
    rows = torch.randn(7, 1536, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        expected = linear(rows)
        got = layer(rows)
    relative_error = ((got - expected).norm() / expected.norm()).item()
    # 8-bit rows and 7-bit channels on Gaussian data: about 1.5%; a wrong scale or a missing
    # bias is off by far more.
    assert relative_error < 0.03
    assert got.shape == expected.shape and got.dtype == expected.dtype


def test_bias_and_leading_dimensions_and_dtype():
    linear = _linear(32, 8)
    linear.bias.data.fill_(5.0)
    layer = Int8Linear.from_linear(linear)
    rows = torch.zeros(2, 3, 32)
    out = layer(rows)
    assert out.shape == (2, 3, 8)
    assert torch.equal(out, torch.full((2, 3, 8), 5.0))  # zero rows: exactly the bias
    assert layer(rows.to(torch.bfloat16)).dtype == torch.bfloat16


def test_weight_quantisation_round_trips_per_channel():
    weight = torch.randn(6, 40, generator=torch.Generator().manual_seed(3))
    weight[2] *= 1000  # one large channel must not spoil the others' precision
    weight_int8, scale = quantize_weight_per_channel(weight)
    assert weight_int8.abs().max().item() == WEIGHT_MAX
    error = (weight_int8.float() * scale[:, None] - weight).abs()
    assert bool((error <= scale[:, None] / 2 + 1e-6).all())
    layer = Int8Linear(weight_int8, scale)
    assert torch.equal(layer.weight_int8, weight_int8)


def test_bad_input_is_a_clear_error():
    layer = Int8Linear.from_linear(_linear(16, 4))
    with pytest.raises(SpectuiError, match="16 input features"):
        layer(torch.zeros(1, 15))
    with pytest.raises(SpectuiError, match="-63..63"):
        Int8Linear(torch.full((2, 2), 100, dtype=torch.int8), torch.ones(2))
    with pytest.raises(SpectuiError, match="-63..63"):
        Int8Linear(torch.tensor([[-128, 1], [0, 0]], dtype=torch.int8), torch.ones(2))


def _tiny_qwen2(seed=0):
    transformers = pytest.importorskip("transformers")
    config = transformers.Qwen2Config(
        hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=100, max_position_embeddings=256,
        tie_word_embeddings=True)
    torch.manual_seed(seed)
    return transformers.Qwen2ForCausalLM(config).eval()


def test_quantize_int8_replaces_linears_and_honours_skip():
    model = quantize_int8(_tiny_qwen2(), skip=("lm_head", "layers.0.mlp.down_proj"), fuse=False)
    kinds = {name: type(module).__name__ for name, module in model.named_modules()}
    assert kinds["model.layers.0.self_attn.q_proj"] == "Int8Linear"
    assert kinds["model.layers.1.mlp.down_proj"] == "Int8Linear"
    assert kinds["model.layers.0.mlp.down_proj"] == "Linear"
    assert kinds["lm_head"] == "Linear"
    assert sum(kind == "Linear" for kind in kinds.values()) == 2
    fused = quantize_int8(_tiny_qwen2())
    kinds = {name: type(module).__name__ for name, module in fused.named_modules()}
    assert kinds["model.layers.0.self_attn.k_proj"] == "Int8LinearPart"
    assert kinds["model.layers.0.mlp.up_proj"] == "Int8LinearPart"
    assert kinds["model.layers.0.self_attn.o_proj"] == "Int8Linear"
    tied = quantize_int8(_tiny_qwen2())
    assert type(tied.lm_head).__name__ == "Int8Linear"
    # the embedding table stays float for the lookup
    assert tied.get_input_embeddings().weight.dtype == torch.float32


@torch.no_grad()
def test_fused_projections_change_no_bit():
    separate = quantize_int8(_tiny_qwen2(seed=7), fuse=False)
    fused = quantize_int8(_tiny_qwen2(seed=7), fuse=True)
    tokens = torch.randint(0, 100, (1, 40), generator=torch.Generator().manual_seed(8))
    assert torch.equal(separate(tokens).logits, fused(tokens).logits)
    # the fused product is computed once per input, and dropped after its last part is taken
    attention = fused.model.layers[0].self_attn
    shared = attention.q_proj.shared
    calls = []
    original = shared.fused.forward
    shared.fused.forward = lambda x: calls.append(x.shape) or original(x)
    hidden = torch.randn(1, 3, 64)
    q, k, v = attention.q_proj(hidden), attention.k_proj(hidden), attention.v_proj(hidden)
    assert len(calls) == 1 and shared._output is None
    assert (q.shape[-1], k.shape[-1], v.shape[-1]) == (64, 32, 32)
    # an input changed in place between siblings is not served from the old product
    attention.q_proj(hidden)
    hidden.add_(1.0)
    k_after_change = attention.k_proj(hidden)
    assert len(calls) == 3
    assert not torch.equal(k_after_change, k)
    assert torch.equal(k_after_change, attention.k_proj(hidden))


def _forward(model, ids, cache):
    """A forward with the KV cache, under the keyword this transformers names it by."""
    from spectui.engines.torch_backend.kv import cache_argument

    return model(ids, use_cache=True, **{cache_argument(model): cache})


def _greedy_one_at_a_time(model, prompt, num_new):
    from transformers import DynamicCache

    cache = DynamicCache(config=model.config)
    logits = _forward(model, prompt, cache).logits[0, -1]
    tokens, step_logits = [], []
    for _ in range(num_new):
        token = int(logits.argmax())
        tokens.append(token)
        step_logits.append(logits)
        logits = _forward(model, torch.tensor([[token]]), cache).logits[0, -1]
    return tokens, torch.stack(step_logits)


@torch.no_grad()
def test_batched_verify_equals_sequential_greedy_after_quantize():
    from transformers import DynamicCache

    model = use_batch_invariant_attention(quantize_int8(_tiny_qwen2()))
    prompt = torch.randint(0, 100, (1, 12), generator=torch.Generator().manual_seed(4))
    tokens, sequential_logits = _greedy_one_at_a_time(model, prompt, num_new=16)

    # one forward over all tokens after the prefill: what a verify step with k = 15 computes
    cache = DynamicCache(config=model.config)
    first = _forward(model, prompt, cache).logits[0, -1]
    verify = _forward(model, torch.tensor([tokens[:-1]]), cache).logits[0]
    batched_logits = torch.cat([first[None], verify])
    assert batched_logits.argmax(-1).tolist() == tokens
    assert torch.equal(batched_logits, sequential_logits)

    # and a single forward from scratch over prompt + tokens: every row still matches
    full = model(torch.cat([prompt, torch.tensor([tokens[:-1]])], dim=1)).logits[0, prompt.shape[1] - 1:]
    assert torch.equal(full, sequential_logits)


@torch.no_grad()
def test_verify_in_chunks_of_any_size_equals_sequential():
    # A speculative loop verifies k + 1 tokens at a time, k changing between steps.
    from transformers import DynamicCache

    model = use_batch_invariant_attention(quantize_int8(_tiny_qwen2(seed=5)))
    prompt = torch.randint(0, 100, (1, 9), generator=torch.Generator().manual_seed(6))
    tokens, sequential_logits = _greedy_one_at_a_time(model, prompt, num_new=20)
    cache = DynamicCache(config=model.config)
    rows = [_forward(model, prompt, cache).logits[0, -1:]]
    start = 0
    for chunk in (1, 3, 2, 5, 1, 4, 3):
        rows.append(_forward(model, torch.tensor([tokens[start:start + chunk]]), cache).logits[0])
        start += chunk
    assert start == 19
    assert torch.equal(torch.cat(rows), sequential_logits)


@torch.no_grad()
def test_a_prompt_longer_than_the_kept_buffer_gives_the_same_rows():
    # more rows than RowQuantizer.capacity take the fresh-buffer path
    model = use_batch_invariant_attention(quantize_int8(_tiny_qwen2(seed=9)))
    prompt = torch.randint(0, 100, (1, 40), generator=torch.Generator().manual_seed(10))
    tokens, sequential_logits = _greedy_one_at_a_time(model, prompt, num_new=8)
    full = model(torch.cat([prompt, torch.tensor([tokens[:-1]])], dim=1)).logits[0, 39:]
    assert full.shape[0] == 8
    assert torch.equal(full, sequential_logits)


def test_batch_invariant_attention_refuses_a_batch():
    model = use_batch_invariant_attention(_tiny_qwen2())
    with pytest.raises(SpectuiError, match="one sequence at a time"):
        model(torch.zeros(2, 3, dtype=torch.long))


def test_importing_the_module_does_not_import_torch():
    code = ("import sys, spectui.models.quantize as q; "
            "print('torch' in sys.modules, 'transformers' in sys.modules)")
    repo_root = pathlib.Path(__file__).resolve().parents[1]
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True, cwd=repo_root)
    assert result.stdout.split() == ["False", "False"]



def test_a_layer_packed_in_slices_gives_the_same_bits(monkeypatch):
    # A vocabulary-sized head is packed in slices of rows (fbgemm packs tall matrices slowly);
    # each output column is the same exact integer sum either way.
    from spectui.models import quantize

    linear = _linear(64, 300, seed=3)
    whole = Int8Linear.from_linear(linear)
    monkeypatch.setattr(quantize, "SLICE_ABOVE_ROWS", 100)
    monkeypatch.setattr(quantize, "PACK_ROWS", 64)
    sliced = Int8Linear.from_linear(linear)
    assert len(sliced._packed) == 5 and len(whole._packed) == 1
    x = torch.randn(7, 64)
    assert torch.equal(sliced(x), whole(x))
    assert torch.equal(sliced.weight_int8, whole.weight_int8)


def test_a_draft_layer_quantises_activations_per_tensor():
    # per_row=False: fbgemm's own dynamic quantisation, one scale for the input (a draft's
    # mode): close to the exact layer, one call instead of several.
    linear = _linear(64, 32, seed=4)
    exact, draft = Int8Linear.from_linear(linear), Int8Linear.from_linear(linear)
    draft.per_row, draft.quantizer = False, None
    x = torch.randn(5, 64)
    assert torch.allclose(draft(x), exact(x), atol=0.02, rtol=0.05)
    assert "activations=int8/tensor" in repr(draft)


@pytest.mark.parametrize("per_row", [True, False])
def test_settling_joins_the_slices_and_changes_no_bit(monkeypatch, per_row):
    # Loading packs tall matrices in small slices (fast to pack); settling, while the engine is
    # idle, joins them into fewer (fast to multiply), a join at a time, stoppable between joins.
    from spectui.models import quantize

    monkeypatch.setattr(quantize, "SLICE_ABOVE_ROWS", 100)
    monkeypatch.setattr(quantize, "PACK_ROWS", 64)
    monkeypatch.setattr(quantize, "SETTLED_ROWS", 3 * 64)
    linear = _linear(64, 700, seed=5)
    layer = Int8Linear.from_linear(linear)
    layer.per_row, layer.quantizer = per_row, layer.quantizer if per_row else None
    small = Int8Linear.from_linear(_linear(64, 32, seed=6))  # one slice: settled from the start
    model = torch.nn.Sequential(layer, torch.nn.ReLU(), torch.nn.Linear(700, 64), small)
    x = torch.randn(5, 64)
    before, weights = layer(x), layer.weight_int8
    assert len(layer._packed) == 11 and not layer.settled and small.settled

    calls = []
    assert not quantize.settle_int8([model], stop=lambda: len(calls) >= 2 or calls.append(1))
    assert len(layer._packed) == 7  # two joins, of three slices each
    assert torch.equal(layer(x), before)

    progress = []
    assert quantize.settle_int8([model], progress=lambda done, total: progress.append((done, total)))
    assert len(layer._packed) == 4 and layer.settled  # 192 + 192 + 192 + 124 rows
    assert progress == [(2, 2)]
    assert torch.equal(layer(x), before)
    assert torch.equal(layer.weight_int8, weights)
    assert quantize.settle_int8([model], stop=lambda: True)  # nothing left: stop is not even asked


def test_batch_invariant_attention_is_refused_in_one_line_for_a_model_transformers_did_not_build():
    from spectui.core.errors import UsageError

    with pytest.raises(UsageError, match="^batch-invariant attention needs a transformers model, not a Linear$"):
        use_batch_invariant_attention(torch.nn.Linear(2, 2))
