#!/usr/bin/env bash
# Measures the error rates of `tickscope diff` on this machine, under the load it has: a
# benchmark, not a test (nothing is timed against a bound; it prints counts).
#
#   scripts/diff_error_rates.sh            50 pairs (PAIRS=10 for a shorter run)
#
# Workload: examples/diff_workload.rs (1,000 rounds of 20 `small` ≈ 200 ns, 10 `medium` ≈ 2 µs,
# one `large` ≈ 50 µs: 20,000, 10,000 and 1,000 calls), iterations calibrated once, then the
# same for every run. Each pair i runs, interleaved: A and A' (the same build and arguments),
# B_medium (`medium` 5 % more work), B_large (`large` 5 % more work), C (`medium` and `large`
# 2 % more work). It counts:
#   (a) A/A: pairs where `diff A A'` exits 0 (no name regressed), at the default threshold
#       (5 %) and at 2 %; and the largest |change| per call of each name over the pairs;
#   (b) A/B: pairs where `diff A B_medium --threshold 2%` flags `medium` regressed, and where
#       it flags no other name (regressed or improved); the same for `large`;
#       and, for comparison, the same at the default threshold (5 %, the change itself);
#   (c) pairs where `diff A C` (default threshold) calls any name regressed.
#
# Needs: the workload built in release (cargo build --release --example diff_workload) and the
# CLI (cargo build -p tickscope-cli); both are built here. TICKSCOPE=path uses another binary.
set -euo pipefail
cd "$(dirname "$0")/.."
PAIRS=${PAIRS:-50}
cargo build --quiet --release --example diff_workload
cargo build --quiet -p tickscope-cli
work=target/release/examples/diff_workload
ts=${TICKSCOPE:-target/debug/tickscope}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
iters=$("$work" --calibrate | tr ' ' ',')
echo "iterations (small, medium, large): $iters; $PAIRS pairs; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"

# run NAME [ARGS...]: a run of the workload into $dir/NAME.
run() {
    local name=$1
    shift
    mkdir -p "$dir/$name"
    "$work" "$dir/$name" --iterations "$iters" "$@" >/dev/null
}

# verdicts BASE NEW [ARGS...]: "name verdict change_ns" lines of the diff (its exit code is
# not an error here).
verdicts() {
    local base=$1 new=$2
    shift 2
    { "$ts" -q diff "$dir/$base/diff_workload.tscope" "$dir/$new/diff_workload.tscope" --format csv "$@" || true; } |
        tail -n +2 | awk -F, '{ print $1, $2, $9 }'
}

aa5=0 aa2=0 bm=0 bm_other=0 bl=0 bl_other=0 c_regressed=0 bm5=0 bl5=0
: >"$dir/aa_changes"
start=$(date +%s)
for i in $(seq 1 "$PAIRS"); do
    run a
    run a2
    run bm --slower medium=5
    run bl --slower large=5
    run c --slower medium=2 --slower large=2
    v=$(verdicts a a2)
    echo "$v" >>"$dir/aa_changes"
    grep -q ' regressed ' <<<"$v" || aa5=$((aa5 + 1))
    verdicts a a2 --threshold 2% | grep -q ' regressed ' || aa2=$((aa2 + 1))
    v=$(verdicts a bm --threshold 2%)
    grep -q '^medium regressed ' <<<"$v" && bm=$((bm + 1))
    grep -v '^medium ' <<<"$v" | grep -Eq ' (regressed|improved) ' || bm_other=$((bm_other + 1))
    v=$(verdicts a bl --threshold 2%)
    grep -q '^large regressed ' <<<"$v" && bl=$((bl + 1))
    grep -v '^large ' <<<"$v" | grep -Eq ' (regressed|improved) ' || bl_other=$((bl_other + 1))
    verdicts a bm | grep -q '^medium regressed ' && bm5=$((bm5 + 1))
    verdicts a bl | grep -q '^large regressed ' && bl5=$((bl5 + 1))
    verdicts a c | grep -q ' regressed ' && c_regressed=$((c_regressed + 1))
    printf '\rpair %d/%d' "$i" "$PAIRS" >&2
done
printf '\n' >&2
echo "took $(($(date +%s) - start)) s"
echo "(a) A/A: diff exits 0 in $aa5/$PAIRS pairs at the default threshold (5%), $aa2/$PAIRS at 2%"
awk '{ c = $3 < 0 ? -$3 : $3; if (c > max[$1]) max[$1] = c }
     END { for (n in max) printf "    largest |change| per call in A/A: %s %.0f ns\n", n, max[n] }' \
    "$dir/aa_changes" | sort
echo "(b) A/B medium +5% (--threshold 2%): medium regressed in $bm/$PAIRS, no other name flagged in $bm_other/$PAIRS"
echo "    A/B large +5% (--threshold 2%): large regressed in $bl/$PAIRS, no other name flagged in $bl_other/$PAIRS"
echo "    at the default threshold (5%, the size of the change itself): medium regressed in $bm5/$PAIRS, large in $bl5/$PAIRS"
echo "(c) +2% on medium and large (default threshold): a regression called in $c_regressed/$PAIRS pairs"
