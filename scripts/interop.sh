#!/usr/bin/env bash
# Checks our traces with independent consumers: the Perfetto trace processor (the engine behind
# ui.perfetto.dev), inferno, and HolisticTraceAnalysis (HTA) for the Kineto dialect. Skips
# cleanly (exit 0) when the validators are not installed; the HTA checks skip when HTA cannot
# be installed (no network).
#
#   scripts/interop.sh [VALIDATORS_DIR]     (default: ../shared/validators beside the repo)
#
# TICKSCOPE: the command to run, built with its `otlp` feature (as .ci/run gives it its
# build); without it, built here.
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

# Arize Phoenix (the OTLP checks below: installed in this venv, served on loopback). Its
# server takes half a minute or more to start: when it is installed already, it starts now
# and is up by the time those checks come.
otlp_venv="${XDG_CACHE_HOME:-$HOME/.cache}/tickscope-otlp-venv"
phoenix_pid='' phoenix_taken=''
start_phoenix() {
    if curl -sf http://127.0.0.1:6006/v1/projects >/dev/null 2>&1; then
        # Another server (a Phoenix left by an interrupted run) holds the port: ours could
        # not listen, and the checks would read someone else's spans.
        phoenix_taken=1
        return
    fi
    mkdir -p "$out/phoenix"
    PHOENIX_WORKING_DIR="$out/phoenix" PHOENIX_HOST=127.0.0.1 PHOENIX_PORT=6006 \
        "$otlp_venv/bin/phoenix" serve > "$out/phoenix.log" 2>&1 &
    phoenix_pid=$!
    # Stopped however this script ends (a failed check included), with the scratch folder.
    trap 'kill "$phoenix_pid" 2>/dev/null || true; rm -rf "$out"' EXIT
}
[ -x "$otlp_venv/bin/phoenix" ] && start_phoenix
# The command, with its `otlp` feature (push, convert -o x.otlp.json): $TICKSCOPE (.ci/run's
# build of its CLI step), else built here in the dev profile (a release build would compile
# the OTLP client's crates again; the captures it reads here are small).
tickscope=${TICKSCOPE:-}
if [ -z "$tickscope" ]; then
    cargo build --quiet -p tickscope-cli --features otlp
    tickscope="${CARGO_TARGET_DIR:-target}/debug/tickscope"
fi
# Every example runs from one release build, with the features examples/otlp.rs needs (`otlp`,
# `tracing`): the build .ci/run's examples step made, so nothing but this script's first run
# compiles.
example=(cargo run --quiet --release --features otlp,tracing --example)
"${example[@]}" quickstart -- "$out" > "$out/table.txt"
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
# variant holds the same slices at the same depths as the default one. So does the Kineto
# variant, by name and count: its many sub-microsecond `fib` scopes are placed for HTA and
# the TensorBoard plugin (most without children last no time, on whole microseconds), so
# zero-length ones may show at other depths.
"${example[@]}" chrome_trace -- "$out" > "$out/chrome_trace.txt"
for f in chrome_trace.json chrome_trace.unix.json.gz chrome_trace.kineto.json chrome_trace.folded; do
    "$V/check_trace.sh" "$out/$f"
done
python3 - "$(by_name "$out/chrome_trace.json")" "$(by_name "$out/chrome_trace.unix.json.gz")" "$(by_name "$out/chrome_trace.kineto.json")" <<'PY'
import json, sys
plain, unix, kineto = (json.loads(a) for a in sys.argv[1:])
strip = lambda rows: sorted((r["name"], r["n"], r["depth"]) for r in rows)
assert strip(plain) == strip(unix), f"unix-epoch variant differs: {strip(unix)} != {strip(plain)}"
counts = lambda rows: sorted((r["name"], r["n"]) for r in rows)
assert counts(plain) == counts(kineto), f"kineto variant differs: {counts(kineto)} != {counts(plain)}"
assert all(r["category"] == "cpu_op" for r in kineto), kineto
print(f"interop: chrome_trace variants agree: {strip(plain)}")
PY

# Counters and instants: the counters example's Chrome trace and native Perfetto trace each
# hold, per counter, as many samples with the same smallest and largest values as its table's
# "Counters" section says, and per instant name as many instants as the example counted.
"${example[@]}" counters -- "$out" > "$out/counters.txt"
for trace in counters.json counters.pftrace; do
    "$V/check_trace.sh" "$out/$trace"
    # Chrome instants carry the category `instant`; Perfetto instants are slices of no duration.
    case "$trace" in
        *.json) instants="category = 'instant'" ;;
        *) instants="dur = 0" ;;
    esac
    python3 "$V/validate_perfetto.py" "$out/$trace" --json \
        --sql "select t.name as name, count(*) as n, min(c.value) as mn, max(c.value) as mx from counter c join counter_track t on c.track_id = t.id group by t.name order by t.name" \
        --sql "select name, count(*) as n from slice where $instants group by name order by name" \
        > "$out/$trace.sql.json"
    python3 - "$out/counters.txt" "$out/$trace.sql.json" "$trace" <<'PY'
import json, re, sys
text = open(sys.argv[1]).read()
section = text.split("\nCounters\n", 1)[1].split("\n\n", 1)[0].splitlines()[2:]
want = {}
for row in section:
    name, samples, first, last, lo, hi, mean = row.split()
    want[name] = (int(samples), float(lo), float(hi))
doc, _ = json.JSONDecoder().raw_decode(open(sys.argv[2]).read())
counters, instants = (e["rows"] for e in doc["extra"])
got = {r["name"].removesuffix(" value"): (int(r["n"]), float(r["mn"]), float(r["mx"])) for r in counters}
assert got == want, f"{sys.argv[3]}: perfetto counters {got} != table {want}"
line = re.search(r"^instants: (.*)$", text, re.M).group(1)
want_i = {k: int(v) for k, v in (p.split() for p in line.split(", "))}
want_i = {k: v for k, v in want_i.items() if v > 0}
got_i = {r["name"]: int(r["n"]) for r in instants if r["name"] in want_i}
assert got_i == want_i, f"{sys.argv[3]}: perfetto instants {got_i} != example {want_i}"
print(f"interop: {sys.argv[3]}: perfetto agrees with the counters table: {got}; instants {got_i}")
PY
done

# A capture file converted offline by the tickscope CLI is accepted, with the calls the
# example's table (printed from the same file) counts.
"${example[@]}" capture -- "$out" > "$out/capture.txt"
for f in capture.json capture.folded; do
    "$tickscope" convert "$out/run.tscope" -o "$out/$f"
    "$V/check_trace.sh" "$out/$f"
