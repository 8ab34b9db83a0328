#!/usr/bin/env bash
# Compares tickscope's public API with the committed listing docs/public-api.txt, so that every
# change of the API is deliberate: a difference fails, printed as a diff.
#
#   scripts/public_api.sh           # check (what .ci/run runs)
#   scripts/public_api.sh --bless   # write docs/public-api.txt anew; commit it with the change
#   scripts/public_api.sh --summary # counts: root exports, public types
#
# The listing (scripts/public_api.py: one sorted line per public item, path and kind) is read
# from rustdoc's JSON output, which needs a nightly toolchain (`cargo +nightly rustdoc -- -Z
# unstable-options --output-format json`): without one the check is skipped, with a message,
# and exits 0. Every public feature is on (not `test-hooks`, which is not public API), so
# that items behind a feature are listed too. Builds go to $CARGO_TARGET_DIR/public-api
# (default target/public-api): about 15 s warm, a minute or two the first time.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=check
case "${1:-}" in
    --bless) mode=bless ;;
    --summary) mode=summary ;;
    "") ;;
    *)
        echo "usage: $0 [--bless | --summary]" >&2
        exit 2
        ;;
esac

if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "public API check skipped: no nightly toolchain (rustup toolchain install nightly)"
    exit 0
fi
command -v python3 >/dev/null 2>&1 || {
    echo "public API check skipped: no python3"
    exit 0
}

# The library's features but `default` (their union) and `test-hooks` (tests only).
features=$(python3 - <<'EOF'
import tomllib
with open("Cargo.toml", "rb") as f:
    features = tomllib.load(f)["features"]
print(",".join(sorted(name for name in features if name not in ("default", "test-hooks"))))
EOF
)

target="${CARGO_TARGET_DIR:-target}/public-api"
cargo +nightly rustdoc --quiet -p tickscope --lib --no-default-features --features "$features" \
    --target-dir "$target" -- -Z unstable-options --output-format json
json="$target/doc/tickscope.json"

case $mode in
    summary)
        python3 scripts/public_api.py --summary "$json"
        ;;
    bless)
        python3 scripts/public_api.py "$json" >docs/public-api.txt
        echo "wrote docs/public-api.txt ($(wc -l <docs/public-api.txt) lines)"
        ;;
    check)
        listing=$(mktemp)
        trap 'rm -f "$listing"' EXIT
        python3 scripts/public_api.py "$json" >"$listing"
        if ! diff -u docs/public-api.txt "$listing"; then
            echo >&2
            echo "The public API differs from docs/public-api.txt (- committed, + this tree)." >&2
            echo "If the change is deliberate, run scripts/public_api.sh --bless and commit" >&2
            echo "docs/public-api.txt with it (and say so in CHANGELOG.md)." >&2
            exit 1
        fi
        echo "public API as in docs/public-api.txt ($(wc -l <"$listing") lines)"
        ;;
esac
