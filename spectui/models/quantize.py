"""Batch-invariant int8 for a CPU target model.

Speculative decoding is lossless at T=0 only if verifying k+1 tokens in one forward gives, row
for row, the very same numbers as k+1 single-token forwards. On this kind of CPU neither plain
fp32 (MKL picks a different kernel for 1, 2-3 and 4+ rows, and a row's result depends on where it
sits in the tile) nor torch's dynamic int8 (one activation scale for the whole tensor) has that
property. This module provides pieces that do:

- `Int8Linear`: int8 weights with one scale per output channel, each input row quantised with
  its own scale, integer products summed exactly in int32 by fbgemm. Integer sums do not depend
  on the order of summation, so a row's output depends only on that row's input.
- `use_batch_invariant_attention`: attention computed one query row at a time over exactly the
  keys that row may see, so a verify forward repeats the calls a single-token decode makes.
  Needed too: with transformers' sdpa attention the int8 model's verify logits differ from
  sequential ones by up to ~1 (a tiny difference flips an activation's int8 rounding).

`quantize_int8` swaps the Linear layers of a model for `Int8Linear`.

How the exact int32 product is obtained from fbgemm: `quantized::linear_dynamic` quantises its
float input with one (scale, zero point) taken from the tensor's min and max. We hand it rows
already scaled into -127..127, plus one extra "sentinel" row holding -128 and 127. The min and
max are then always those two ends, so the chosen scale is exactly 1.0 and the zero point 128
whatever the other rows hold; fbgemm's quantiser then only rounds each value to the nearest
integer, elementwise. The AVX2 kernel multiplies u8 activations by s8 weights and adds adjacent
pairs in int16 with saturation (vpmaddubsw): with activations 0..255 the weights must stay in
-64..63 so that 2 * 255 * 64 fits in int16. So activations get 8 bits and weights 7 bits; the
tests check the sums are exact on extreme values.

`torch._int_mm` also computes exact int32 products on CPU in torch 2.13 (no shape constraints),
but without VNNI it runs 20-100x slower than fbgemm here, slower than fp32.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from spectui.core.errors import UsageError
from spectui.models.heap import return_freed_memory

if TYPE_CHECKING:
    import torch
    from torch import nn

ACTIVATION_MAX = 127  # per-row symmetric activation range -127..127 (the sentinel adds -128)
WEIGHT_MAX = 63  # per-channel symmetric weight range -63..63: keeps the int16 pair sums exact
# fbgemm's activation range: 0..255 (False) or 0..127 (True, for 7-bit activations, 8-bit weights)
REDUCE_RANGE = False
# Sibling projections that read the same input: one matrix product serves the group.
FUSED_GROUPS = (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj"))
# fbgemm packs a matrix of many output rows slowly (per weight: ~4 ns for 2240 rows, ~10 ns for
# 17920, ~16 ns for a 151936-row LM head), but each product call costs time too: the 1.5B loads
# in slices of PACK_ROWS rows (half the packing time) and, once idle, joins them into slices
# of SETTLED_ROWS (decoding 1.18x as fast: benchmarks/reports/int8-slices.md). Each output column is
# the same exact integer sum however the rows are sliced, so slicing changes no bit.
SLICE_ABOVE_ROWS = 4096
PACK_ROWS = 2240
SETTLED_ROWS = 8 * PACK_ROWS  # a 1.5B's gate/up whole; the LM head in 9 slices

BATCH_INVARIANT_ATTENTION = "spectui_batch_invariant"
_TINY = 1e-30


def __getattr__(name: str):
    # The nn.Module classes are built on first use: importing this module must not import torch
    # (keeps `spectui --help` instant).
    if name == "Int8Linear":
        return int8_linear_class()
    if name == "Int8LinearPart":
        return _int8_linear_part_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class RowQuantizer:
    """Scales input rows for Int8Linear into a kept buffer whose row 0 is the sentinel.

    The sentinel (-128, 0, ..., 0, 127) pins fbgemm's scale to 1; keeping it in a reused buffer
    saves an allocation and a copy per layer call, which matter next to a one-row product.
    Forwards of more rows than `capacity` (a prefill) use a fresh buffer, so long prompts do not
    grow memory. Layers of one model share a quantizer per input width; not for two threads.
    """

    def __init__(self, in_features: int, capacity: int = 32):
        if in_features < 2:
            raise UsageError(f"Int8Linear needs at least 2 input features, got {in_features}")
        self.in_features = in_features
        self.capacity = capacity
        self._buffer = None

    def _fresh_buffer(self, num_rows: int):
        import torch

        buffer = torch.zeros(num_rows + 1, self.in_features)
        buffer[0, 0] = -ACTIVATION_MAX - 1
        buffer[0, -1] = ACTIVATION_MAX
        return buffer

    def __call__(self, x: "torch.Tensor") -> tuple["torch.Tensor", "torch.Tensor"]:
        """Return (sentinel row + rows scaled into -127..127, row_scale [rows, 1])."""
        import torch

        rows = x.reshape(-1, self.in_features).to(torch.float32)
        num_rows = rows.shape[0]
        if num_rows > self.capacity:
            buffer = self._fresh_buffer(num_rows)
        else:
            if self._buffer is None:
                self._buffer = self._fresh_buffer(self.capacity)
            buffer = self._buffer
        scaled = buffer[:num_rows + 1]
        row_scale = scale_rows_(scaled[1:], rows)
        return scaled, row_scale


def _check_int8_weight(weight_int8: torch.Tensor, quantizer: RowQuantizer | None) -> None:
    """What fbgemm's exact int32 sums need: a 2-D int8 weight within ±WEIGHT_MAX, and a
    quantizer (if shared) for the same input width."""
    import torch

    if weight_int8.dtype != torch.int8 or weight_int8.dim() != 2:
        raise UsageError(f"Int8Linear needs a 2-D int8 weight, got {weight_int8.dtype} {tuple(weight_int8.shape)}")
    # (the bounds as Python ints: an int8 tensor's abs of -128 is -128)
    if weight_int8.numel() and any(abs(bound.item()) > WEIGHT_MAX for bound in torch.aminmax(weight_int8)):
        raise UsageError(f"Int8Linear weights must lie in -{WEIGHT_MAX}..{WEIGHT_MAX} "
                         "(larger ones would saturate fbgemm's int16 pair sums)")
    in_features = weight_int8.shape[1]
    if quantizer is not None and quantizer.in_features != in_features:
        raise UsageError(f"a RowQuantizer for {quantizer.in_features} features cannot feed "
                         f"an Int8Linear with {in_features}")


def _packed_slices(weight_int8: torch.Tensor, weight_scale: torch.Tensor) -> list:
    """The weight packed for fbgemm in load-time slices (fbgemm keeps its own packed copy; the
    plain int8 tensor is not kept: memory)."""
    out_features = weight_int8.shape[0]
    rows = PACK_ROWS if out_features > SLICE_ABOVE_ROWS else max(out_features, 1)
    return [_prepack(weight_int8[start:start + rows], weight_scale[start:start + rows])
            for start in range(0, out_features, rows)]


def _products(packed: list, rows: torch.Tensor) -> torch.Tensor:
    """rows × the packed weight's columns, slice by slice: exact int32 sums, rescaled."""
    import torch

    if len(packed) == 1:
        return torch.ops.quantized.linear_dynamic(rows, packed[0], REDUCE_RANGE)
    return torch.cat([torch.ops.quantized.linear_dynamic(rows, one, REDUCE_RANGE) for one in packed], dim=1)