done
python3 - "$(by_name "$out/capture.json")" "$out/capture.txt" <<'PY'
import json, re, sys
rows = json.loads(sys.argv[1])
got = {r["name"]: r["n"] for r in rows}
table = {}
for line in open(sys.argv[2]):
    m = re.match(r"^(\S+)\s+(\d+)\s", line)
    if m and m.group(1) != "Name":
        table[m.group(1)] = int(m.group(2))
assert got == table == {"checksum": 300, "main": 1, "worker": 1}, (got, table)
print(f"interop: capture converted by the CLI agrees with the table: {got}")
PY

# Two processes in one file (`cat`): the CLI converts them into one trace that Perfetto reads
# as two processes, each under its own pid with the calls its own table counts, on one time
# line: every process's slices sit at the Unix times they have when its file is converted alone.
mkdir -p "$out/second"
"${example[@]}" capture -- "$out/second" > "$out/second.txt"
cat "$out/run.tscope" "$out/second/run.tscope" > "$out/two.tscope"
"$tickscope" convert "$out/two.tscope" -o "$out/two.json"
"$tickscope" convert "$out/two.tscope" -o "$out/two.unix.json" --unix-time
for f in run.tscope second/run.tscope; do
    "$tickscope" convert "$out/$f" -o "$out/$f.unix.json" --unix-time
done
for f in two.json two.unix.json; do
    "$V/check_trace.sh" "$out/$f"
done
by_process() {
    python3 "$V/validate_perfetto.py" "$1" --json \
        --sql "select p.pid as pid, p.name as name, count(*) as n, min(s.ts) as first from slice s join thread_track tt on s.track_id = tt.id join thread t using (utid) join process p using (upid) group by p.pid, p.name order by p.pid" |
        python3 -c 'import json,sys; d,_=json.JSONDecoder().raw_decode(sys.stdin.read()); print(json.dumps(d["extra"][0]["rows"]))'
}
python3 - "$(by_process "$out/two.json")" "$(by_process "$out/two.unix.json")" \
    "$(by_process "$out/run.tscope.unix.json")" "$(by_process "$out/second/run.tscope.unix.json")" \
    "$out/two.json" "$out/capture.txt" "$out/second.txt" <<'PY'
import json, re, sys
two, unix, alone_a, alone_b = (json.loads(a) for a in sys.argv[1:5])
start = json.load(open(sys.argv[5]))["otherData"]["start_unix_ns"]
def calls(path):
    total = 0
    for line in open(path):
        m = re.match(r"^(\S+)\s+(\d+)\s", line)
        if m and m.group(1) != "Name":
            total += int(m.group(2))
    return total
expected = [calls(sys.argv[6]), calls(sys.argv[7])]
alone = {r["pid"]: r for r in alone_a + alone_b}
assert len(two) == 2 and len({r["pid"] for r in two}) == 2, two
assert all(r["name"] == "capture" for r in two), two
assert sorted(r["n"] for r in two) == sorted(expected), (two, expected)
for plain, absolute in zip(two, unix):
    assert plain["pid"] == absolute["pid"] and plain["n"] == absolute["n"] == alone[plain["pid"]]["n"]
    # One origin: the earliest start; the Unix-time variant is the same trace moved by it.
    assert abs(absolute["first"] - plain["first"] - start) < 1000, (plain, absolute, start)
    # Where the process's slices are when its own file is converted alone.
    assert absolute["first"] == alone[plain["pid"]]["first"], (absolute, alone)
gap = abs(two[1]["first"] - two[0]["first"])
print(f"interop: two processes in one file: pids {[r['pid'] for r in two]}, slices {[r['n'] for r in two]} "
      f"as their tables count, on one time line ({gap} ns apart, each at its own Unix time)")
PY

# Async calls: Perfetto's async slices per name plus plain scopes equal the table's calls;
# polls are slices of their own category.
"${example[@]}" profile_attr -- "$out" > "$out/profile_attr.txt"
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
"${example[@]}" allocations -- "$out" > "$out/allocations.txt"
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
"${example[@]}" links -- "$out" > "$out/links.txt"
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

# Native Perfetto protobuf (.pftrace): the trace processor reads from it the slices (per name:
# count and deepest nesting), flows (per origin and follower name) and scope argument values it
# reads from the Chrome JSON of the same trace, and the calls the tables count. The schema
# checker (validate_perfetto_proto.py) does not apply TracePacketDefaults or incremental
# clocks, so it checks the variant with absolute times and explicit tracks
# (`perfetto::Options::delta_times(false)`); the trace processor checks both.
# The rows of each `--sql` query the trace processor answers on a trace, as one JSON list.
pf_query() {
    python3 "$V/validate_perfetto.py" "$@" --json |
        python3 -c 'import json,sys; d,_=json.JSONDecoder().raw_decode(sys.stdin.read()); print(json.dumps([e["rows"] for e in d["extra"]]))'
}
# Slices per name (count, deepest nesting).
slices_sql="select name, count(*) as n, max(depth) as depth from slice group by name order by name"
pf_rows() {
    pf_query "$@" --sql "$slices_sql" \
        --sql "select so.name as src, si.name as dst, count(*) as n from flow f join slice so on f.slice_out = so.id join slice si on f.slice_in = si.id group by src, dst order by src, dst" \
        --sql "select s.name as name, a.key as key, a.display_value as value, count(*) as n from slice s join args a using (arg_set_id) where a.key like 'debug.%' or a.key like 'args.%' group by s.name, a.key, a.display_value order by s.name, a.key, a.display_value"
}
"$V/check_trace.sh" "$out/links.absolute.pftrace"
python3 "$V/validate_perfetto.py" --expect-type proto "$out/links.pftrace" > /dev/null
python3 "$V/validate_perfetto.py" --expect-type proto "$out/chrome_trace.pftrace" > /dev/null
"$tickscope" convert "$out/run.tscope" -o "$out/capture.pftrace"
python3 "$V/validate_perfetto.py" --expect-type proto "$out/capture.pftrace" > /dev/null
python3 - "$(pf_rows "$out/links.json")" "$(pf_rows --expect-type proto "$out/links.pftrace")" \
    "$(pf_rows --expect-type proto "$out/links.absolute.pftrace")" \
    "$(pf_rows "$out/chrome_trace.json")" "$(pf_rows --expect-type proto "$out/chrome_trace.pftrace")" \
    "$(pf_rows "$out/capture.json")" "$(pf_rows --expect-type proto "$out/capture.pftrace")" \
    "$out/capture.txt" <<'PY'
import json, re, sys
links_json, links_pf, links_abs, chrome_json, chrome_pf, capture_json, capture_pf = (json.loads(a) for a in sys.argv[1:8])
def slices(doc):
    return sorted((r["name"], int(r["n"]), int(r["depth"])) for r in doc[0])
def flows(doc):
    return sorted((r["src"], r["dst"], int(r["n"])) for r in doc[1])
