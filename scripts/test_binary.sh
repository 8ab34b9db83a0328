#!/usr/bin/env bash
# Prints the executable of each integration-test binary NAME (tests/NAME/main.rs or
# tests/NAME.rs) as the README's test command (`cargo test --workspace`) builds it, building
# what it lacks: that command's whole selection. (With `--test NAME` alone the CLI's
# dev-dependencies leave the selection, the library's features change, and the library and
# the binary build again: 700 MB for four binaries.) Run a binary from the repository root,
# as `cargo test` runs it.
#
#   scripts/test_binary.sh NAME...     one path a line, in the order asked
set -euo pipefail
cd "$(dirname "$0")/.."
built=$(cargo test --workspace --no-run --message-format=json 2>/dev/null)
for name in "$@"; do
    bin=$(echo "$built" | grep "\"name\":\"$name\",\"src_path\":\"[^\"]*/tests/" |
        sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -1)
    [ -x "$bin" ] || { echo "test_binary.sh: no test binary tests/$name ('$bin')" >&2; exit 1; }
    echo "$bin"
done