def _int8_products(packed: list, quantizer: RowQuantizer | None, x: torch.Tensor, in_features: int) -> torch.Tensor:
    """x's rows × the packed int8 weight, in float32: each row quantised with its own scale
    (`quantizer`, per_row), or without one by fbgemm's single scale for the whole input."""
    import torch

    if x.shape[-1] != in_features:
        raise UsageError(f"Int8Linear expects {in_features} input features, got {x.shape[-1]}")
    if quantizer is None:
        return _products(packed, x.reshape(-1, in_features).to(torch.float32))
    scaled, row_scale = quantizer(x)
    # mul then add, never a fused multiply-add: a vectorised FMA and its scalar tail
    # would round differently, and which elements fall in the tail depends on the rows.
    return _products(packed, scaled)[1:].mul_(row_scale)


def _join_slices(packed: list, index: int, weight_scale: torch.Tensor) -> None:
    """Slice `index` of the settled layout: the load-time slices of its SETTLED_ROWS rows packed as one."""
    joined = packed[index:index + SETTLED_ROWS // PACK_ROWS]
    if len(joined) > 1:
        first = index * SETTLED_ROWS
        weight = _unpacked(joined)
        packed[index:index + len(joined)] = [_prepack(weight, weight_scale[first:first + weight.shape[0]])]


# Int8Linear: a Linear layer whose output row i depends only on input row i, bit for bit.
# Weights: int8 in -63..63, one fp32 scale per output channel (absmax / 63).
# Activations: each row quantised with its own scale (absmax / 127, symmetric).
# Products: exact int32 sums (fbgemm), then rescaled by weight and row scales.
# per_row=False leaves the activations to fbgemm's own dynamic quantisation (one scale for the
# whole input): one call instead of a handful, not batch-invariant. For a draft, whose rounding
# changes acceptance, never the output. The class is made on first use: torch loads only then.
@functools.cache
def int8_linear_class():
    import torch
    from torch import nn

    class Int8Linear(nn.Module):
        """A Linear layer whose output row i depends only on input row i, bit for bit (above)."""
        weight_scale: torch.Tensor  # buffers (register_buffer), declared for the type checker
        bias: torch.Tensor | None

        def __init__(self, weight_int8: torch.Tensor, weight_scale: torch.Tensor, bias: torch.Tensor | None = None,
                     quantizer: RowQuantizer | None = None, per_row: bool = True):
            super().__init__()
            _check_int8_weight(weight_int8, quantizer)
            self.out_features, self.in_features = weight_int8.shape
            self.register_buffer("weight_scale", weight_scale.detach().to(torch.float32).clone())
            self.register_buffer("bias", None if bias is None else bias.detach().to(torch.float32).clone())
            self._packed = _packed_slices(weight_int8, self.weight_scale)
            self._settled = 0 if len(self._packed) > 1 else 1  # the slices before it: SETTLED_ROWS rows each
            self.per_row = per_row
            self.quantizer = (quantizer or RowQuantizer(self.in_features)) if per_row else None

        @classmethod
        def from_linear(cls, linear: nn.Linear, quantizer: RowQuantizer | None = None) -> "Int8Linear":
            weight_int8, weight_scale = quantize_weight_per_channel(linear.weight.detach().to(torch.float32))
            return cls(weight_int8, weight_scale, linear.bias, quantizer)

        @property
        def weight_int8(self) -> torch.Tensor:
            return _unpacked(self._packed)

        @property
        def settled(self) -> bool:
            return self._settled >= len(self._packed)

        def settle_step(self) -> None:
            """Join the next SETTLED_ROWS rows of load-time slices into one packed slice: fewer
            product calls per forward, the same output bit for bit."""
            if self._settled < len(self._packed):
                _join_slices(self._packed, self._settled, self.weight_scale)
                self._settled += 1

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            out = _int8_products(self._packed, self.quantizer, x, self.in_features)
            if self.bias is not None:
                out.add_(self.bias)
            return out.to(x.dtype).reshape(*x.shape[:-1], self.out_features)

        def extra_repr(self) -> str:
            return (f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}, "
                    f"weights=int8/channel, activations={'int8/row' if self.per_row else 'int8/tensor'}")

    return Int8Linear