def args(doc, keys):
    # Chrome JSON args are `args.<key>`, Perfetto debug annotations `debug.<key>`.
    out = [(r["name"], r["key"].split(".", 1)[1], r["value"], int(r["n"])) for r in doc[2]]
    return sorted(a for a in out if a[1] in keys)
for name, js, pf in (("links", links_json, links_pf), ("links (absolute)", links_json, links_abs),
                     ("chrome_trace", chrome_json, chrome_pf), ("capture", capture_json, capture_pf)):
    assert slices(pf) == slices(js), f"{name}: pftrace slices {slices(pf)} != json {slices(js)}"
    assert flows(pf) == flows(js), f"{name}: pftrace flows {flows(pf)} != json {flows(js)}"
    link = {"Sequence number", "Fwd thread id", "open_at_stop"}
    assert args(pf, link) == args(js, link), f"{name}: pftrace link args {args(pf, link)} != json {args(js, link)}"
assert flows(links_pf) == [("retry", "handle", 8), ("submit", "handle", 40)], flows(links_pf)
table = {}
for line in open(sys.argv[8]):
    m = re.match(r"^(\S+)\s+(\d+)\s", line)
    if m and m.group(1) != "Name":
        table[m.group(1)] = int(m.group(2))
assert {n: c for n, c, _ in slices(capture_pf)} == table, (slices(capture_pf), table)
got = args(capture_pf, {"bytes"})
assert got == args(capture_json, {"bytes"}) and got and sum(a[3] for a in got) == table["checksum"], got
print(f"interop: pftrace agrees with the JSON and the tables: slices {slices(capture_pf)}, "
      f"flows {flows(links_pf)}, args {got}")
PY

# Threads whose one scope (`worker`) holds everything they record, over many pieces: the
# command writes them piece by piece, the open scopes carried from one piece to the next
# (Chrome JSON and Kineto write `worker` in the piece where it ends, after what it holds).
# The trace processor reads the same slices, at the same depths, from every output.
"${example[@]}" big_capture -- "$out/outer.tscope" 8 4 outer > /dev/null
for f in outer.json outer.kineto.json outer.unix.json outer.pftrace; do
    case $f in
        *.kineto.json) flags=(--kineto) ;;
        *.unix.json) flags=(--unix-time) ;;
        *) flags=() ;;
    esac
    "$tickscope" --quiet convert "$out/outer.tscope" "${flags[@]}" -o "$out/$f"
    [ "$f" = outer.pftrace ] || "$V/check_trace.sh" "$out/$f" > /dev/null
done
# Slices per name only (Kineto's args number every op).
pf_slices() {
    pf_query "$@" --sql "$slices_sql"
}
python3 - "$(pf_slices "$out/outer.json")" "$(pf_slices "$out/outer.kineto.json")" \
    "$(pf_slices "$out/outer.unix.json")" "$(pf_slices --expect-type proto "$out/outer.pftrace")" <<'PY'
import json, sys
docs = [sorted((r["name"], int(r["n"]), int(r["depth"])) for r in json.loads(a)[0]) for a in sys.argv[1:5]]
assert all(d == docs[0] for d in docs), docs
want = [("handle", 65536, 2), ("parse", 65536, 2), ("query", 65536, 3), ("request", 65536, 1), ("worker", 4, 0)]
assert docs[0] == want, docs[0]
print(f"interop: a scope open over each thread, from pieces: the same slices in JSON, Kineto, "
      f"Unix-time JSON and Perfetto: {docs[0]}")
PY

# Scopes dropped out of order, scopes shorter than a microsecond, and scopes whose edges share
# a nanosecond (ties.json, which speedscope reads below): traces the export tests write. A scope that outlives its parent keeps its own duration on an extra track of its
# thread ("<thread> (overlapping scopes N)"), so Perfetto keeps every slice (none dropped as
# overlapping): one per span, each with its span's duration, and the link's flow binds.
# The mock tests' binary as the README's test command builds it.
mock=$(scripts/test_binary.sh mock)
TICKSCOPE_INTEROP_DIR="$out/tests" "$mock" --quiet \
    export::kineto_times_nest_in_both_readers export::scopes_that_outlive_their_parent \
    export::chrome_edges_that_share \
    > "$out/tests.log" 2>&1 || { cat "$out/tests.log"; exit 1; }
for f in overlap.json overlap.unix.json overlap.kineto.json sub_us.json sub_us.kineto.json; do
    "$V/check_trace.sh" "$out/tests/$f"
done
for f in overlap.json overlap.unix.json; do
    python3 "$V/validate_perfetto.py" "$out/tests/$f" --json \
        --sql "select count(*) as n from slice" \
        --sql "select name, dur from slice order by ts, name" \
        --sql "select so.name as src, si.name as dst from flow f join slice so on f.slice_out = so.id join slice si on f.slice_in = si.id" \
        --sql "select distinct t.name as track from slice s join thread_track tt on s.track_id = tt.id join thread t using (utid) order by track" \
        > "$out/tests/$f.sql.json"
done
python3 - "$out/tests" <<'PY'
import json, sys
d = sys.argv[1]
expected = json.load(open(f"{d}/overlap.expected.json"))
for f in ("overlap.json", "overlap.unix.json"):
    doc, _ = json.JSONDecoder().raw_decode(open(f"{d}/{f}.sql.json").read())
    count, slices, flows, tracks = (e["rows"] for e in doc["extra"])
    assert count[0]["n"] == expected["spans"], f"{f}: {count[0]['n']} slices for {expected['spans']} spans"
    got = sorted((r["name"], int(r["dur"])) for r in slices)
    want = sorted((name, dur) for name, dur in expected["slices"])
    assert len(got) == len(want) and all(g[0] == w[0] and abs(g[1] - w[1]) <= 1 for g, w in zip(got, want)), \
        f"{f}: slice durations {got} != spans {want}"
    assert [[r["src"], r["dst"]] for r in flows] == expected["flows"], f"{f}: flows {flows}"
    assert [r["track"] for r in tracks] == ["overlap", "overlap (overlapping scopes 1)", "overlap (overlapping scopes 2)"], tracks
print(f"interop: out-of-order drops: perfetto keeps {expected['spans']} slices for {expected['spans']} spans, "
      f"each with its span's duration, on 3 tracks (B/E too); flow {expected['flows'][0][0]} -> {expected['flows'][0][1]}")
PY

