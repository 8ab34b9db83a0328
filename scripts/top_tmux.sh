#!/usr/bin/env bash
# `tickscope top --pid` checked through tmux: starts examples/service.rs (which writes its own
# request count four times a second), runs `tickscope top` on it in a detached tmux pane,
# switches to "since attach" (key `w`), captures the screen after a few seconds, and checks
# that it shows the service's four scope names, each at a call rate within 10 % of the
# service's own count over the same seconds; then quits with `q` and checks that top exited.
# Prints the captured screen. Skipped (exit 0) without tmux.
#
#   scripts/top_tmux.sh              # TOP_SECONDS=6 by default
#
# TICKSCOPE: the command to run (as .ci/run gives it its build); without it, built here.
set -euo pipefail

if ! command -v tmux >/dev/null 2>&1; then
    echo "skipped: tmux is not installed"
    exit 0
fi
cd "$(dirname "$0")/.."
seconds=${TOP_SECONDS:-6}
cargo build -q --example service -p tickscope
target=${CARGO_TARGET_DIR:-target}
if [ -z "${TICKSCOPE:-}" ]; then
    cargo build -q -p tickscope-cli
    TICKSCOPE=$target/debug/tickscope
fi
work=$(mktemp -d)
chmod 700 "$work"
export XDG_RUNTIME_DIR=$work
session="tickscope-top-$$"
"$target/debug/examples/service" --count-file "$work/counts" 2>/dev/null &
service=$!
cleanup() {
    tmux kill-session -t "$session" 2>/dev/null || true
    kill "$service" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
for _ in $(seq 50); do
    [[ -S "$work/tickscope/$service.sock" ]] && break
    sleep 0.1
done
now_ms() { date +%s%3N; }
# The service's request count at a Unix millisecond: its last line at or before it.
count_at() { awk -v t="$1" '$1 <= t { c = $2 } END { print c + 0 }' "$work/counts"; }

tmux new-session -d -s "$session" -x 120 -y 20 \
    "XDG_RUNTIME_DIR=$work $TICKSCOPE top --pid $service; echo top-exited-\$?; sleep 5"
# The first window arrives half a second after the attach.
for _ in $(seq 50); do
    tmux capture-pane -p -t "$session" | grep -q "1 windows" && break
    sleep 0.05
done
attached=$(( $(now_ms) - 500 ))
tmux send-keys -t "$session" w
sleep "$seconds"
screen=$(tmux capture-pane -p -t "$session")
captured=$(now_ms)
echo "$screen"
span=$(grep -o 'since attach [0-9.]* s' <<<"$screen" | awk '{ print $3 }')
windows=$(grep -o '| [0-9]* windows' <<<"$screen" | awk '{ print $2 }')
# The program's own rate over the seconds the screen covers: its windows end at the last
# window before the capture.
end=$(( attached + windows * 500 ))
own=$(awk -v a="$(count_at "$attached")" -v b="$(count_at "$end")" -v s="$(( end - attached ))" \
    'BEGIN { printf "%.1f", (b - a) * 1000 / s }')
echo "since attach: ${span} s over ${windows} windows; the service's own rate over them: ${own}/s"
status=0
for name in request parse lookup respond; do
    rate=$(awk -v n="$name" '{ gsub("│", " ") } $1 == n { print $2 }' <<<"$screen")
    if [[ -z "$rate" ]]; then
        echo "FAIL: $name is not on the screen"
        status=1
        continue
    fi
    off=$(awk -v r="$rate" -v o="$own" 'BEGIN { d = (r - o) / o * 100; printf "%.1f", d }')
    echo "$name: ${rate}/s on screen, ${off} % from the service's own"
    if ! awk -v d="$off" 'BEGIN { exit !(d <= 10 && d >= -10) }'; then
        echo "FAIL: $name is more than 10 % off"
        status=1
    fi
done
tmux send-keys -t "$session" q
for _ in $(seq 50); do
    tmux capture-pane -p -t "$session" | grep -q "top-exited-0" && break
    sleep 0.1
done
if ! tmux capture-pane -p -t "$session" | grep -q "top-exited-0"; then
    echo "FAIL: top did not exit with 0 on q"
    status=1
fi
exit $status