def settle_int8(models: Iterable["nn.Module"], stop: Callable[[], bool] = lambda: False,
                progress: Callable[[int, int], None] | None = None) -> bool:
    """Join the load-time slices of every Int8Linear in `models` (see SETTLED_ROWS), one join
    at a time, until stop() is true; True once all are joined. Bitwise the same outputs.
    progress(layers settled, layers) after each layer."""
    int8_linear = int8_linear_class()
    layers = [module for model in models for module in model.modules() if isinstance(module, int8_linear)]
    left = [layer for layer in layers if not layer.settled]
    for done, layer in enumerate(left, start=len(layers) - len(left) + 1):
        while not layer.settled:
            if stop():
                return False
            layer.settle_step()
            return_freed_memory()  # the replaced slices: else the process grows by their size
        if progress is not None:
            progress(done, len(layers))
    return True


def _unpacked(slices: list) -> "torch.Tensor":
    """The int8 weight rows held by fbgemm's packed slices, in order."""
    import torch

    return torch.cat([torch.ops.quantized.linear_unpack(packed)[0].int_repr() for packed in slices])


def _prepack(weight_int8: torch.Tensor, weight_scale: torch.Tensor):
    import torch

    per_channel = torch._make_per_channel_quantized_tensor(  # pyright: ignore[reportPrivateImportUsage]  # no public form
        weight_int8, weight_scale.double(), torch.zeros(weight_int8.shape[0], dtype=torch.long), 0)
    return torch.ops.quantized.linear_prepack(per_channel, None)