# The Kineto dialect in HolisticTraceAnalysis 0.5.0: it loads with its rank and every op, and
# HTA's call graph (hta.common.trace_call_graph.CallGraph, which its CPU analyses build) has
# one node per scope, by name as in our table, on the chrome_trace example (about 1700
# recursive scopes, most shorter than a microsecond), the sub-microsecond test trace and the
# out-of-order one (one call stack per track). Every op that lasts a microsecond or more after
# HTA's rounding has the parent it has in the plain Chrome trace. HTA is installed into a venv
# in the user cache on first use (pinned, with the pandas < 3 it was written for), which a
# fresh clone on the same machine reuses; without network access these checks skip.
venv="${XDG_CACHE_HOME:-$HOME/.cache}/tickscope-hta-venv"
hta_ok() {
    "$venv/bin/python" -c 'import hta, pandas; assert int(pandas.__version__.split(".")[0]) < 3' 2>/dev/null
}
if [ ! -x "$venv/bin/python" ] || ! hta_ok; then
    (python3 -m venv "$venv" && "$venv/bin/pip" install -q "HolisticTraceAnalysis==0.5.0" "pandas<3") \
        >/dev/null 2>&1 || true
fi
if hta_ok; then
    mkdir -p "$out/hta/chrome_trace" "$out/hta/overlap" "$out/hta/sub_us"
    sed 's/"rank": 0,/"rank": 1,/' "$out/chrome_trace.kineto.json" > "$out/hta/chrome_trace/rank1.json"
    cp "$out/chrome_trace.kineto.json" "$out/hta/chrome_trace/rank0.json"
    cp "$out/tests/overlap.kineto.json" "$out/hta/overlap/rank0.json"
    cp "$out/tests/sub_us.kineto.json" "$out/hta/sub_us/rank0.json"
    "$venv/bin/python" - "$out" "$(by_name "$out/chrome_trace.kineto.json")" <<'PY' 2>"$out/hta.log" || { cat "$out/hta.log"; exit 1; }
import collections, json, re, sys
from hta.common.trace_call_graph import CallGraph
from hta.trace_analysis import TraceAnalysis

out = sys.argv[1]
perfetto = {r["name"]: r["n"] for r in json.loads(sys.argv[2])}

def x_events(path):
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    return [(i, e) for i, e in enumerate(events) if e.get("ph") == "X"]

def parents(plain):
    """Each X event's parent (its ordinal), from the nanosecond times of the plain trace; exact
    for every event that is not of zero length."""
    stacks, found = {}, []
    for k, (_, e) in enumerate(plain):
        start = round(e["ts"] * 1000)
        end = start + round(e["dur"] * 1000)
        stack = stacks.setdefault(e["tid"], [])
        while stack and (stack[-1][1] < start or (stack[-1][1] == start and end > start)):
            stack.pop()
        found.append(stack[-1][0] if stack else None)
        stack.append((k, end))
    return found

def table_calls(path):
    rows = open(path).read().split("\n\n")[0].splitlines()
    calls = {}
    for row in rows:
        m = re.match(r"(\S.*?)\s{2,}(\d+)\s", row)
        if m:
            calls[m.group(1)] = int(m.group(2))
    return calls

def check(name, kineto, plain, expected, ranks):
    ta = TraceAnalysis(trace_dir=f"{out}/hta/{name}")
    assert sorted(ta.t.traces) == ranks, sorted(ta.t.traces)
    cg = CallGraph(ta.t)
    names = ta.t.symbol_table.get_sym_table()
    k_events, p_events = x_events(kineto), x_events(plain)
    assert len(k_events) == len(p_events), (len(k_events), len(p_events))
    ordinal = {i: k for k, (i, _) in enumerate(k_events)}
    want = parents(p_events)
    kept = 0
    for rank in ranks:
        df = ta.t.get_trace(rank).set_index("index")
        ops = {names[i]: int(n) for i, n in df.groupby("name").size().items()}
        assert ops == expected, f"{name} rank {rank}: HTA ops {ops} != {expected}"
        nodes = {i: node for i, node in cg.rank_to_nodes[rank].items() if i >= 0}
        got = collections.Counter(names[int(df.loc[i, "name"])] for i in nodes)
        assert got == expected, f"{name} rank {rank}: HTA call graph {dict(got)} != {expected}"
        for i, node in nodes.items():
            if df.loc[i, "dur"] > 0:
                parent = ordinal.get(int(node.parent)) if node.parent >= 0 else None
                assert parent == want[ordinal[i]], \
                    f"{name} rank {rank}: op {ordinal[i]} has parent {parent} in HTA, {want[ordinal[i]]} in the trace"
                kept += 1
    tracks = len({e["tid"] for _, e in k_events})
    source = "the table" if name == "chrome_trace" else "the plain trace"
    print(f"interop: HTA call graph of {name}.kineto.json (rank(s) {ranks}, {tracks} track(s)): "
          f"{sum(expected.values())} nodes per rank, by name as in {source} {dict(sorted(expected.items()))}; "
          f"the {kept // len(ranks)} ops per rank that last 1 µs or more keep their parent")

table = table_calls(f"{out}/chrome_trace.txt")
assert table == perfetto, f"table {table} != perfetto {perfetto}"
check("chrome_trace", f"{out}/chrome_trace.kineto.json", f"{out}/chrome_trace.json", table, [0, 1])
for name in ("sub_us", "overlap"):
    plain = f"{out}/tests/{name}.json"
    counts = dict(collections.Counter(e["name"] for _, e in x_events(plain)))
    check(name, f"{out}/tests/{name}.kineto.json", plain, counts, [0])
PY
else
    echo "interop: HolisticTraceAnalysis not installable here: Kineto checks skipped"
fi

# The Kineto dialect in the PyTorch TensorBoard plugin's parser (torch-tb-profiler 0.4.3, its
# `RunProfileData` driven without a server; it needs no torch). It builds one operator tree per
# track from the times as written: it must reject no op as overlapping another ("ranges on the
# same thread should not intersect"), hold every op, also after it merges an op into its parent
# where that leaves it a single child of its own name, and give every op (zero-length ones
# too) the parent it has in the plain Chrome trace, while HTA's rounding leaves every op a whole
# microsecond (see the Kineto module docs). Installed into a venv in the user cache on first
# use (as HTA's); skipped when it cannot be.
tb_venv="${XDG_CACHE_HOME:-$HOME/.cache}/tickscope-tbp-venv"
tb_ok() { "$tb_venv/bin/python" -c 'import torch_tb_profiler.profiler.data' 2>/dev/null; }
if [ ! -x "$tb_venv/bin/python" ] || ! tb_ok; then
    (python3 -m venv "$tb_venv" && "$tb_venv/bin/pip" install -q "torch-tb-profiler==0.4.3") \
        >/dev/null 2>&1 || true
fi
if tb_ok; then
    "$tb_venv/bin/python" - "$out/chrome_trace" "$out/tests/sub_us" "$out/tests/overlap" \
        <<'PY' 2>"$out/tbp.log" || { cat "$out/tbp.log"; exit 1; }
