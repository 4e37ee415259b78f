#!/usr/bin/env bash
# Medusa and EAGLE heads trained here, benched beside the draft model and prompt lookup:
#   bash benchmarks/heads.sh smollm2   # SmolLM2-135M: ngram, medusa, eagle
#   bash benchmarks/heads.sh qwen      # Qwen2.5-Coder 1.5B (+ 0.5B draft): draft, ngram, medusa, eagle
#   bash benchmarks/heads.sh tiny      # the smollm2 run at toy sizes, into $SPECTUI_HEADS_OUT (the suite's)
# Writes benchmarks/reports/bench-heads-<pair>.md, its JSON and plots under benchmarks/bench/.
#
# Beside the target's replies to the training prompts (the full suite less the quick one
# the bench runs), the heads read local text: the Python sources of `rich` from this
# virtualenv and Node.js's API docs from Debian's nodejs package (code and prose, as the
# workloads are). Nothing is downloaded.
set -euo pipefail
pair="${1:?usage: bash benchmarks/heads.sh smollm2|qwen|tiny}"
text_dir="${SPECTUI_HEADS_TEXT:-${TMPDIR:-/tmp}/spectui-heads-text}"
mkdir -p "$text_dir"
rich_dir="$(python -c 'import pathlib, rich; print(pathlib.Path(rich.__file__).parent)')"
node_docs=/usr/share/doc/nodejs/api

train_extra=(); bench_extra=(--repeats 2)
case "$pair" in
  smollm2) model=smollm2-135m; methods=ngram,medusa,eagle; ks=0,2,4; max_tokens=64; text_bytes=150000
           medusa_steps=800; eagle_steps=800 ;;
  # 1.5B on two cores: less text (a float32 forward of 256 tokens is ~8 s here), one k, shorter replies.
  qwen)    model=qwen2.5-coder-1.5b; methods=draft,ngram,medusa,eagle; ks=0,3; max_tokens=48; text_bytes=16000
           medusa_steps=600; eagle_steps=600 ;;
  # Seconds, not a measurement: every step of the script runs (tests/test_benchmark_scripts.py).
  tiny)    model=smollm2-135m; methods=ngram,medusa,eagle; ks=0,2; max_tokens=6; text_bytes=2000
           medusa_steps=2; eagle_steps=2
           train_extra=(--suite quick --max-new-tokens 4); bench_extra=(--categories json --repeats 1) ;;
  *) echo "unknown pair $pair: smollm2, qwen or tiny" >&2; exit 2 ;;
esac
out_dir="benchmarks"
heads_root="${SPECTUI_HEADS_DIR:-$HOME/.cache/spectui/heads}"
if [ "$pair" = tiny ]; then  # toy heads and numbers: never beside the real ones
  out_dir="${SPECTUI_HEADS_OUT:?the tiny pair writes into \$SPECTUI_HEADS_OUT, never into benchmarks/}"
  heads_root="$out_dir/heads"
  mkdir -p "$out_dir/bench" "$out_dir/reports"
fi

# (Files named _* are left out: one of them is a 140 KB table of emoji names.)
head -c "$text_bytes" < <(cat "$rich_dir"/[a-z]*.py) > "$text_dir/code-$pair.txt"
if [ -d "$node_docs" ]; then
  head -c "$text_bytes" < <(cat "$node_docs"/{url,process,child_process,http}.md) > "$text_dir/docs-$pair.txt"
else
  : > "$text_dir/docs-$pair.txt"  # no Node docs here: the code and the replies alone
fi
texts=(--text "$text_dir/code-$pair.txt")
[ -s "$text_dir/docs-$pair.txt" ] && texts+=(--text "$text_dir/docs-$pair.txt")

# Heads already trained there are kept (delete the folder to train them again).
train() {  # kind steps
  [ -f "$heads_root/$model-$1/heads.json" ] || \
    spectui heads train --model "$model" --kind "$1" --steps "$2" "${texts[@]}" "${train_extra[@]}" --out "$heads_root/$model-$1"
}
train medusa "$medusa_steps"
train eagle "$eagle_steps"
[ "${SPECTUI_HEADS_TRAIN_ONLY:-0}" = 1 ] && exit 0

# The anchor k is the largest k, so it adds no arms of its own (a 1.5B case costs ~25 s an arm here).
spectui bench --model "$model" --engines spectui --methods "$methods" --k "$ks" --anchor-k "${ks##*,}" \
  --max-tokens "$max_tokens" "${bench_extra[@]}" \
  --heads "$heads_root/$model-medusa" --heads "$heads_root/$model-eagle" \
  --json "$out_dir/bench/heads-$pair.json" --plots "$out_dir/bench/heads-$pair" \
  --markdown "$out_dir/reports/bench-heads-$pair.md"
