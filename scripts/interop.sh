#!/usr/bin/env bash
# Checks our traces with independent consumers: the Perfetto trace processor (the engine behind
# ui.perfetto.dev). Skips cleanly (exit 0) when the validators are not installed.
#
#   scripts/interop.sh [VALIDATORS_DIR]     (default: ../shared/validators beside the repo)
set -euo pipefail
cd "$(dirname "$0")/.."
V=${1:-../shared/validators}
if [ ! -x "$V/check_trace.sh" ]; then
    echo "interop: skipped (no validators at $V)"
    exit 0
fi
if ! python3 "$V/validate_perfetto.py" --check-install >/dev/null 2>&1; then
    echo "interop: skipped (validators not installed: run $V/install.sh)"
    exit 0
fi

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cargo run --quiet --release --example quickstart -- "$out" > "$out/table.txt"
trace="$out/quickstart.json"
"$V/check_trace.sh" "$trace"

# The slice count, names, calls per name and nesting depth Perfetto reports must match the table.
python3 "$V/validate_perfetto.py" "$trace" --json \
    --sql "select name, count(*) as calls, max(depth) as depth from slice group by name order by name" \
    > "$out/sql.json"
python3 - "$out/table.txt" "$out/sql.json" <<'PY'
import json, re, sys
table = open(sys.argv[1]).read().split("\n\n")[0].splitlines()
expected = {}
for row in table[2:]:
    m = re.match(r"(\S+)\s+(\d+)\s", row)
    if m:
        expected[m.group(1)] = int(m.group(2))
doc, _ = json.JSONDecoder().raw_decode(open(sys.argv[2]).read())  # a verdict line follows
rows = doc["extra"][0]["rows"]
got = {r["name"]: int(r["calls"]) for r in rows}
depth = {r["name"]: int(r["depth"]) for r in rows}
assert got == expected, f"perfetto slices {got} != table {expected}"
want_depth = {"worker": 0, "parse": 1, "tokenize": 2, "checksum": 2, "report": 0}
assert depth == want_depth, f"depths {depth} != {want_depth}"
print(f"interop: perfetto agrees with the table: {sum(got.values())} slices, {len(got)} names, depths {depth}")
PY