import json, sys, types
import torch_tb_profiler.profiler.op_tree as op_tree
from torch_tb_profiler.profiler.data import RunProfileData

rejected = []
class Log:
    def error(self, message, *args):
        rejected.append(message % args if args else message)
    def __getattr__(self, _):
        return lambda *a, **k: None
op_tree.logger = Log()
real_types = op_tree.EventTypes
# The same types, but no op is an OPERATOR to the merging step (`remove_dup_nodes`).
unmerged = types.SimpleNamespace(**{k: getattr(real_types, k) for k in dir(real_types) if k.isupper()})
unmerged.OPERATOR = object()

def complete(path):
    return [e for e in json.load(open(path))["traceEvents"] if e.get("ph") == "X"]

def plain_parents(events):
    """Each X event's parent (its ordinal), from the nanosecond times of the plain trace."""
    stacks, found = {}, []
    for k, e in enumerate(events):
        start = round(e["ts"] * 1000)
        end = start + round(e["dur"] * 1000)
        stack = stacks.setdefault(e["tid"], [])
        while stack and (stack[-1][1] < start or (stack[-1][1] == start and end > start)):
            stack.pop()
        found.append(stack[-1][0] if stack else None)
        stack.append((k, end))
    return found

def trees(doc, merging):
    rejected.clear()
    op_tree.EventTypes = real_types if merging else unmerged
    data = RunProfileData.from_json("rank0", "1", doc)
    data.process()
    assert not rejected, f"torch-tb rejected {len(rejected)} ops: {rejected[:2]}"
    parents = {}
    def walk(node, parent):
        for child in node.children:
            parents[child.external_id] = parent
            walk(child, child.external_id)
    for root in data.tid2tree.values():
        walk(root, None)
    return parents

for base in sys.argv[1:]:
    name = base.split("/")[-1]
    doc = json.load(open(f"{base}.kineto.json"))
    ops = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    assert all(e["cat"] == "cpu_op" for e in ops)
    # `External id` k is the k-th op (1-based).
    ordinal = {e["args"]["External id"]: k for k, e in enumerate(ops)}
    want = plain_parents(complete(f"{base}.json"))
    for merging in (False, True):
        held = trees(doc, merging)
        how = "with" if merging else "without"
        assert sorted(held) == sorted(ordinal), \
            f"{name}: torch-tb holds {len(held)} of {len(ops)} ops {how} its merging"
        for k, e in enumerate(ops):
            got = held[e["args"]["External id"]]
            got = None if got is None else ordinal[got]
            assert got == want[k], \
                f"{name}: op {k} ({e['name']}) has parent {got} in torch-tb ({how} its merging), {want[k]} in the trace"
    zero = sum(1 for e in ops if e["dur"] == 0)
    print(f"interop: torch-tb-profiler 0.4.3 reads {name}.kineto.json: no op rejected, all {len(ops)} in its "
          f"operator trees under their parent ({zero} of zero length), also after it merges ops into parents of their name")
PY
else
    echo "interop: torch-tb-profiler not installable here: TensorBoard plugin check skipped"
fi

# OTLP (cargo feature otlp). The .otlp.json of examples/otlp.rs is decoded by the official
# opentelemetry-proto Python package (every field checked against the OTLP schema), and its
# spans must be the table's: per-name counts and total times, parent links. Then Arize
# Phoenix (`phoenix serve`, loopback only) takes the same trace over OTLP/HTTP, and its REST
# API must give back every span with its parent, duration (µs) and span events. Then four
# processes in one push, the failure paths of `tickscope push`, and the pprof profile
# (protobuf and speedscope). Each part skips when its packages cannot be installed. The venv lives in the user cache, not under target/: Phoenix takes
# minutes to install, and a fresh clone on the same machine then reuses it.
otlp_py="$otlp_venv/bin/python"
if ! "$otlp_py" -c 'import opentelemetry.proto.collector.trace.v1.trace_service_pb2' 2>/dev/null; then
    (python3 -m venv "$otlp_venv" && "$otlp_venv/bin/pip" install -q opentelemetry-proto) \
        >/dev/null 2>&1 || true
fi
if ! "$otlp_py" -c 'import opentelemetry.proto.collector.trace.v1.trace_service_pb2' 2>/dev/null; then
    echo "interop: opentelemetry-proto (Python) not installable here: OTLP checks skipped"
    exit 0
fi
if [ -z "$phoenix_pid$phoenix_taken" ] && ! "$otlp_venv/bin/phoenix" --help >/dev/null 2>&1; then
    timeout 900 "$otlp_venv/bin/pip" install -q arize-phoenix >/dev/null 2>&1 || true
fi
if [ -z "$phoenix_pid$phoenix_taken" ] && "$otlp_venv/bin/phoenix" --help >/dev/null 2>&1; then
    start_phoenix
fi
if [ -n "$phoenix_taken" ]; then
    echo "interop: 127.0.0.1:6006 is taken by another server: Phoenix checks skipped"
elif [ -n "$phoenix_pid" ]; then
    for _ in $(seq 120); do
        curl -sf http://127.0.0.1:6006/v1/projects >/dev/null 2>&1 && break
        sleep 1
    done
    if ! curl -sf http://127.0.0.1:6006/v1/projects >/dev/null 2>&1; then
        tail -20 "$out/phoenix.log"
        echo "interop: Phoenix did not start: Phoenix checks skipped"
        kill "$phoenix_pid" 2>/dev/null || true
        phoenix_pid=
    fi
else
    echo "interop: arize-phoenix not installable here: Phoenix checks skipped"
