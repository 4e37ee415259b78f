#!/usr/bin/env bash
# `spectui chat --engine server` against a plain OpenAI-compatible server (no token ids, no
# vLLM metrics: llama-server, Ollama's /v1, LM Studio), in tmux, as a new user would run it.
# Prints the screen after one reply. Usage: benchmarks/tmux_plain_server.sh [PORT] [--llama-counts D,A]
#   (from the repository root, with the venv active; nothing outside a scratch folder is touched)
set -euo pipefail

PORT="${1:-18765}"
shift || true
SCRATCH="$(mktemp -d /tmp/spectui-tmux.XXXXXX)"
SESSION="spectui-plain-$$"
# A tmux server of its own (-L): the chat gets this shell's environment (PYTHONPATH, the venv),
# not that of a server someone else started, and nothing of theirs is touched.
tmux() { command tmux -L "$SESSION" "$@"; }
echo "\$ benchmarks/tmux_plain_server.sh ${PORT} $*"

python tests/fake_openai_server.py --port "$PORT" --delay 0.05 "$@" >"$SCRATCH/server.log" 2>&1 &
SERVER_PID=$!
cleanup() {
    tmux kill-server 2>/dev/null || true
    kill "$SERVER_PID" 2>/dev/null || true
    rm -rf "$SCRATCH"
}
trap cleanup EXIT

for _ in $(seq 50); do grep -q "server at" "$SCRATCH/server.log" && break; sleep 0.1; done

tmux new-session -d -s "$SESSION" -x 120 -y 30 \
    "SPECTUI_DATA_DIR=$SCRATCH/data SPECTUI_CONFIG_DIR=$SCRATCH/config spectui chat --engine server --server http://127.0.0.1:$PORT"

wait_for() {  # wait_for TEXT: until the screen shows it (at most 60 s)
    for _ in $(seq 600); do
        tmux capture-pane -t "$SESSION" -p | grep -q "$1" && return 0
        sleep 0.1
    done
    echo "timed out waiting for: $1" >&2
    tmux capture-pane -t "$SESSION" -p >&2
    return 1
}

wait_for "● ready"
tmux send-keys -t "$SESSION" "What is speculative decoding?" Enter
wait_for " tokens in "
sleep 0.5
tmux capture-pane -t "$SESSION" -p
