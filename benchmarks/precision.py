"""Precision forms of a target/draft model on CPU: speed, verify cost, accuracy, batch invariance.

    HF_HUB_OFFLINE=1 python benchmarks/precision.py --model DIR_OR_GGUF [--draft DIR_OR_GGUF]

For each model, one fp32 copy is loaded and the other forms are built from it, sharing every
tensor they do not convert (so a 1.5B model costs ~12 GiB, not 4 x 6 GiB):

- fp32        the loaded model (sdpa attention)
- fp32-rows   fp32, but every Linear and the attention run one row at a time: the
              batch-invariant fix for fp32, to price it
- bf16        weights and activations in bfloat16
- int8-dyn    torch dynamic int8 (per-channel weights, one activation scale per tensor)
- int8-row    spectui.models.quantize: per-row activations, exact int32 sums, LM head int8,
              row-by-row attention
- int8-row-fp32head   the same with the LM head left in fp32

Timing: a ~100-token context sits in a KV cache; t(m) is one forward of m new tokens on top of
it (the cache is cropped back after each). The forms and m are interleaved in every round and
the medians taken; v(k) is the median over rounds of t(k+1)/t(1) within the round, which is what
survives a shared, noisy machine. Batch invariance: 16 greedy tokens decoded one at a time
versus the same tokens verified in chunks of 9, 2 and 4 (k = 8, 1, 3): are the logits bitwise
equal, how far apart, do the argmaxes agree. Accuracy: teacher-forced logits over a ~300-token
text against fp32 (top-1 agreement, mean KL(fp32 || form)).
"""

from __future__ import annotations

import argparse
import copy
import datetime
import gc
import os
import platform
import random
import statistics
import sys
import time
import warnings
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
warnings.filterwarnings("ignore")

import torch  # noqa: E402
from torch import nn  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from spectui.models.quantize import (  # noqa: E402
    quantize_int8,
    use_batch_invariant_attention,
)

CONTEXT_TEXT = '''def parse_config(path):
    """Read a TOML file and return a dict with defaults filled in."""
    import tomllib
    with open(path, "rb") as handle:
        data = tomllib.load(handle)
    defaults = {"host": "127.0.0.1", "port": 8080, "workers": 4, "debug": False}
    for key, value in defaults.items():
        data.setdefault(key, value)
    if not isinstance(data["port"], int) or not 0 < data["port"] < 65536:
        raise ValueError(f"bad port: {data['port']!r}")
    return data


# Explain what parse_config does and how it could fail:
'''

ACCURACY_TEXT = CONTEXT_TEXT + '''The function opens the file in binary mode because tomllib only accepts bytes, parses it, and
fills in defaults for the host, the port, the number of workers and the debug flag. It then
checks that the port is an integer in the valid range. It can fail when the file does not exist
(FileNotFoundError), when the TOML is malformed (tomllib.TOMLDecodeError), or when the port is
out of range or not an integer (ValueError). A list comprehension such as
[key for key in data if key not in defaults] would show which keys came from the file only.
{"name": "spectui", "version": "0.1.0", "dependencies": ["torch", "transformers", "textual"]}
'''

VERIFY_CHUNKS = (9, 2, 4)  # verify forwards of k + 1 = 9, 2 and 4 tokens over 15 decoded tokens
MAX_M = 9  # t(m) for m = 1..9, so v(k) for k = 1..8


def load_fp32(path: str):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model_path = Path(path)
    if model_path.suffix == ".gguf":
        kwargs = {"gguf_file": model_path.name}
        folder = str(model_path.parent)
    else:
        kwargs, folder = {}, str(model_path)
    tokenizer = AutoTokenizer.from_pretrained(folder, **kwargs)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, **kwargs).eval()
    model.hf_quantizer = None
    return tokenizer, model


def copy_sharing_tensors(model: nn.Module, convert=None) -> nn.Module:
    """A structural copy of `model` whose parameters are the same tensors (or `convert(p)`)."""
    memo = {}
    for parameter in model.parameters():
        if id(parameter) not in memo:
            memo[id(parameter)] = parameter if convert is None else nn.Parameter(
                convert(parameter.detach()), requires_grad=False)
    return copy.deepcopy(model, memo)


class RowByRowLinear(nn.Module):
    """fp32 Linear computed one row at a time: M=1 kernels only, so batch-invariant."""

    def __init__(self, linear: nn.Linear):
        super().__init__()
        self.linear = linear

    def forward(self, x):
        rows = x.reshape(-1, x.shape[-1])
        out = torch.cat([self.linear(rows[i:i + 1]) for i in range(rows.shape[0])])
        return out.reshape(*x.shape[:-1], -1)