fi
endpoint=()
[ -n "$phoenix_pid" ] && endpoint=(--endpoint http://127.0.0.1:6006)
"${example[@]}" otlp -- "$out" "${endpoint[@]}" > "$out/otlp.txt"
"$otlp_py" - "$out/otlp.txt" "$out/otlp.otlp.json" "${phoenix_pid:+http://127.0.0.1:6006}" <<'PY'
import base64, collections, datetime, json, re, sys, time, urllib.request
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

table_path, json_path = sys.argv[1], sys.argv[2]
phoenix = sys.argv[3] if len(sys.argv) > 3 and sys.argv[3] else None
rows = open(table_path).read().split("\n\n")[0].splitlines()[2:]
calls, total_us = {}, {}
for row in rows:
    m = re.match(r"(\S+)\s+(\d+)\s", row)
    if m:
        calls[m.group(1)] = int(m.group(2))

def to_proto(line):
    # OTLP/JSON writes ids in hex; protobuf's JSON mapping wants base64 for bytes.
    doc = json.loads(line)
    for rs in doc.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            for span in ss.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if span.get(key):
                        span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
                for link in span.get("links", []):
                    for key in ("traceId", "spanId"):
                        link[key] = base64.b64encode(bytes.fromhex(link[key])).decode()
    return json_format.ParseDict(doc, ExportTraceServiceRequest())

spans = {}
for line in open(json_path):
    request = to_proto(line)
    # Round trip through the protobuf wire form too.
    request = ExportTraceServiceRequest.FromString(request.SerializeToString())
    for rs in request.resource_spans:
        for ss in rs.scope_spans:
            assert ss.scope.name == "tickscope"
            for s in ss.spans:
                spans[s.span_id.hex()] = s
by_name = collections.Counter(s.name for s in spans.values())
assert dict(by_name) == calls, f"otlp.json spans {dict(by_name)} != table {calls}"
for s in spans.values():
    assert s.end_time_unix_nano >= s.start_time_unix_nano
    if s.parent_span_id:
        parent = spans[s.parent_span_id.hex()]
        assert parent.start_time_unix_nano <= s.start_time_unix_nano and s.end_time_unix_nano <= parent.end_time_unix_nano
want_parent = {"handle": None, "parse": "handle", "query": "handle"}
for s in spans.values():
    got = spans[s.parent_span_id.hex()].name if s.parent_span_id else None
    assert got == want_parent[s.name], f"{s.name}: parent {got}"
# Span events: an instant per parse on its parse span, a `rows` counter sample per query on
# its query span, each inside its span's time.
events = collections.Counter()
for s in spans.values():
    for e in s.events:
        events[(s.name, e.name)] += 1
        assert s.start_time_unix_nano <= e.time_unix_nano <= s.end_time_unix_nano, (s.name, e.name)
want_events = {("parse", "parsed"): calls["parse"], ("query", "rows"): calls["query"]}
assert dict(events) == want_events, f"span events {dict(events)} != {want_events}"
print(f"interop: opentelemetry-proto decodes otlp.otlp.json: {len(spans)} spans, per name as in the table {dict(sorted(calls.items()))}, parents nest; "
      f"span events {dict((f'{a}/{b}', n) for (a, b), n in sorted(events.items()))}")
if not phoenix:
    sys.exit(0)

def get(url):
    # Phoenix answers 500 now and then while it ingests (its database busy): ask again.
    for attempt in range(20):
        try:
            with urllib.request.urlopen(url, timeout=30) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            if e.code < 500 or attempt == 19:
                raise
            time.sleep(0.5)

def phoenix_spans():
    got, cursor = [], None
    while True:
        url = f"{phoenix}/v1/projects/default/spans?limit=1000" + (f"&cursor={cursor}" if cursor else "")
        page = get(url)
        got.extend(page["data"])
        cursor = page.get("next_cursor")
        if not cursor:
            return got

deadline = time.time() + 60
while True:
    stored = phoenix_spans()
    if len(stored) >= len(spans) or time.time() > deadline:
        break
    time.sleep(1)

def ts(text):
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))

assert len(stored) == len(spans), f"Phoenix holds {len(stored)} spans, {len(spans)} sent"
names = collections.Counter(p["name"] for p in stored)
assert dict(names) == calls, f"Phoenix spans {dict(names)} != table {calls}"
worst = 0
for p in stored:
    s = spans[p["context"]["span_id"]]
    parent = p.get("parent_id")
    assert (parent or None) == (s.parent_span_id.hex() or None), f"{p['name']}: parent {parent}"
    us = (ts(p["end_time"]) - ts(p["start_time"])) / datetime.timedelta(microseconds=1)
    want = (s.end_time_unix_nano - s.start_time_unix_nano) / 1000
    worst = max(worst, abs(us - want))
    # Phoenix keeps whole microseconds of each end: the difference is under 2 µs.
    assert abs(us - want) < 2, f"{p['name']}: {us} µs in Phoenix, {want} µs sent"
    got_events = sorted(e["name"] for e in p["events"])
    assert got_events == sorted(e.name for e in s.events), f"{p['name']}: events {got_events}"
print(f"interop: Phoenix round trip: {len(stored)} spans back, per name as in the table "
      f"{dict(sorted(names.items()))}, every parent link kept, durations within {worst:.3f} µs, "
      f"{sum(len(p['events']) for p in stored)} span events on their spans")
PY
cli=("$tickscope")
sha() { sha256sum "$1" | cut -d' ' -f1; }

# Several machines, simulated: four processes (four runs of the example) write captures, and
# one `tickscope push --trace-per-process` sends all four to Phoenix. Phoenix's REST API does
# not show resources, so each process is a trace of its own there: Phoenix must hold four
# traces, each with every span of one process (its span ids, as `tickscope convert` of the
# same files writes them, each under its resource's process.pid).
if [ -n "$phoenix_pid" ]; then
    for i in 1 2 3 4; do
        mkdir -p "$out/machine$i"
        "${example[@]}" otlp -- "$out/machine$i" > "$out/machine$i/otlp.txt"
    done
    four=("$out"/machine{1,2,3,4}/otlp.tscope)
    "${cli[@]}" convert "${four[@]}" -o "$out/four.otlp.json"
    "${cli[@]}" push "${four[@]}" --endpoint http://127.0.0.1:6006 --trace-per-process > "$out/four.txt"
    "$otlp_py" - "$out/four.otlp.json" "$out/four.txt" http://127.0.0.1:6006 <<'PY'
import collections, json, sys, time, urllib.request

json_path, push_out, phoenix = sys.argv[1:4]
pid_of = {}
for line in open(json_path):
    for rs in json.loads(line)["resourceSpans"]:
        attrs = {a["key"]: a["value"] for a in rs["resource"]["attributes"]}
        pid = int(attrs["process.pid"]["intValue"])
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                pid_of[span["spanId"]] = pid
per_pid = collections.Counter(pid_of.values())
assert len(per_pid) == 4, f"{len(per_pid)} processes in the converted files"
pushed = open(push_out).read()
assert pushed.startswith(f"pushed {len(pid_of)} spans to {phoenix}/v1/traces"), pushed
assert pushed.rstrip().endswith("; 4 processes"), pushed

def phoenix_spans():
    got, cursor = [], None
    while True:
        url = f"{phoenix}/v1/projects/default/spans?limit=1000" + (f"&cursor={cursor}" if cursor else "")
        page = None
        # Phoenix answers 500 now and then while it ingests (its database busy): ask again.
        for attempt in range(20):
            try:
                with urllib.request.urlopen(url, timeout=30) as r:
                    page = json.loads(r.read())
                break
            except urllib.error.HTTPError as e:
                if e.code < 500 or attempt == 19:
                    raise
                time.sleep(0.5)
        got.extend(page["data"])
        cursor = page.get("next_cursor")
        if not cursor:
            return got

