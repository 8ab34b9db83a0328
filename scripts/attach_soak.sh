#!/usr/bin/env bash
# Attaches to examples/service.rs 1,000 times and prints its resident memory (VmRSS) as it
# goes: every attach takes the flight recorder's window (`--duration 0`), every tenth a live
# window of 50 ms too, a few clients leave mid-transfer. The program's memory must stay flat:
# the script fails when VmRSS after the last attach exceeds VmRSS after the first 100 by more
# than SOAK_MAX_GROWTH_KIB (8192 by default). Linux only (/proc); skipped elsewhere.
#
#   scripts/attach_soak.sh                    # builds the example and the CLI (debug)
#   SOAK_ATTACHES=200 scripts/attach_soak.sh
set -euo pipefail

if [[ ! -r /proc/self/status ]]; then
    echo "skipped: needs Linux's /proc"
    exit 0
fi
cd "$(dirname "$0")/.."
attaches=${SOAK_ATTACHES:-1000}
max_growth=${SOAK_MAX_GROWTH_KIB:-8192}
cargo build -q --example service -p tickscope
cargo build -q -p tickscope-cli
target=${CARGO_TARGET_DIR:-target}
runtime=$(mktemp -d)
chmod 700 "$runtime"
export XDG_RUNTIME_DIR=$runtime
"$target/debug/examples/service" 2>/dev/null &
service=$!
trap 'kill "$service" 2>/dev/null; rm -rf "$runtime"' EXIT
for _ in $(seq 50); do
    [[ -S "$runtime/tickscope/$service.sock" ]] && break
    sleep 0.1
done
rss() { awk '/^VmRSS/ { print $2 }' "/proc/$service/status"; }
echo "attach  VmRSS_KiB"
echo "0       $(rss)"
at_100=
for i in $(seq "$attaches"); do
    if (( i % 10 == 0 )); then
        duration=50ms
    else
        duration=0
    fi
    if (( i % 100 == 50 )); then
        # A client that leaves mid-transfer (killed while the live window runs).
        "$target/debug/tickscope" -q record --pid "$service" --duration 10s -o "$runtime/x.tscope" &
        client=$!
        sleep 0.05
        kill -9 "$client" 2>/dev/null || true
        wait "$client" 2>/dev/null || true
    fi
    "$target/debug/tickscope" -q record --pid "$service" --duration "$duration" -o "$runtime/x.tscope"
    if (( i % 100 == 0 )); then
        now=$(rss)
        echo "$i     $now"
        [[ -z "$at_100" ]] && at_100=$now
    fi
done
kill -0 "$service"
last=$(rss)
growth=$(( last - ${at_100:-$last} ))
echo "growth after the first 100 attaches: ${growth} KiB (bound ${max_growth} KiB)"
(( growth <= max_growth ))
