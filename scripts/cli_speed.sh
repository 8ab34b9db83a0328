#!/usr/bin/env bash
# Times the `tickscope` command as a process on the 10 M-event capture of the `cli_10m`
# bench (benches/capture.rs: 1.7 MB packed, 160 MB of records, 5 M scopes on 4 threads), for
# issue 15's targets:
# `tickscope table` at 30 M events/s or more (0.33 s), `tickscope convert` to Chrome JSON at
# 10 M scopes/s or more (0.5 s), into a file (synced, then renamed into place) and into
# /dev/null (through a symbolic link: the writing without the file system); issue 37's targets
# (one core: `table` at 60 M events/s, Chrome JSON at 15 M scopes/s, `.pftrace` at 30 M
# scopes/s) with ONE_CORE=1, which runs every case on one core (`taskset -c 0`).
#
#   scripts/cli_speed.sh [OLD_TICKSCOPE]
#
# With OLD_TICKSCOPE (another build of the command, say of main), each case runs both
# binaries, alternated round by round, under the same load: A/B. RUNS rounds a case (default
# 9); medians of the wall time (`date +%s%N`) and of the CPU time. The capture is written once
# into a temporary folder, or into TICKSCOPE_SPEED_DIR, where it is kept for the next run.
set -euo pipefail
cd "$(dirname "$0")/.."
old=${1:-}
runs=${RUNS:-9}
target=${CARGO_TARGET_DIR:-target}
dir=${TICKSCOPE_SPEED_DIR:-$(mktemp -d)}
mkdir -p "$dir"
capture=$dir/10m.tscope

cargo build --quiet --release -p tickscope-cli
new=$target/release/tickscope
if [ ! -s "$capture" ]; then
    # The bench's own generator, built with the release profile: it writes the file and exits.
    bench=$(cargo build --quiet --release --bench capture --message-format=json |
        sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -1)
    TICKSCOPE_CLI_CAPTURE=$capture "$bench"
fi
ln -sf /dev/null "$dir/null.json"
ln -sf /dev/null "$dir/null.pftrace"

pin=()
if [ "${ONE_CORE:-0}" = 1 ]; then
    command -v taskset >/dev/null || { echo "ONE_CORE=1 needs taskset" >&2; exit 1; }
    pin=(taskset -c 0)
fi
binaries=("$new")
[ -n "$old" ] && binaries=("$old" "$new")
echo "load: $(uptime)${pin:+ (one core: ${pin[*]})}"

# Runs `$@` with each binary in turn, $runs rounds (after a warm-up round), alternating the
# binaries within each round so that they share the machine's load, and prints per binary the
# median wall time and the median CPU time (user + system, from /usr/bin/time when present).
run_case() {
    local name=$1
    shift
    local log=$dir/$name.times
    : >"$log"
    for round in $(seq 0 "$runs"); do
        for bin in "${binaries[@]}"; do
            local t0 t1 cpu=0
            t0=$(date +%s%N)
            if [ -x /usr/bin/time ]; then
                cpu=$(/usr/bin/time -f '%U %S' "${pin[@]}" "$bin" "$@" 2>&1 >/dev/null | tail -1 |
                    awk '{ printf "%d", ($1 + $2) * 1000 }')
            else
                "${pin[@]}" "$bin" "$@" >/dev/null
            fi
            t1=$(date +%s%N)
            # Round 0 warms the page cache and the binaries.
            [ "$round" -gt 0 ] && echo "$bin $(((t1 - t0) / 1000000)) $cpu" >>"$log"
        done
    done
    for bin in "${binaries[@]}"; do
        local wall cpu
        wall=$(awk -v b="$bin" '$1 == b { print $2 }' "$log" | sort -n | sed -n "$(((runs + 1) / 2))p")
        cpu=$(awk -v b="$bin" '$1 == b { print $3 }' "$log" | sort -n | sed -n "$(((runs + 1) / 2))p")
        local all
        all=$(awk -v b="$bin" '$1 == b { printf "%s ", $2 }' "$log")
        echo "  $bin: median $wall ms wall, $cpu ms CPU (walls: $all)"
    done
}

echo "== table (10 M events)"
run_case table table "$capture"
echo "== table --by-thread"
run_case table_by_thread table "$capture" --by-thread
echo "== convert to Chrome JSON into /dev/null (5 M scopes)"
run_case convert_null convert "$capture" -o "$dir/null.json"
echo "== convert to Perfetto (.pftrace) into /dev/null (5 M scopes)"
run_case convert_pftrace convert "$capture" -o "$dir/null.pftrace"
echo "== convert to Chrome JSON into a file (synced and renamed into place)"
run_case convert_file convert "$capture" -o "$dir/out.json"
rm -f "$dir/out.json"
