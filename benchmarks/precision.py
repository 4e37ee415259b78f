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
equal, how far apart, do the argmaxes agree. Accuracy: logits over a ~300-token text read as a
target reads it (64 tokens, then chunks of 9) against one fp32 forward: top-1 agreement and
mean KL(fp32 || form) over the chunked tokens.
"""

from __future__ import annotations

import argparse
import copy
import datetime
import gc
import json
import os
import platform
import random
import statistics
import sys
import tempfile
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

# Greedy acceptance of a draft: its argmax against the target's own greedy continuations.
ACCEPTANCE_PROMPTS = (
    "Explain what this function does and how it can fail:\n\n" + CONTEXT_TEXT.split("\n\n\n")[0],
    "Write a Python function is_palindrome(text) that ignores case and punctuation, "
    "with a docstring and two doctests.",
)
ACCEPTANCE_NEW_TOKENS = 64

VERIFY_CHUNKS = (9, 2, 4)  # verify forwards of k + 1 = 9, 2 and 4 tokens over 15 decoded tokens
MAX_M = 9  # t(m) for m = 1..9, so v(k) for k = 1..8


def load(path: str, dtype=None):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model_path = Path(path)
    if model_path.suffix == ".gguf":
        kwargs = {"gguf_file": model_path.name}
        folder = str(model_path.parent)
    else:
        kwargs, folder = {}, str(model_path)
    tokenizer = AutoTokenizer.from_pretrained(folder, **kwargs)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype or torch.float32, **kwargs).eval()
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
    """fp32 Linear computed one row at a time: M=1 kernels only, so batch-invariant.

    Forwards of more than `max_rows` rows (a prefill, which the baseline and the speculative
    run share) stay batched, to keep this benchmark's prefills affordable.
    """

    def __init__(self, linear: nn.Linear, max_rows: int = 32):
        super().__init__()
        self.linear = linear
        self.max_rows = max_rows

    def forward(self, x):
        rows = x.reshape(-1, x.shape[-1])
        if rows.shape[0] > self.max_rows:
            return self.linear(x)
        out = torch.cat([self.linear(rows[i:i + 1]) for i in range(rows.shape[0])])
        return out.reshape(*x.shape[:-1], -1)


KNOWN_FORMS = ("fp32", "fp32-rows", "bf16", "int8-dyn", "int8-row", "int8-row-fp32head")
# Forms measured together (interleaved) in one phase; each phase loads the model afresh, so no
# more than one fp32 copy (plus a few int8 ones) is in memory at a time. int8-row is in every
# phase as the common yardstick.
DEFAULT_PHASES = "fp32,fp32-rows,int8-row;bf16,int8-dyn,int8-row;int8-row,int8-row-fp32head"


def build_form(model: nn.Module, form: str) -> nn.Module:
    """`form` made from the fp32 `model`, sharing every tensor it does not convert."""
    from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

    if form == "fp32":
        return model
    if form == "fp32-rows":
        rows = copy_sharing_tensors(model)
        for name, module in list(rows.named_modules()):
            if isinstance(module, nn.Linear):
                parent, _, child = name.rpartition(".")
                setattr(rows.get_submodule(parent) if parent else rows, child, RowByRowLinear(module))
        return use_batch_invariant_attention(rows)
    if form == "int8-dyn":
        return quantize_dynamic(copy_sharing_tensors(model), {nn.Linear: per_channel_dynamic_qconfig},
                                dtype=torch.qint8, inplace=True)
    if form == "int8-row":
        return use_batch_invariant_attention(quantize_int8(copy_sharing_tensors(model)))
    if form == "int8-row-fp32head":
        return use_batch_invariant_attention(
            quantize_int8(copy_sharing_tensors(model), skip=("lm_head",)))
    raise SystemExit(f"unknown form {form!r}; known: {', '.join(KNOWN_FORMS)}")


def load_phase(path: str, wanted: list[str]):
    """Load the model once in fp32, build the phase's forms, return them and fp32 reference logits.

    bf16 is loaded from disk in bf16 after the fp32 copy is dropped (when the phase does not
    measure fp32 itself), so a phase never holds fp32 and bf16 copies of all weights at once.
    """
    tokenizer, model = load(path)
    text_ids = tokenizer(ACCURACY_TEXT, return_tensors="pt").input_ids
    with torch.inference_mode():
        reference = model(text_ids).logits[0, ACCURACY_PREFILL:].float()
    built = {form: build_form(model, form) for form in wanted if form != "bf16"}
    if "bf16" in wanted:
        del model
        gc.collect()
        built["bf16"] = load(path, torch.bfloat16)[1]
    gc.collect()
    return tokenizer, {form: built[form] for form in wanted}, reference


def forward(model, input_ids, cache):
    from spectui.engines.torch_backend.kv import cache_argument  # `cache` or `past_key_values`, by version

    return model(input_ids, use_cache=True, **{cache_argument(model): cache}).logits[0]


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
        log(f"  round {round_index + 1}/{rounds} (load {os.getloadavg()[0]:.1f}): " + ", ".join(
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


NOTES_MARKER = "<!-- notes: kept when the script rewrites the tables above -->"
ACCURACY_PREFILL = 64  # tokens read in one forward, not scored; the rest in verify-sized chunks


@torch.inference_mode()
def chunked_logits(model, text_ids, chunk: int = MAX_M):
    """Logits for text_ids[ACCURACY_PREFILL:] computed the way a target sees them: k+1 at a time."""
    from transformers import DynamicCache

    cache = DynamicCache(config=model.config)
    forward(model, text_ids[:, :ACCURACY_PREFILL], cache)
    rows = [forward(model, text_ids[:, start:start + chunk], cache).float()
            for start in range(ACCURACY_PREFILL, text_ids.shape[1], chunk)]
    return torch.cat(rows)


@torch.inference_mode()
def measure_accuracy(forms, text_ids, reference) -> dict[str, dict]:
    log_p_ref = torch.log_softmax(reference, -1)
    results = {}
    for name, model in forms.items():
        if name == "fp32-rows":  # the fp32 weights, one row at a time: slow, and as fp32
            continue
        logits = chunked_logits(model, text_ids)
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


def prompt_ids(tokenizer, prompt: str):
    if getattr(tokenizer, "chat_template", None):
        ids = tokenizer.apply_chat_template([{"role": "user", "content": prompt}],
                                            add_generation_prompt=True, return_tensors="pt")
        return ids if isinstance(ids, torch.Tensor) else ids["input_ids"]
    return tokenizer(prompt, return_tensors="pt").input_ids


@torch.inference_mode()
def greedy_continuations(model, tokenizer) -> list[tuple[int, torch.Tensor]]:
    """(prompt length, prompt + greedy tokens) for each acceptance prompt, decoded by `model`."""
    sequences = []
    for prompt in ACCEPTANCE_PROMPTS:
        ids = prompt_ids(tokenizer, prompt)
        cache, logits = prefilled_cache(model, ids)
        tokens = []
        for _ in range(ACCEPTANCE_NEW_TOKENS):
            tokens.append(int(logits.argmax()))
            if tokens[-1] == tokenizer.eos_token_id:
                break
            logits = forward(model, torch.tensor([[tokens[-1]]]), cache)[-1]
        sequences.append((ids.shape[1], torch.cat([ids, torch.tensor([tokens])], dim=1)))
    return sequences


@torch.inference_mode()
def greedy_acceptance(draft, sequences) -> float:
    """Share of the target's greedy tokens that the draft's argmax (decoding one at a time) hits."""
    hits = total = 0
    for prompt_length, ids in sequences:
        cache, logits = prefilled_cache(draft, ids[:, :prompt_length])
        for position in range(prompt_length, ids.shape[1]):
            hits += int(logits.argmax()) == int(ids[0, position])
            total += 1
            logits = forward(draft, ids[:, position:position + 1], cache)[-1]
    return hits / total


def run_phase(path, wanted, rounds, log, target_sequences=None, acceptance_done=()):
    """Measure the forms of one phase; returns a dict of the measurements."""
    tokenizer, forms, reference = load_phase(path, wanted)
    context_ids = tokenizer(CONTEXT_TEXT, return_tensors="pt").input_ids
    text_ids = tokenizer(ACCURACY_TEXT, return_tensors="pt").input_ids
    log(f"  phase {', '.join(forms)}: context {context_ids.shape[1]} tokens, "
        f"accuracy text {text_ids.shape[1]} tokens")
    invariance = {}
    for name, form in forms.items():
        invariance[name] = measure_invariance(form, context_ids)
        log(f"  invariance {name}: {invariance[name]}")
    if "int8-row" in forms and "fp32" in forms:  # the int8 layers with transformers' sdpa attention
        form = forms["int8-row"]
        form.set_attn_implementation("sdpa")
        invariance["int8-row, sdpa attention"] = measure_invariance(form, context_ids)
        log(f"  invariance int8-row with sdpa: {invariance['int8-row, sdpa attention']}")
        use_batch_invariant_attention(form)
    accuracy = measure_accuracy(forms, text_ids, reference)
    log(f"  accuracy: {accuracy}")
    sequences, acceptance = None, {}
    if target_sequences is None and "int8-row" in forms:
        sequences = greedy_continuations(forms["int8-row"], tokenizer)
        log(f"  greedy continuations of the int8-row target: {[ids.shape[1] - n for n, ids in sequences]}")
    if target_sequences is not None:
        for name, form in forms.items():
            if name not in acceptance_done:
                acceptance[name] = greedy_acceptance(form, target_sequences)
                log(f"  greedy acceptance of {name} against the int8-row target: {acceptance[name]:.3f}")
    speed = measure_speed(forms, context_ids, rounds, log)
    del forms
    gc.collect()
    return {"forms": wanted, "context": context_ids.shape[1], "text": text_ids.shape[1],
            "speed": speed, "invariance": invariance, "accuracy": accuracy,
            "sequences": sequences, "acceptance": acceptance}


class PhaseStore:
    """Finished phases kept in a JSON file, so a run that gets killed resumes where it stopped
    (the machine is shared; a phase of the 1.5B model takes 10-20 minutes)."""

    def __init__(self, path: str | None, rounds: int):
        self.path = Path(path) if path else None
        self.rounds = rounds
        self.done = json.loads(self.path.read_text()) if self.path and self.path.exists() else {}

    def key(self, model_path: str, wanted, target_sequences) -> str:
        return json.dumps([model_path, wanted, self.rounds, target_sequences is not None])

    def get(self, key):
        result = self.done.get(key)
        if result is None:
            return None
        for measurements in result["speed"].values():  # JSON turned the int keys into strings
            measurements["v"] = {int(k): v for k, v in measurements["v"].items()}
        if result["sequences"] is not None:
            result["sequences"] = [(n, torch.tensor(ids)) for n, ids in result["sequences"]]
        return result

    def put(self, key, result):
        if self.path is None:
            return
        stored = dict(result)
        if stored["sequences"] is not None:
            stored["sequences"] = [(n, ids.tolist()) for n, ids in stored["sequences"]]
        self.done[key] = stored
        self.path.write_text(json.dumps(self.done))


def benchmark_model(label, path, phases, rounds, log, store, target_sequences=None):
    log(f"{label}: {path}")
    results, acceptance = [], {}
    for wanted in phases:
        key = store.key(path, wanted, target_sequences)
        result = store.get(key)
        if result is None:
            result = run_phase(path, wanted, rounds, log, target_sequences, acceptance_done=acceptance)
            store.put(key, result)
        else:
            log(f"  phase {', '.join(wanted)}: done in an earlier run ({store.path})")
        acceptance.update(result["acceptance"])
        results.append(result)
    sequences = next((r["sequences"] for r in results if r["sequences"] is not None), None)
    return {"label": label, "path": path, "phases": results, "sequences": sequences,
            "acceptance": acceptance, "speed": first_occurrences(results)}


def first_occurrences(phase_results) -> dict[str, dict]:
    speed = {}
    for result in phase_results:
        for name, measured in result["speed"].items():
            speed.setdefault(name, measured)
    return speed


def render(results, command) -> str:
    lines = ["# Precision forms on CPU: speed, verify cost, accuracy, batch invariance", "",
             f"Command: `{command}`", "",
             f"Date: {datetime.date.today().isoformat()}. Machine: {machine_line()}.", "",
             "Forms in one table were loaded together and measured interleaved; each table is a "
             "fresh load (at most one fp32 copy in memory), int8-row is in each as the yardstick. "
             "t(m): one forward of m tokens over a KV cache of the context; tok/s = 1/t(1); "
             "v(k) = t(k+1)/t(1), median of per-round ratios. Invariant: the logits of 16 greedy "
             "tokens decoded one at a time equal, bit for bit, those of verify forwards of "
             f"{', '.join(map(str, VERIFY_CHUNKS))} tokens. Accuracy: a text read in verify chunks of "
             f"{MAX_M} tokens after a {ACCURACY_PREFILL}-token prefill, against one fp32 forward.", ""]
    for result in results:
        first = result["phases"][0]
        lines += [f"## {result['label']} (`{result['path']}`)", "",
                  f"Context {first['context']} tokens; accuracy text {first['text']} tokens.", ""]
        for number, phase in enumerate(result["phases"], 1):
            lines += [f"Phase {number}:", "",
                      "| form | tok/s | t(1) ms | " + " | ".join(f"v({k})" for k in range(1, MAX_M))
                      + " | invariant | max abs diff | argmax agree | top-1 vs fp32 | KL vs fp32 |",
                      "|---" * (MAX_M + 8) + "|"]
            for name, speed in phase["speed"].items():
                inv = phase["invariance"][name]
                acc = phase["accuracy"].get(name, {"top1_agree": float("nan"), "kl": float("nan")})
                lines.append(
                    f"| {name} | {speed['tok_s']:.1f} | {speed['t1'] * 1e3:.0f} | "
                    + " | ".join(f"{speed['v'][k]:.2f}" for k in range(1, MAX_M))
                    + f" | {'yes' if inv['bitwise'] else 'no'} | {inv['max_abs_diff']:.2g} | "
                    f"{inv['argmax_agree']}/{inv['rows']} | {acc['top1_agree'] * 100:.1f}% | "
                    f"{acc['kl']:.4f} |")
            for name, inv in phase["invariance"].items():
                if name not in phase["speed"]:
                    lines.append(f"| {name} | | | " + " | " * (MAX_M - 1)
                                 + f" {'yes' if inv['bitwise'] else 'no'} | {inv['max_abs_diff']:.2g} | "
                                 f"{inv['argmax_agree']}/{inv['rows']} | | |")
            lines.append("")
    if len(results) == 2 and results[1]["acceptance"]:
        lines += render_speedups(*results)
    return "\n".join(lines) + "\n"


def render_speedups(target, draft) -> list[str]:
    """Predicted speedup S = E(alpha, k) / (k c + v(k)) from the numbers above (spectui.core.theory)."""
    from spectui.core.theory import best_k

    lines = ["## Draft forms against the int8-row target", "",
             f"alpha: share of the int8-row target's greedy tokens ({len(target['sequences'])} "
             f"prompts, up to {ACCEPTANCE_NEW_TOKENS} tokens each, chat template) that the draft's "
             "argmax hits, decoding one token at a time. c = t_draft(1) / t_target(1) (measured in "
             "the two phases above, so only roughly comparable). Best k and S from "
             "spectui.core.theory.best_k with the target's measured v(k), k <= 8. Speedup is against "
             "the same target decoding alone.", "",
             "| target | draft form | alpha | c | best k | predicted S |", "|---|---|---|---|---|---|"]
    for target_form in ("int8-row", "fp32", "int8-dyn"):
        if target_form not in target["speed"]:
            continue
        target_speed = target["speed"][target_form]
        v = target_speed["v"]
        for draft_form, alpha in draft["acceptance"].items():
            draft_cost = draft["speed"][draft_form]["t1"] / target_speed["t1"]
            k, predicted = best_k(alpha, draft_cost, lambda k: 1.0 if k == 0 else v[k], k_max=MAX_M - 1)
            lines.append(f"| {target_form} | {draft_form} | {alpha:.3f} | {draft_cost:.2f} | {k} | "
                         f"{predicted:.2f} |")
    lines += ["", "(alpha is measured against the int8-row target only; the fp32 and int8-dyn "
              "target rows reuse it as an approximation.)", ""]
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="target: HF folder or .gguf file")
    parser.add_argument("--draft", help="draft: HF folder or .gguf file (measured after the target)")
    parser.add_argument("--phases", default=DEFAULT_PHASES,
                        help="forms measured together, phases separated by ';' "
                             f"(forms: {', '.join(KNOWN_FORMS)})")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's choice)")
    parser.add_argument("--out", default=str(Path(__file__).parent / "reports" / "precision.md"))
    parser.add_argument("--state", default=str(Path(tempfile.gettempdir()) / "spectui-precision.json"),
                        help="finished phases are kept here; a rerun with the same arguments "
                             "resumes ('' to disable)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    phases = [phase.split(",") for phase in args.phases.split(";")]
    for form in (form for phase in phases for form in phase):
        if form not in KNOWN_FORMS:
            parser.error(f"unknown form {form!r}; known: {', '.join(KNOWN_FORMS)}")
    command = "python benchmarks/precision.py " + " ".join(sys.argv[1:] if argv is None else argv)

    def log(message):
        print(message, flush=True)

    store = PhaseStore(args.state, args.rounds)
    results = [benchmark_model("target", args.model, phases, args.rounds, log, store)]
    if args.draft:
        results.append(benchmark_model("draft", args.draft, phases, args.rounds, log, store,
                                       target_sequences=results[0]["sequences"]))
    text = render(results, command)
    out = Path(args.out)
    # hand-written notes below the marker survive a rerun
    old = out.read_text() if out.exists() else ""
    if NOTES_MARKER in old:
        text += "\n" + old[old.index(NOTES_MARKER):]
    out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
