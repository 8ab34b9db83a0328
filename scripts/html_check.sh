#!/usr/bin/env bash
# The HTML report in a real browser: writes reports of example captures (examples/capture.rs,
# examples/report_captures.rs's hostile names and mixed capture (memory, async calls),
# examples/diff_workload.rs against a slower
# build of itself for the diff view) with `tickscope report`, opens each from file:// in
# headless Chromium with the network blocked, and checks from the page itself
# (scripts/html_check.cjs): summary rows equal `tickscope table`'s (names, calls, totals in ns
# and as displayed), sorting by each column, a row's histogram, every call-tree path equals
# `tickscope table --tree`'s and the flame graph's roots the tree's, flame search and zoom,
# the timeline draws every thread and flow, the hash keeps the view, keyboard navigation, the
# dark theme, the diff view lists the names of both captures, hostile names render as text,
# no request left the page and no console error; and a capture of 4.5 M scopes, more than the
# report's blob holds (4 Mi): the page says it shows a level of detail, and its rows, call
# tree and histograms still count every scope. Screenshots of each view go to a folder it
# prints (HTML_CHECK_SHOTS, by default target/html-check).
#
# Installs Debian's `chromium` with apt-get when it is missing, and playwright-core with npm
# into target/npm; skips cleanly (exit 0, saying why) when either cannot be had.
#
#   scripts/html_check.sh
set -euo pipefail
cd "$(dirname "$0")/.."

skip() { echo "html_check: skipped ($*)"; exit 0; }

chromium=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$chromium" ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "html_check: installing chromium with apt-get"
        (apt-get install -y --no-install-recommends chromium >/dev/null 2>&1 ||
            { apt-get update >/dev/null 2>&1 && apt-get install -y --no-install-recommends chromium >/dev/null 2>&1; }) || true
    elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
        sudo -n apt-get install -y --no-install-recommends chromium >/dev/null 2>&1 || true
    fi
    chromium=$(command -v chromium || true)
    [ -n "$chromium" ] || skip "no chromium, and apt-get could not install it"
fi
command -v node >/dev/null || skip "no node"
npm_dir=target/npm
playwright="$PWD/$npm_dir/node_modules/playwright-core"
if [ ! -d "$playwright" ]; then
    command -v npm >/dev/null || skip "no npm to install playwright-core"
    mkdir -p "$npm_dir"
    (cd "$npm_dir" && npm install --no-audit --no-fund --silent --prefix . playwright-core@1 >/dev/null 2>&1) ||
        skip "npm could not install playwright-core"
fi

# The command: $TICKSCOPE when given (as .ci/run gives it its build), else built here.
tickscope=${TICKSCOPE:-}
if [ -z "$tickscope" ]; then
    cargo build --quiet -p tickscope-cli
    tickscope=target/debug/tickscope
fi
cargo build --quiet --example capture --example report_captures --example diff_workload
bin=target/debug
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$bin/examples/capture" "$out" >/dev/null
"$bin/examples/report_captures" "$out" >/dev/null
# More scopes than a report's blob holds (4 Mi): a level of detail (HTML_CHECK_LOD=0 leaves
# it out: about 20 s of a debug build's decoding).
lod=${HTML_CHECK_LOD:-1}
[ "$lod" = 1 ] && "$bin/examples/report_captures" "$out" --scopes 4500000 >/dev/null
mkdir -p "$out/base" "$out/new"
"$bin/examples/diff_workload" "$out/base" --iterations 20,200,5000 >/dev/null
"$bin/examples/diff_workload" "$out/new" --iterations 20,200,5000 --slower large=30 >/dev/null

cases=()
add_case() { # NAME CAPTURE [BASELINE]
    local name=$1 capture=$2 base=${3:-}
    local args=("$capture" -o "$out/$name.html")
    [ -n "$base" ] && args+=(--baseline "$base")
    "$tickscope" report --quiet "${args[@]}"
    "$tickscope" table --quiet "$capture" --format json > "$out/$name.table.json"
    "$tickscope" table --quiet "$capture" > "$out/$name.table.txt"
    "$tickscope" table --quiet "$capture" --tree --format json > "$out/$name.tree.json"
    local extra=""
    if [ -n "$base" ]; then
        "$tickscope" table --quiet "$base" --format json > "$out/$name.base.json"
        extra=", \"base_table_json\": \"$out/$name.base.json\""
    fi
    [ "$name" = hostile ] && extra="$extra, \"expect_names\": \"$out/hostile.names.json\""
    [ "$name" = lod ] && extra="$extra, \"expect_lod\": true"
    cases+=("{\"name\": \"$name\", \"html\": \"$out/$name.html\", \"table_json\": \"$out/$name.table.json\", \"table_text\": \"$out/$name.table.txt\", \"tree_json\": \"$out/$name.tree.json\"$extra}")
}
# The hostile names, as the capture holds them (the table's JSON keeps every name whole).
node -e '
const t = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
require("fs").writeFileSync(process.argv[2], JSON.stringify(t.rows.map((r) => r.name)));
' <("$tickscope" table --quiet "$out/hostile.tscope" --format json) "$out/hostile.names.json"
add_case capture "$out/run.tscope"
add_case hostile "$out/hostile.tscope"
add_case mixed "$out/mixed.tscope"
add_case diff "$out/new/diff_workload.tscope" "$out/base/diff_workload.tscope"
[ "$lod" = 1 ] && add_case lod "$out/scopes-4500000.tscope"

shots=${HTML_CHECK_SHOTS:-$PWD/target/html-check}
rm -rf "$shots"
mkdir -p "$shots"
cp "$out"/*.html "$shots/"
joined=$(IFS=,; echo "${cases[*]}")
cat > "$out/manifest.json" <<JSON
{"chromium": "$chromium", "playwright": "$playwright", "shots": "$shots", "cases": [$joined]}
JSON
node scripts/html_check.cjs "$out/manifest.json"

# The same reports in Firefox (Debian's firefox-esr, installed when missing), driven by
# puppeteer-core over WebDriver BiDi: skipped, saying why, when either cannot be had.
firefox=$(command -v firefox-esr || command -v firefox || true)
if [ -z "$firefox" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "html_check: installing firefox-esr with apt-get"
    apt-get install -y --no-install-recommends firefox-esr >/dev/null 2>&1 || true
    firefox=$(command -v firefox-esr || true)
fi
puppeteer="$PWD/$npm_dir/node_modules/puppeteer-core"
if [ -n "$firefox" ] && [ ! -d "$puppeteer" ] && command -v npm >/dev/null; then
    (cd "$npm_dir" && npm install --no-audit --no-fund --silent --prefix . puppeteer-core@24 >/dev/null 2>&1) || true
fi
if [ -z "$firefox" ]; then
    echo "html_check: Firefox checks skipped (no firefox, and apt-get could not install it)"
elif [ ! -d "$puppeteer" ]; then
    echo "html_check: Firefox checks skipped (npm could not install puppeteer-core)"
else
    cat > "$out/firefox.json" <<JSON
{"firefox": "$firefox", "puppeteer": "$puppeteer", "shots": "$shots", "cases": [$joined]}
JSON
    node scripts/html_firefox.cjs "$out/firefox.json"
fi