def _version_of(x: torch.Tensor) -> int | None:
    # Inference-mode tensors keep no version counter (and cannot be changed outside it).
    try:
        return x._version
    except RuntimeError:
        return None


class SharedProduct:
    """One Int8Linear over the concatenated weights of sibling projections (q, k, v).

    The first sibling called computes every sibling's output in one product; the others,
    called with the very same input tensor, take their columns. Each output element is the
    same exact integer sum rescaled the same way as in separate layers, so fusing changes
    no bit. The result is dropped once every sibling took its part (no memory kept).
    """

    def __init__(self, fused: nn.Module, out_sizes: list[int]):
        self.fused = fused
        self.bounds, start = [], 0
        for size in out_sizes:
            self.bounds.append((start, start + size))
            start += size
        self._clear()

    def _clear(self):
        self._source, self._version, self._output, self._taken = None, None, None, set()

    def output_for(self, index: int, x: torch.Tensor) -> torch.Tensor:
        import weakref

        source = self._source() if self._source is not None else None
        version = _version_of(x)
        if source is not x or version != self._version or index in self._taken:
            self._clear()
            self._output = self.fused(x)
            self._source, self._version = weakref.ref(x), version
        output = self._output
        assert output is not None, "computed above, or kept from this same input"
        self._taken.add(index)
        if len(self._taken) == len(self.bounds):
            self._clear()
        start, end = self.bounds[index]
        return output[..., start:end]


@functools.cache
def _int8_linear_part_class():
    from torch import nn

    class Int8LinearPart(nn.Module):
        """The columns of one projection in a fused group; behaves like that Int8Linear."""

        def __init__(self, shared: "SharedProduct", index: int):
            super().__init__()
            self.shared = shared
            self.index = index
            start, end = shared.bounds[index]
            self.in_features, self.out_features = shared.fused.in_features, end - start
            # registered in the first part only, so the fused weights are counted once
            if index == 0:
                self.fused = shared.fused

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.shared.output_for(self.index, x)

        def extra_repr(self) -> str:
            start, end = self.shared.bounds[self.index]
            return f"columns {start}:{end} of a fused Int8Linear"

    return Int8LinearPart


def quantize_weight_per_channel(weight: "torch.Tensor") -> tuple["torch.Tensor", "torch.Tensor"]:
    """Symmetric int8 (-63..63) per output channel: returns (weight_int8 [out,in], scale [out])."""
    import torch

    absmax = weight.abs().amax(dim=1)
    scale = torch.where(absmax > 0, absmax / WEIGHT_MAX, torch.ones_like(absmax))
    weight_int8 = torch.round(weight / scale[:, None]).clamp_(-WEIGHT_MAX, WEIGHT_MAX).to(torch.int8)
    return weight_int8, scale


def scale_rows_(out: "torch.Tensor", rows: "torch.Tensor") -> "torch.Tensor":
    """Write rows * (127 / row_absmax) into out[:len(rows)]; return row_scale = row_absmax / 127.

    The scaled values lie in -127..127 and are rounded to integers by fbgemm's own quantiser
    (scale exactly 1, see the module docstring). Every step is per row and exact or elementwise
    (a max does not depend on the order it is taken in), so a row's values and scale do not
    depend on the other rows.
    """
    import torch

    num_rows = rows.shape[0]
    # A zero row keeps a tiny scale: 0 * (127 / tiny) is still 0, never NaN.
    absmax = rows.abs().amax(dim=1, keepdim=True).clamp_min_(_TINY)
    scaled = torch.mul(rows, ACTIVATION_MAX / absmax, out=out[:num_rows])
    # absmax * (127 / absmax) can round to one ulp above 127, past the sentinel's end.
    scaled.clamp_(-ACTIVATION_MAX, ACTIVATION_MAX)
    return absmax.div_(ACTIVATION_MAX)


