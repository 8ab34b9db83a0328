#!/usr/bin/env bash
# Sizes and timings of the HTML report (a benchmark, not a test: it asserts nothing, it
# prints): for captures of 100 k and 5 M scopes (examples/report_captures.rs --scopes N, 4
# threads nested three deep), the file's size and the time `Profiler::write` takes to write
# it, the time `tickscope report` takes from the capture file; then in headless Chromium the
# time until the page is interactive (scopes decoded and the summary drawn), until the
# timeline's first frame, and the timeline's frame rate while zooming and panning (frames
# counted with requestAnimationFrame). Needs chromium and playwright-core as
# scripts/html_check.sh installs them; without them it prints the sizes and write times only.
#
#   scripts/html_bench.sh [SCOPES...]      (default: 100000 5000000)
set -euo pipefail
cd "$(dirname "$0")/.."
counts=("$@")
[ ${#counts[@]} -gt 0 ] || counts=(100000 5000000)
cargo build --quiet --release -p tickscope-cli
cargo build --quiet --release --example report_captures
bin=target/release
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "machine: $(nproc) cores, $(uname -m); $(date -u +%FT%TZ)"
pages=()
for n in "${counts[@]}"; do
    echo "== $n scopes"
    "$bin/examples/report_captures" "$out" --scopes "$n" --html
    start=$(date +%s.%N)
    "$bin/tickscope" report --quiet "$out/scopes-$n.tscope" -o "$out/report-$n.html"
    end=$(date +%s.%N)
    echo "tickscope report (read, decode, write): $(echo "$end - $start" | bc) s, $(stat -c %s "$out/report-$n.html") bytes"
    pages+=("$out/scopes-$n.html")
done
chromium=$(command -v chromium || command -v chromium-browser || true)
playwright="$PWD/target/npm/node_modules/playwright-core"
if [ -z "$chromium" ] || [ ! -d "$playwright" ] || ! command -v node >/dev/null; then
    echo "browser timings skipped (run scripts/html_check.sh once to install chromium and playwright-core)"
    exit 0
fi
node scripts/html_bench.cjs "$chromium" "$playwright" "${pages[@]}"