def make_forms(model: nn.Module, wanted: list[str]) -> dict[str, nn.Module]:
    from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

    forms: dict[str, nn.Module] = {}
    if "fp32" in wanted:
        forms["fp32"] = model
    if "fp32-rows" in wanted:
        rows = copy_sharing_tensors(model)
        for name, module in list(rows.named_modules()):
            if isinstance(module, nn.Linear):
                parent, _, child = name.rpartition(".")
                setattr(rows.get_submodule(parent) if parent else rows, child, RowByRowLinear(module))
        forms["fp32-rows"] = use_batch_invariant_attention(rows)
    if "bf16" in wanted:
        forms["bf16"] = copy_sharing_tensors(model, lambda t: t.to(torch.bfloat16))
    if "int8-dyn" in wanted:
        dynamic = copy_sharing_tensors(model)
        forms["int8-dyn"] = quantize_dynamic(dynamic, {nn.Linear: per_channel_dynamic_qconfig},
                                             dtype=torch.qint8, inplace=True)
    if "int8-row" in wanted:
        forms["int8-row"] = use_batch_invariant_attention(quantize_int8(copy_sharing_tensors(model)))
    if "int8-row-fp32head" in wanted:
        forms["int8-row-fp32head"] = use_batch_invariant_attention(
            quantize_int8(copy_sharing_tensors(model), skip=("lm_head",)))
    return forms


def forward(model, input_ids, cache):
    return model(input_ids, cache=cache, use_cache=True).logits[0]


@torch.inference_mode()
def prefilled_cache(model, context_ids):
    from transformers import DynamicCache

    cache = DynamicCache(config=model.config)
    logits = forward(model, context_ids, cache)
    return cache, logits[-1]


@torch.inference_mode()
def time_forward(model, cache, new_ids) -> float:
    start = time.perf_counter()
    forward(model, new_ids, cache)
    elapsed = time.perf_counter() - start
    cache.crop(-new_ids.shape[1])
    return elapsed


def measure_speed(forms, context_ids, rounds: int, log) -> dict[str, dict]:
    caches = {name: prefilled_cache(model, context_ids)[0] for name, model in forms.items()}
    new_ids = context_ids[:, :MAX_M].clone()  # any tokens: only the cost is measured
    for name, model in forms.items():  # warm up every shape once
        for m in range(1, MAX_M + 1):
            time_forward(model, caches[name], new_ids[:, :m])
    times = {name: {m: [] for m in range(1, MAX_M + 1)} for name in forms}
    order = random.Random(0)
    for round_index in range(rounds):
        sizes = list(range(1, MAX_M + 1))
        order.shuffle(sizes)
        names = list(forms)
        for m in sizes:
            order.shuffle(names)
            for name in names:
                times[name][m].append(time_forward(forms[name], caches[name], new_ids[:, :m]))
        log(f"  round {round_index + 1}/{rounds}: " + ", ".join(
            f"{name} t1={times[name][1][-1] * 1e3:.0f}ms" for name in forms))
    results = {}
    for name in forms:
        t1 = statistics.median(times[name][1])
        verify_cost = {k: statistics.median(
            times[name][k + 1][r] / times[name][1][r] for r in range(rounds))
            for k in range(1, MAX_M)}
        results[name] = {"t1": t1, "tok_s": 1 / t1, "v": verify_cost,
                         "t_min1": min(times[name][1])}
    return results


@torch.inference_mode()
def measure_invariance(model, context_ids) -> dict:
    num_new = 1 + sum(VERIFY_CHUNKS)
    cache, logits = prefilled_cache(model, context_ids)
    tokens, sequential = [], []
    for _ in range(num_new):
        sequential.append(logits.float())
        tokens.append(int(logits.argmax()))
        logits = forward(model, torch.tensor([[tokens[-1]]]), cache)[-1]
    sequential = torch.stack(sequential)
    cache, first = prefilled_cache(model, context_ids)
    rows, start = [first.float()[None]], 0
    for size in VERIFY_CHUNKS:
        rows.append(forward(model, torch.tensor([tokens[start:start + size]]), cache).float())
        start += size
    verified = torch.cat(rows)
    return {
        "bitwise": bool(torch.equal(verified, sequential)),
        "max_abs_diff": (verified - sequential).abs().max().item(),
        "rows_differing": int((verified != sequential).any(dim=-1).sum()),
        "argmax_agree": int((verified.argmax(-1) == sequential.argmax(-1)).sum()),
        "rows": num_new,
    }


@torch.inference_mode()
def measure_accuracy(forms, text_ids) -> dict[str, dict]:
    reference = forms["fp32"](text_ids).logits[0].float() if "fp32" in forms else None
    results = {}
    for name, model in forms.items():
        if reference is None or name in ("fp32", "fp32-rows"):
            continue
        logits = model(text_ids).logits[0].float()
        log_p_ref = torch.log_softmax(reference, -1)
        log_p = torch.log_softmax(logits, -1)
        kl = (log_p_ref.exp() * (log_p_ref - log_p)).sum(-1).mean().item()
        agree = (logits.argmax(-1) == reference.argmax(-1)).float().mean().item()
        results[name] = {"top1_agree": agree, "kl": kl}
    return results