def quantize_int8(model: "nn.Module", skip: Iterable[str] = (), fuse: bool = True,
                  per_row: bool = True) -> "nn.Module":
    """Replace every nn.Linear of `model` (in place) by an `Int8Linear`; returns the model.

    `skip` holds module names to leave as they are, matched on whole dotted components from the
    end ("lm_head", "down_proj", "layers.0.mlp.down_proj"). The default quantises the LM head
    too: an fp32 head is not batch-invariant on this CPU, so skipping it gives up the bitwise
    T=0 guarantee, and the int8 head is faster at the same accuracy (benchmarks/reports/precision.md).
    A head tied to the input embeddings gets its own int8 copy; the embedding table is untouched.

    With `fuse`, sibling projections that read the same input (FUSED_GROUPS: q/k/v, gate/up)
    share one matrix product, bitwise identical to separate layers and faster. `per_row`: see
    Int8Linear (False for a draft).
    """
    import torch
    from torch import nn

    def weights_of(name: str):
        linear = model.get_submodule(name)
        assert isinstance(linear, nn.Linear), "linear_groups names Linear layers"
        weight_int8, weight_scale = quantize_weight_per_channel(linear.weight.detach().to(torch.float32))
        return weight_int8, weight_scale, None if linear.bias is None else linear.bias.detach()

    install_int8(model, linear_groups(model, skip, fuse), weights_of, per_row=per_row)
    return model


def linear_groups(model: "nn.Module", skip: Iterable[str] = (), fuse: bool = True) -> list[tuple[str, tuple[str, ...]]]:
    """The Linear layers `quantize_int8` replaces, as (parent module name, child names): one child,
    or a fused group of siblings (FUSED_GROUPS) of one input width and alike in having a bias.
    Reads only module types and sizes, so it works on a model whose weights are not loaded."""
    from torch import nn

    skip = set(skip)
    by_parent: dict[str, dict[str, nn.Linear]] = {}
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear) and not any(name == suffix or name.endswith("." + suffix) for suffix in skip):
            parent_name, _, child_name = name.rpartition(".")
            by_parent.setdefault(parent_name, {})[child_name] = module
    groups = []
    for parent_name, children in by_parent.items():
        children = dict(children)
        for group in FUSED_GROUPS if fuse else ():
            members = [children[child] for child in group if child in children]
            if len(members) != len(group):
                continue
            if len({member.in_features for member in members}) != 1 or \
                    len({member.bias is None for member in members}) != 1:
                continue
            groups.append((parent_name, group))
            for child in group:
                del children[child]
        groups.extend((parent_name, (child,)) for child in children)
    return groups


# A layer's int8 weight [out, in], its per-channel scales [out] and its bias, by qualified name.
LayerWeights = Callable[[str], "tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]"]
# How the groups are installed: map, or a thread pool's map (its results are not used).
RunGroups = Callable[[Callable[[tuple[str, tuple[str, ...]]], None], list[tuple[str, tuple[str, ...]]]], Iterable[object]]


def install_int8(model: "nn.Module", groups: list[tuple[str, tuple[str, ...]]], weights_of: LayerWeights,
                 run: RunGroups | None = None, per_row: bool = True) -> None:
    """Put an Int8Linear in the place of each group of `linear_groups`, in place.

    weights_of(qualified layer name) -> (weight_int8 [out, in], weight_scale [out], bias or None),
    the per-channel quantisation of that layer's weight. A fused group's rows are its members'
    rows one after the other: per-channel quantisation works row by row, so quantising the
    members apart and joining them is bitwise the same as quantising the joined matrix.
    run(function, groups), map by default, may run the groups in threads (packing releases the GIL).
    """
    import torch
    from torch import nn

    int8_linear = int8_linear_class()
    part_class = _int8_linear_part_class()
    quantizers: dict[int, RowQuantizer] = {}
    for parent_name, children in groups:
        linear = model.get_submodule(f"{parent_name}.{children[0]}" if parent_name else children[0])
        assert isinstance(linear, nn.Linear), "linear_groups names Linear layers"
        quantizers.setdefault(linear.in_features, RowQuantizer(linear.in_features))

    def install(group: tuple[str, tuple[str, ...]]) -> None:
        parent_name, children = group
        parent = model.get_submodule(parent_name) if parent_name else model
        parts = [weights_of(f"{parent_name}.{child}" if parent_name else child) for child in children]
        weight_int8 = torch.cat([part[0] for part in parts]) if len(parts) > 1 else parts[0][0]
        weight_scale = torch.cat([part[1] for part in parts]) if len(parts) > 1 else parts[0][1]
        biases = [part[2] for part in parts if part[2] is not None]  # all or none: linear_groups groups alike
        bias = None if not biases else torch.cat(biases) if len(biases) > 1 else biases[0]
        layer = int8_linear(weight_int8, weight_scale, bias, quantizers[weight_int8.shape[1]], per_row)
        if len(children) == 1:
            setattr(parent, children[0], layer)
            return
        shared = SharedProduct(layer, [part[0].shape[0] for part in parts])
        for index, child in enumerate(children):
            setattr(parent, child, part_class(shared, index))

    for _ in (run or map)(install, groups):
        pass