deadline = time.time() + 60
while True:
    ours = [p for p in phoenix_spans() if p["context"]["span_id"] in pid_of]
    if len(ours) >= len(pid_of) or time.time() > deadline:
        break
    time.sleep(1)
assert len(ours) == len(pid_of), f"Phoenix holds {len(ours)} of the {len(pid_of)} spans pushed"
traces = collections.defaultdict(set)
for p in ours:
    traces[p["context"]["trace_id"]].add(pid_of[p["context"]["span_id"]])
assert len(traces) == 4 and all(len(pids) == 1 for pids in traces.values()), traces
spans_per_trace = collections.Counter(t for t in (p["context"]["trace_id"] for p in ours))
got = {next(iter(traces[t])): n for t, n in spans_per_trace.items()}
assert got == dict(per_pid), f"Phoenix spans per process {got} != pushed {dict(per_pid)}"
events = sum(len(p["events"]) for p in ours)
print(f"interop: four processes in one push: Phoenix holds all {len(ours)} spans ({events} span events), "
      f"as 4 traces, one per process (pid: spans {dict(sorted(got.items()))})")
PY
fi

# Failure paths of `tickscope push` against a local server on 127.0.0.1 (a few lines of
# Python's http.server): connection refused, a 500 then success (retried), a 413 for every
# request (split down to one span, then a clear error), a server slower than --timeout. Each
# shows what the user sees and the exit code; the capture file is unchanged after each.
cat > "$out/server.py" <<'PY'
import http.server, os, sys, time
mode, portfile = sys.argv[1], sys.argv[2]
posts = [0]
class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        posts[0] += 1
        status = 200
        if mode == "500-once" and posts[0] == 1:
            status = 500
        elif mode == "413":
            status = 413
        elif mode == "slow":
            time.sleep(5)
        body = b"" if status == 200 else b"not now"
        try:
            self.send_response(status)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except OSError:
            pass  # the client gave up (the slow case)
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(portfile + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.replace(portfile + ".tmp", portfile)
server.serve_forever()
PY
capture="$out/otlp.tscope"
before=$(sha "$capture")
# push_to MODE [ARGS...]: pushes the capture to a fresh server answering as MODE ("closed": no
# server); sets $code and $url, the output in $out/push-MODE.{out,err}.
push_to() {
    local mode=$1 server= port
    shift
    if [ "$mode" = closed ]; then
        port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    else
        rm -f "$out/port"
        python3 "$out/server.py" "$mode" "$out/port" &
        server=$!
        for _ in $(seq 100); do [ -s "$out/port" ] && break; sleep 0.1; done
        port=$(cat "$out/port")
    fi
    url="http://127.0.0.1:$port"
    set +e
    "${cli[@]}" push "$capture" --endpoint "$url" "$@" > "$out/push-$mode.out" 2> "$out/push-$mode.err"
    code=$?
    set -e
    if [ -n "$server" ]; then
        kill "$server"
        wait "$server" 2>/dev/null || true
    fi
    [ "$(sha "$capture")" = "$before" ] || { echo "interop: push ($mode) changed $capture" >&2; exit 1; }
}
# expect MODE CODE PATTERN: the exit code and a line of the output (stdout, then stderr).
expect() {
    local mode=$1 want=$2 pattern=$3 file
    [ "$want" = 0 ] && file="$out/push-$mode.out" || file="$out/push-$mode.err"
    if [ "$code" != "$want" ] || ! grep -qE "$pattern" "$file"; then
        cat "$out/push-$mode.out" "$out/push-$mode.err"
        echo "interop: push ($mode): exit $code, expected $want and /$pattern/" >&2
        exit 1
    fi
    echo "interop: push ($mode): exit $code, capture unchanged: $(head -1 "$file")"
}
push_to closed
expect closed 2 "^error: cannot connect to $url/v1/traces: "
push_to 500-once
expect 500-once 0 "^pushed [0-9]+ spans to $url/v1/traces in 1 requests \([0-9]+ bytes gzipped, 1 retries\)"
push_to 413
expect 413 2 "^error: $url/v1/traces answered HTTP 413 \(payload too large\) to a request of one span \([0-9]+ bytes\)$"
push_to slow --timeout 1s
expect slow 2 "^error: $url/v1/traces did not answer in time \(timeout\)$"
if [ -n "$phoenix_pid" ]; then
    kill "$phoenix_pid"
    wait "$phoenix_pid" 2>/dev/null || true
fi

# pprof: otlp.pb.gz decoded by the protobuf package (profile.proto's messages declared here):
# per function, the calls and the wall (self) time of the samples it is the leaf of are the
# table's calls and self times (as exact as the table prints them). Then speedscope's own
# importer (the npm package `speedscope`, its browser bundle run under node by
# scripts/speedscope_import.cjs) reads the same file: its self time per frame must be the
# decoded wall time, to the nanosecond. Skips when node or npm is absent or offline.
"$otlp_py" - "$out/otlp.txt" "$out/otlp.pb.gz" "$out/pprof.json" <<'PY'
import collections, gzip, json, re, sys
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

F = descriptor_pb2.FieldDescriptorProto
fd = descriptor_pb2.FileDescriptorProto(name="profile.proto", package="perftools.profiles", syntax="proto3")
def message(name, *fields):
    m = fd.message_type.add(name=name)
    for field, number, kind, type_name in fields:
        label = F.LABEL_REPEATED if field in ("sample_type", "sample", "location", "function", "string_table", "location_id", "value", "line") else F.LABEL_OPTIONAL
        f = m.field.add(name=field, number=number, type=kind, label=label)
        if type_name:
            f.type_name = ".perftools.profiles." + type_name
message("Profile", ("sample_type", 1, F.TYPE_MESSAGE, "ValueType"), ("sample", 2, F.TYPE_MESSAGE, "Sample"),
        ("location", 4, F.TYPE_MESSAGE, "Location"), ("function", 5, F.TYPE_MESSAGE, "Function"),
        ("string_table", 6, F.TYPE_STRING, None), ("time_nanos", 9, F.TYPE_INT64, None),
        ("duration_nanos", 10, F.TYPE_INT64, None), ("default_sample_type", 14, F.TYPE_INT64, None))
message("ValueType", ("type", 1, F.TYPE_INT64, None), ("unit", 2, F.TYPE_INT64, None))
message("Sample", ("location_id", 1, F.TYPE_UINT64, None), ("value", 2, F.TYPE_INT64, None))
message("Location", ("id", 1, F.TYPE_UINT64, None), ("line", 4, F.TYPE_MESSAGE, "Line"))
message("Line", ("function_id", 1, F.TYPE_UINT64, None), ("line", 2, F.TYPE_INT64, None))
message("Function", ("id", 1, F.TYPE_UINT64, None), ("name", 2, F.TYPE_INT64, None),
        ("system_name", 3, F.TYPE_INT64, None), ("filename", 4, F.TYPE_INT64, None), ("start_line", 5, F.TYPE_INT64, None))
pool = descriptor_pool.DescriptorPool()
pool.Add(fd)
Profile = message_factory.GetMessageClass(pool.FindMessageTypeByName("perftools.profiles.Profile"))
profile = Profile.FromString(gzip.open(sys.argv[2]).read())
s = profile.string_table
types = [(s[t.type], s[t.unit]) for t in profile.sample_type]
assert types[:2] == [("calls", "count"), ("wall", "nanoseconds")], types
assert s[profile.default_sample_type] == "wall"
function = {f.id: s[f.name] for f in profile.function}
leaf = {l.id: function[l.line[0].function_id] for l in profile.location}
calls, wall = collections.Counter(), collections.Counter()
for sample in profile.sample:
    name = leaf[sample.location_id[0]]
    calls[name] += sample.value[0]
    wall[name] += sample.value[1]
unit = {"ns": 1, "µs": 1e3, "ms": 1e6, "s": 1e9}
rows = [r for r in open(sys.argv[1]).read().split("\n\n")[0].splitlines()[2:] if re.match(r"\S+\s+\d+\s", r)]
assert sorted(r.split()[0] for r in rows) == sorted(calls), (rows, dict(calls))
for row in rows:
    name, n, _total, _tu, _total_percent, self_time, self_unit = row.split()[:7]
    assert calls[name] == int(n), f"{name}: {calls[name]} calls in the profile, {n} in the table"
    decimals = len(self_time.split(".")[1]) if "." in self_time else 0
    slack = 0.5 * 10 ** -decimals * unit[self_unit] + 1
    assert abs(wall[name] - float(self_time) * unit[self_unit]) <= slack, \
        f"{name}: {wall[name]} ns self in the profile, {self_time} {self_unit} in the table"
json.dump({"calls": calls, "wall": wall}, open(sys.argv[3], "w"))
print(f"interop: otlp.pb.gz decoded by protobuf: calls {dict(calls)} and self ns {dict(wall)} per function, as the table says")
PY
speedscope="${XDG_CACHE_HOME:-$HOME/.cache}/tickscope-speedscope"
if command -v node >/dev/null && command -v npm >/dev/null; then
    if [ ! -f "$speedscope/node_modules/speedscope/package.json" ]; then
        (mkdir -p "$speedscope" && cd "$speedscope" &&
            timeout 300 npm install --no-audit --no-fund --silent speedscope@1.25.0) >/dev/null 2>&1 || true
    fi
fi
if [ -f "$speedscope/node_modules/speedscope/package.json" ]; then
    node scripts/speedscope_import.cjs "$speedscope" "$out/otlp.pb.gz" > "$out/speedscope.json"
    python3 - "$out/speedscope.json" "$out/pprof.json" <<'PY'
import json, sys
imported, decoded = (json.load(open(p)) for p in sys.argv[1:3])
[profile] = imported["profiles"]
assert profile["unit"] == "nanoseconds", profile["unit"]
self_ns = {name: f["self"] for name, f in profile["frames"].items()}
assert self_ns == decoded["wall"], f"speedscope self ns {self_ns} != pprof {decoded['wall']}"
assert profile["total"] == sum(decoded["wall"].values()), profile["total"]
print(f"interop: speedscope 1.25.0 imports otlp.pb.gz: {len(self_ns)} frames, self ns per frame as decoded, "
      f"{profile['total']} ns in all")
PY

    # Every Chrome trace the examples write, in speedscope, also with every core busy (a
    # spinning shell per core, two at least): each example that writes one runs 8 times
    # (TICKSCOPE_INTEROP_RUNS) under that load, then speedscope's own importer reads all of
    # them in one node process, with the example's first files from above, and must not warn
    # once. It warns where it has to repair a stack ("Tried to end `handle` when `checksum` was
    # on the top of the stack"): it rebuilds each track's stack from begins and ends sorted by
    # time, so edges of one track that share a nanosecond (a busy machine's clock gives them)
    # would be misread, had the writer not set them 1 ns apart. The Kineto dialect is left
    # out: its zero-length ops on whole microseconds (sub-µs scopes placed for HTA), which
    # speedscope cannot nest.
    # So are traces on the Unix epoch (below).
    runs=${TICKSCOPE_INTEROP_RUNS:-8}
    examples=(quickstart chrome_trace counters profile_attr allocations links)
    bin="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')/release/examples"
    spinners=()
    trap 'kill "${spinners[@]}" 2>/dev/null; rm -rf "$out"' EXIT
    cores=$(nproc)
    for _ in $(seq "$(( cores > 2 ? cores : 2 ))"); do
        yes > /dev/null &
        spinners+=($!)
    done
    started=$SECONDS
    for i in $(seq "$runs"); do
        mkdir -p "$out/load/$i"
        for example in "${examples[@]}"; do
            "$bin/$example" "$out/load/$i" > /dev/null
        done
    done
    kill "${spinners[@]}"
    trap 'rm -rf "$out"' EXIT
    # Our Chrome traces: the files that open as the Chrome format does, but those on the Unix
    # epoch (`.unix.`): a double resolves only 0.25 µs there, and speedscope, which sorts by
    # time first and reads an end before a begin on a tie, cannot tell which scope of one
    # such instant holds which (their `B`/`E` order in the file says it, as Perfetto reads it).
    mapfile -t traces < <(find "$out" -name '*.json' -o -name '*.json.gz' | grep -v '\.unix\.' | sort | python3 -c '
import gzip, sys
for path in sys.stdin.read().split():
    with (gzip.open if path.endswith(".gz") else open)(path, "rb") as f:
        if f.read(16) == b"{\"traceEvents\":[":
            print(path)')
    node scripts/speedscope_import.cjs "$speedscope" "${traces[@]}" > "$out/speedscope_traces.json"
    python3 - "$out/speedscope_traces.json" "$runs" "${#spinners[@]}" "$(( SECONDS - started ))" <<'PY'
import json, sys
files = [json.loads(line) for line in open(sys.argv[1])]
warned = {f["file"]: f["warnings"] for f in files if f["warnings"] or not f["profiles"]}
assert not warned, "speedscope repaired stacks: " + "; ".join(
    f"{path}: {len(w)} warnings, first {w[:2]}" for path, w in sorted(warned.items()))
tracks = sum(len(f["profiles"]) for f in files)
print(f"interop: speedscope 1.25.0 reads {len(files)} Chrome traces ({tracks} tracks; the examples' and "
      f"{sys.argv[2]} runs of each under {sys.argv[3]} spinning shells, {sys.argv[4]} s) without repairing a stack")
PY
else
    echo "interop: speedscope (npm) not installable here: speedscope check skipped"
fi
