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

# Per name: slice count and deepest nesting, as Perfetto reads a trace.
by_name() {
    python3 "$V/validate_perfetto.py" "$1" --json \
        --sql "select name, category, count(*) as n, max(depth) as depth from slice group by name, category order by name, category" |
        python3 -c 'import json,sys; d,_=json.JSONDecoder().raw_decode(sys.stdin.read()); print(json.dumps(d["extra"][0]["rows"]))'
}

# Every trace the chrome_trace example writes is accepted, and the Unix-epoch (B/E, gzipped)
# and Kineto variants hold the same slices at the same depths as the default one.
cargo run --quiet --release --example chrome_trace -- "$out" > /dev/null
for f in chrome_trace.json chrome_trace.unix.json.gz chrome_trace.kineto.json chrome_trace.folded; do
    "$V/check_trace.sh" "$out/$f"
done
python3 - "$(by_name "$out/chrome_trace.json")" "$(by_name "$out/chrome_trace.unix.json.gz")" "$(by_name "$out/chrome_trace.kineto.json")" <<'PY'
import json, sys
plain, unix, kineto = (json.loads(a) for a in sys.argv[1:])
strip = lambda rows: sorted((r["name"], r["n"], r["depth"]) for r in rows)
assert strip(plain) == strip(unix), f"unix-epoch variant differs: {strip(unix)} != {strip(plain)}"
assert strip(plain) == strip(kineto), f"kineto variant differs: {strip(kineto)} != {strip(plain)}"
assert all(r["category"] == "cpu_op" for r in kineto), kineto
print(f"interop: chrome_trace variants agree: {strip(plain)}")
PY

# Async calls: Perfetto's async slices per name plus plain scopes equal the table's calls;
# polls are slices of their own category.
cargo run --quiet --release --example profile_attr -- "$out" > "$out/profile_attr.txt"
"$V/check_trace.sh" "$out/profile_attr.json"
python3 - "$out/profile_attr.txt" "$(by_name "$out/profile_attr.json")" <<'PY'
import json, re, sys
lines = open(sys.argv[1]).read().split("\n\n")[0].splitlines()
table = {}
for row in lines:
    m = re.match(r"(\S+)\s+(\d+)\s+\d", row)
    if m:
        table[m.group(1)] = int(m.group(2))
rows = json.loads(sys.argv[2])
calls = {}
for r in rows:
    if r["category"] in ("scope", "async"):
        calls[r["name"]] = calls.get(r["name"], 0) + r["n"]
assert calls == table, f"perfetto {calls} != table {table}"
asyncs = {r["name"]: r["n"] for r in rows if r["category"] == "async"}
assert asyncs.get("fetch") == 32 and asyncs.get("crawl") == 1, asyncs
print(f"interop: async calls agree with the table: {calls}")
PY

# Allocation tracking: Perfetto sees one `memory` counter track whose highest value is the
# peak live bytes the example computed, and one instant per recorded allocation and free.
cargo run --quiet --release --example allocations -- "$out" > "$out/allocations.txt"
"$V/check_trace.sh" "$out/allocations.json"
python3 "$V/validate_perfetto.py" "$out/allocations.json" --json \
    --sql "select t.name as track, count(*) as n, max(c.value) as peak from counter c join counter_track t on c.track_id = t.id group by t.name" \
    --sql "select name, count(*) as n from slice where category = 'memory' group by name order by name" \
    > "$out/allocations.sql.json"
python3 - "$out/allocations.txt" "$out/allocations.sql.json" <<'PY'
import json, re, sys
text = open(sys.argv[1]).read()
m = re.search(r"recorded (\d+) allocations and (\d+) frees; peak live bytes (\d+)", text)
allocs, frees, peak = (int(g) for g in m.groups())
doc, _ = json.JSONDecoder().raw_decode(open(sys.argv[2]).read())
counters, instants = (e["rows"] for e in doc["extra"])
assert [(c["track"], int(c["peak"])) for c in counters] == [("memory live_bytes", peak)], counters
got = {r["name"]: int(r["n"]) for r in instants}
assert got == {"alloc": allocs, "free": frees}, f"perfetto {got} != recorded {allocs}/{frees}"
print(f"interop: memory counter peaks at {peak} bytes; {allocs} alloc and {frees} free instants")
PY

# Links: Perfetto binds one flow per matched link, from the originating slice to the one that
# followed from it, with the names the example's table gives.
cargo run --quiet --release --example links -- "$out" > "$out/links.txt"
"$V/check_trace.sh" "$out/links.json"
python3 "$V/validate_perfetto.py" "$out/links.json" --json \
    --sql "select so.name as src, si.name as dst, count(*) as n from flow f join slice so on f.slice_out = so.id join slice si on f.slice_in = si.id group by src, dst order by src" \
    > "$out/links.sql.json"
python3 - "$out/links.txt" "$out/links.sql.json" <<'PY'
import json, re, sys
text = open(sys.argv[1]).read()
links, matched = (int(g) for g in re.search(r"(\d+) links, (\d+) matched", text).groups())
doc, _ = json.JSONDecoder().raw_decode(open(sys.argv[2]).read())
rows = doc["extra"][0]["rows"]
got = {(r["src"], r["dst"]): int(r["n"]) for r in rows}
assert links == matched == 48, (links, matched)
assert got == {("retry", "handle"): 8, ("submit", "handle"): 40}, got
assert doc["flows"] == matched, doc["flows"]
print(f"interop: perfetto binds {matched} flows: {got}")
PY

# The Kineto dialect loads in HolisticTraceAnalysis with its rank and every op. HTA is installed
# into a venv under target/ on first use; without network access this check skips.
venv=target/hta-venv
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import hta" 2>/dev/null; then
    (python3 -m venv "$venv" && "$venv/bin/pip" install -q HolisticTraceAnalysis) >/dev/null 2>&1 || true
fi
if "$venv/bin/python" -c "import hta" 2>/dev/null; then
    mkdir -p "$out/hta"
    sed 's/"rank": 0,/"rank": 1,/' "$out/chrome_trace.kineto.json" > "$out/hta/rank1.json"
    cp "$out/chrome_trace.kineto.json" "$out/hta/rank0.json"
    "$venv/bin/python" - "$out/hta" "$(by_name "$out/chrome_trace.kineto.json")" <<'PY' 2>"$out/hta.log" || { cat "$out/hta.log"; exit 1; }
import json, sys
from hta.trace_analysis import TraceAnalysis
expected = {r["name"]: r["n"] for r in json.loads(sys.argv[2])}
ta = TraceAnalysis(trace_dir=sys.argv[1])
assert sorted(ta.t.traces) == [0, 1], sorted(ta.t.traces)
names = ta.t.symbol_table.get_sym_table()
for rank in (0, 1):
    t = ta.t.get_trace(rank)
    got = {names[i]: int(n) for i, n in t.groupby("name").size().items()}
    assert got == expected, f"rank {rank}: HTA {got} != perfetto {expected}"
print(f"interop: HolisticTraceAnalysis loads the Kineto trace as ranks 0 and 1: {expected}")
PY
else
    echo "interop: HolisticTraceAnalysis not installable here: Kineto check skipped"
fi
