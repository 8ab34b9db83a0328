#!/usr/bin/env bash
# The regression gate of docs/ci.md, as a plain shell step: compares two captures with
# `tickscope diff --format markdown`, writes the Markdown to $OUT (default perf-diff.md, ready
# to post as a pull-request comment) and prints it, then exits as `diff` does: 0 no name
# regressed, 1 a name regressed, 2 the inputs cannot be judged (salvaged or truncated, no name
# in common, a --require'd name missing).
#
#   scripts/perf_gate.sh BASE.tscope NEW.tscope [diff options: --require NAME, --threshold 5%, ...]
#
# TICKSCOPE names the binary (default: `tickscope` on PATH).
set -uo pipefail
if [ $# -lt 2 ]; then
    echo "usage: $0 BASE.tscope NEW.tscope [tickscope diff options]" >&2
    exit 2
fi
tickscope=${TICKSCOPE:-tickscope}
out=${OUT:-perf-diff.md}
base=$1
new=$2
shift 2
"$tickscope" diff "$base" "$new" --format markdown "$@" >"$out"
code=$?
cat "$out"
case $code in
    0) echo "perf gate: no regression" ;;
    1) echo "perf gate: a scope regressed" >&2 ;;
    *) echo "perf gate: cannot judge these captures (exit $code)" >&2 ;;
esac
exit "$code"