def machine_line() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (f"{cpu}, {os.cpu_count()} cores ({torch.backends.cpu.get_cpu_capability()}), "
            f"torch {torch.__version__}, {torch.get_num_threads()} threads, {platform.python_version()}")


def benchmark_model(label, path, wanted, rounds, log):
    log(f"loading {label}: {path}")
    tokenizer, model = load_fp32(path)
    context_ids = tokenizer(CONTEXT_TEXT, return_tensors="pt").input_ids
    text_ids = tokenizer(ACCURACY_TEXT, return_tensors="pt").input_ids
    forms = make_forms(model, wanted)
    log(f"  forms: {', '.join(forms)}; context {context_ids.shape[1]} tokens, "
        f"accuracy text {text_ids.shape[1]} tokens")
    invariance = {}
    for name, form in forms.items():
        invariance[name] = measure_invariance(form, context_ids)
        log(f"  invariance {name}: {invariance[name]}")
    if "int8-row" in forms:  # the same int8 layers with transformers' sdpa attention
        form = forms["int8-row"]
        form.set_attn_implementation("sdpa")
        invariance["int8-row, sdpa attention"] = measure_invariance(form, context_ids)
        log(f"  invariance int8-row with sdpa: {invariance['int8-row, sdpa attention']}")
        use_batch_invariant_attention(form)
    accuracy = measure_accuracy(forms, text_ids)
    log(f"  accuracy: {accuracy}")
    speed = measure_speed(forms, context_ids, rounds, log)
    del forms, model
    gc.collect()
    return {"label": label, "path": path, "context": context_ids.shape[1],
            "text": text_ids.shape[1], "speed": speed, "invariance": invariance,
            "accuracy": accuracy}


def render(results, command) -> str:
    lines = ["# Precision forms on CPU: speed, verify cost, accuracy, batch invariance", "",
             f"Command: `{command}`", "",
             f"Date: {datetime.date.today().isoformat()}. Machine: {machine_line()}.", "",
             "t(m): one forward of m tokens over a KV cache of the context; tok/s = 1/t(1); "
             "v(k) = t(k+1)/t(1), median of per-round ratios. Invariant: the logits of 16 greedy "
             "tokens decoded one at a time equal, bit for bit, those of verify forwards of "
             f"{', '.join(map(str, VERIFY_CHUNKS))} tokens. Accuracy: teacher-forced over a text, "
             "against fp32.", ""]
    for result in results:
        lines += [f"## {result['label']} (`{result['path']}`)", "",
                  f"Context {result['context']} tokens; accuracy text {result['text']} tokens.", "",
                  "| form | tok/s | t(1) ms | " + " | ".join(f"v({k})" for k in range(1, MAX_M))
                  + " | invariant | max abs diff | argmax agree | top-1 vs fp32 | KL vs fp32 |",
                  "|---" * (MAX_M + 8) + "|"]
        for name, speed in result["speed"].items():
            inv = result["invariance"][name]
            acc = result["accuracy"].get(name)
            lines.append(
                f"| {name} | {speed['tok_s']:.1f} | {speed['t1'] * 1e3:.0f} | "
                + " | ".join(f"{speed['v'][k]:.2f}" for k in range(1, MAX_M))
                + f" | {'yes' if inv['bitwise'] else 'no'} | {inv['max_abs_diff']:.2g} | "
                f"{inv['argmax_agree']}/{inv['rows']} | "
                + (f"{acc['top1_agree'] * 100:.1f}% | {acc['kl']:.4f} |" if acc else "ref | 0 |"))
        for name, inv in result["invariance"].items():
            if name not in result["speed"]:
                lines.append(f"| {name} | | | " + " | " * (MAX_M - 1)
                             + f" {'yes' if inv['bitwise'] else 'no'} | {inv['max_abs_diff']:.2g} | "
                             f"{inv['argmax_agree']}/{inv['rows']} | | |")
        lines.append("")
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="target: HF folder or .gguf file")
    parser.add_argument("--draft", help="draft: HF folder or .gguf file (measured after the target)")
    parser.add_argument("--forms", default="fp32,fp32-rows,bf16,int8-dyn,int8-row,int8-row-fp32head")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--out", default=str(Path(__file__).with_name("precision.md")))
    args = parser.parse_args(argv)
    wanted = args.forms.split(",")
    command = "python benchmarks/precision.py " + " ".join(sys.argv[1:] if argv is None else argv)

    def log(message):
        print(message, flush=True)

    results = [benchmark_model("target", args.model, wanted, args.rounds, log)]
    if args.draft:
        results.append(benchmark_model("draft", args.draft, wanted, args.rounds, log))
    text = render(results, command)
    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
