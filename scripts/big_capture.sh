#!/usr/bin/env bash
# Peak resident memory and wall time of the `tickscope` command on a big capture, for issue
# 31's bounds (`info` <= 64 MB and <= 1 s; `table`, `convert` to every format and `merge`
# <= 512 MB whatever the file's size).
#
#   scripts/big_capture.sh [MIB] [TICKSCOPE]
#
# Streams a session of MIB MiB of records (default 1400; packed, the file is far smaller)
# with examples/big_capture.rs into
# target/bcap/big-MIB.tscope (kept for the next run; delete it when done, or set CLEAN=1 to
# delete it and the outputs at the end), then runs each command under `/usr/bin/time -v` and
# prints one line per command (its gzipped copy too, beside it: `table` and `convert -o
# .json` of it): peak RSS in MB and wall time in seconds. TICKSCOPE: another
# build of the command to measure (say of main), else this tree's release build. FORMATS:
# the `convert` outputs to measure (default "folded pb json pftrace html otlp.json"; above 4000
# MiB "folded pb json pftrace html": OTLP/JSON takes minutes per GB). Outputs go through a
# symbolic link to /dev/null when SINK=1 (the default above 4000 MiB), so that the disk holds
# only the capture. OUTER=1: each thread's loop inside one scope open from its first record
# to its last (`big_capture ... outer`, file big-MIB-outer.tscope). LINKS=1: each request a
# `seq` scope, one in 100 followed on a thread of its own (`big_capture ... links`, file
# big-MIB-links.tscope). MEMORY=1: a session that tracks memory, an allocation and a free a
# loop (`big_capture ... memory`, file big-MIB-memory.tscope). ASYNC=1: each request an
# `async fn` call under `#[profile]` polled twice, eight open at once (`big_capture ...
# async`, file big-MIB-async.tscope; with OUTER only). TRACING=1: each request a `tracing`
# span with a field, entered twice and closed on its thread, eight alive at once
# (`big_capture ... tracing`, built with `--features tracing`, file
# big-MIB-tracing.tscope; with OUTER only). They combine. Skips when
# /usr/bin/time is absent.
set -euo pipefail
cd "$(dirname "$0")/.."
mib=${1:-1400}
bin=${2:-}
if [ ! -x /usr/bin/time ]; then
    echo "skipped: /usr/bin/time (GNU time) is not installed"
    exit 0
fi
target=${CARGO_TARGET_DIR:-target}
dir=$target/bcap
mkdir -p "$dir"
modes=()
suffix=
if [ "${OUTER:-0}" = 1 ]; then
    modes+=(outer)
    suffix=-outer
fi
if [ "${LINKS:-0}" = 1 ]; then
    modes+=(links)
    suffix=$suffix-links
fi
if [ "${MEMORY:-0}" = 1 ]; then
    modes+=(memory)
    suffix=$suffix-memory
fi
if [ "${ASYNC:-0}" = 1 ]; then
    modes+=(async)
    suffix=$suffix-async
fi
example_features=()
if [ "${TRACING:-0}" = 1 ]; then
    modes+=(tracing)
    suffix=$suffix-tracing
    example_features=(--features tracing)
fi
outer=()
if [ "${#modes[@]}" -gt 0 ]; then
    outer=("$(IFS=,; echo "${modes[*]}")")
fi
capture=$dir/big-$mib$suffix.tscope
if [ -z "$bin" ]; then
    cargo build --quiet --release -p tickscope-cli --features otlp
    bin=$target/release/tickscope
fi
if [ ! -s "$capture" ]; then
    cargo build --quiet --release --example big_capture "${example_features[@]}"
    /usr/bin/time -f 'generated in %e s, peak RSS %M KB' \
        "$target/release/examples/big_capture" "$capture" "$mib" 4 "${outer[@]}"
fi
sink=${SINK:-$([ "$mib" -gt 4000 ] && echo 1 || echo 0)}
echo "capture: $capture ($(stat -c %s "$capture") bytes), command: $bin"
printf '%-34s %10s %8s\n' command "peak MB" "wall s"
measure() {
    local name=$1
    shift
    local log=$dir/time.log
    if /usr/bin/time -v -o "$log" "$bin" --quiet "$@" >/dev/null; then
        local kb wall
        kb=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$log")
        wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$log")
        printf '%-34s %10d %8s\n' "$name" $((kb / 1024)) "$wall"
    else
        printf '%-34s %10s\n' "$name" failed
    fi
}
out() {
    # A big output goes to /dev/null through a link when asked (the command writes through
    # links), else into the folder, deleted after.
    if [ "$sink" = 1 ]; then
        ln -sf /dev/null "$dir/out.$1"
    else
        rm -f "$dir/out.$1"
    fi
    echo "$dir/out.$1"
}
measure "info" info "$capture"
measure "table" table "$capture"
measure "table --by-thread" table --by-thread "$capture"
measure "table --tree" table --tree "$capture"
measure "table --by-arg x" table --by-arg x "$capture"
measure "table --by-origin" table --by-origin "$capture"
big=$([ "$mib" -gt 4000 ] && echo 1 || echo 0)
formats=${FORMATS:-$([ "$big" = 1 ] && echo "folded pb json pftrace html" || echo "folded pb json pftrace html otlp.json")}
for ext in $formats; do
    o=$(out "$ext")
    measure "convert -o .$ext" convert "$capture" -o "$o"
    [ -L "$o" ] || rm -f "$o"
done
# Kineto's dialect of Chrome JSON.
o=$(out kineto.json)
measure "convert --kineto -o .json" convert "$capture" --kineto -o "$o"
[ -L "$o" ] || rm -f "$o"
# A gzipped copy of the capture (made once, kept beside it): decompressed into a temporary
# file, then read as the plain file is.
gz=$capture.gz
if [ ! -s "$gz" ]; then
    gzip -1 -c "$capture" >"$gz.part"
    mv "$gz.part" "$gz"
fi
measure "table (gzipped)" table "$gz"
o=$(out gz.json)
measure "convert -o .json (gzipped)" convert "$gz" -o "$o"
[ -L "$o" ] || rm -f "$o"
o=$(out merged.tscope)
measure "merge" merge "$capture" -o "$o"
[ -L "$o" ] || rm -f "$o"
rm -f "$dir"/out.*
if [ "${CLEAN:-0}" = 1 ]; then
    rm -f "$capture" "$capture.gz"
fi