def batch_invariant_attention(module: nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                              attention_mask: torch.Tensor | None, scaling: float | None = None,
                              dropout: float = 0.0, **kwargs: Any) -> tuple[torch.Tensor, None]:
    """Attention for one sequence, one query row at a time (transformers attention interface).

    Row i of a q_len-row forward sits at position kv_len - q_len + i and sees exactly the keys
    0..that position, the same keys and the same kernel call as a one-token decode at that
    position, so its output is bitwise the same. Batch 1 without padding: the causal mask is
    implied when `attention_mask` is None (transformers passes None for plain causal calls).
    A draft tree (spectui.engines.speculative.tree) passes its own 4D mask: a node's row then
    gathers the keys it may see (the context, its ancestors, itself), in order, which are the
    keys a one-token decode along that branch would hold. Costs one small kernel call per
    row and layer (about 0.5 ms per layer for a 9-token verify on the 1.5B model here).
    """
    import torch

    batch, _, q_len, _ = query.shape
    if batch != 1:
        raise UsageError(f"batch-invariant attention runs one sequence at a time, got a batch of {batch}")
    for unsupported in ("sliding_window", "softcap"):
        if kwargs.get(unsupported) is not None:
            raise UsageError(f"batch-invariant attention does not support {unsupported} models")
    kv_len = key.shape[2]
    first_position = kv_len - q_len
    enable_gqa = query.shape[1] != key.shape[1]
    rows = []
    for i in range(q_len):
        visible = first_position + i + 1
        row_key, row_value = key[:, :, :visible], value[:, :, :visible]
        if attention_mask is not None:
            seen = _visible_keys(attention_mask, i, kv_len)
            if not torch.equal(seen, torch.arange(visible, device=seen.device)):
                row_key, row_value = key[:, :, seen], value[:, :, seen]
        rows.append(torch.nn.functional.scaled_dot_product_attention(
            query[:, :, i:i + 1], row_key, row_value,
            scale=scaling, enable_gqa=enable_gqa))
    attn_output = torch.cat(rows, dim=2) if q_len > 1 else rows[0]
    return attn_output.transpose(1, 2).contiguous(), None


def _visible_keys(attention_mask: torch.Tensor, row: int, kv_len: int) -> torch.Tensor:
    """Indices of the keys query row `row` may attend to, from a [1, 1, q, kv] mask (bool, or
    additive float with 0 where allowed)."""
    import torch

    allowed = attention_mask[0, 0, row, :kv_len]
    if allowed.dtype != torch.bool:
        allowed = allowed > torch.finfo(allowed.dtype).min / 2
    return allowed.nonzero().flatten()


def use_batch_invariant_attention(model: "nn.Module") -> "nn.Module":
    """Switch a transformers model to `batch_invariant_attention`; returns the model."""
    from transformers import AttentionInterface, PreTrainedModel

    if not isinstance(model, PreTrainedModel):  # the attention is chosen by transformers' own switch
        raise UsageError(f"batch-invariant attention needs a transformers model, not a {type(model).__name__}")
    AttentionInterface.register(BATCH_INVARIANT_ATTENTION, batch_invariant_attention)
    model.set_attn_implementation(BATCH_INVARIANT_ATTENTION)
    return model
