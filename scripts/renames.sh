#!/usr/bin/env bash
# Applies issue 33's renames ("one word per concept", the crate docs' "Words") to every tracked
# text file of the working tree: Rust, Markdown, shell, C, trybuild .stderr, insta snapshots.
# Re-runnable: a second run changes nothing, and a branch made before the renames gets them by
# running it (then `cargo fmt --all`). CHANGELOG.md keeps the old names of its past entries,
# and a line that ends in `// old name (renames.sh)`, or follows that comment on a line of its
# own, keeps its own (the deprecated aliases).
#
#   scripts/renames.sh            # from the repository root
#
# The renames (old → new):
#   Config (the builder Profiler::builder() returns) → ProfilerBuilder (tickscope::thread::Builder
#     is std's thread builder, re-exported)
#   Profiler::snapshot() (trace() under another name) → Profiler::trace()
#   Trace::links (a Vec<Flow>) → Trace::flows
#   Report::get_caused_by → Report::get_by_origin (as Report::by_origin, Table::by_origin)
#   SpanKind::Poll { task } → SpanKind::Poll { async_span } (an index into Trace::async_spans)
#   AsyncCall (the macros' future wrapper) → AsyncSpanGuard; src/record/task.rs →
#     src/record/async_span.rs; src/decode/tasks.rs → src/decode/async_spans.rs
#   OTLP attribute tickscope.cut_at_stop → tickscope.open_at_stop (as Span::open_at_stop and the
#     Chrome and Perfetto exports' open_at_stop)
#   the capture file extension .tsc (CLI docs, CI scripts) → .tscope (what the code writes)
set -euo pipefail
cd "$(dirname "$0")/.."

# Files: moved first, so that the module paths below match them.
move() {
    if [ -e "$1" ] && [ ! -e "$2" ]; then
        git mv "$1" "$2"
    fi
}
move src/record/task.rs src/record/async_span.rs
move src/decode/tasks.rs src/decode/async_spans.rs

git ls-files -z -- '*.rs' '*.md' '*.sh' '*.c' '*.h' '*.stderr' '*.snap' '*.toml' '*.py' '*.cjs' \
    '.ci/run' ':!CHANGELOG.md' ':!scripts/renames.sh' ':!macros/tests/ui/fail/on_struct.rs' \
    ':!macros/tests/ui/fail/on_struct.stderr' |
    xargs -0 perl -0777 -pi -e '
        # Lines that keep an old name on purpose (the deprecated aliases) end in this comment,
        # or follow it on a line of its own.
        my @kept;
        s{^[ \t]*// old name \(renames\.sh\)\n.*\n}{push @kept, $&; "\x00KEPT$#kept\x00\n"}mge;
        s{^.*// old name \(renames\.sh\)\n}{push @kept, $&; "\x00KEPT$#kept\x00\n"}mge;

        # Config → ProfilerBuilder.
        # Config of other crates (fastrace::collector::Config) and the variant Config(..) stay.
        s/\b(tickscope|crate|session)::Config\b/$1::ProfilerBuilder/g;
        s/(?<![\w":])Config\b(?!\()/ProfilerBuilder/g;

        # Profiler::snapshot() → Profiler::trace().
        s/\bProfiler::snapshot\b/Profiler::trace/g;
        s/\b(prof|profiler|session)(\s*)\.snapshot\(\)/$1$2.trace()/g;

        # Trace::links → Trace::flows.
        s/\bTrace::links\b/Trace::flows/g;
        s/\bpub links: Vec<Flow>/pub flows: Vec<Flow>/g;
        s/\b(trace|parallel|merged|out|decoded|t|file|trace\(\))(\s*)\.links\b/$1$2.flows/g;
        s/^(\s*)links,(\n\s*processes\b)/$1flows: links,$2/mg;
        s/^(\s*)links:( [^\n]*,\n\s*processes\b)/$1flows:$2/mg;
        s/(let Trace \{[^}]*?\n\s*)links,/$1flows: links,/g;

        # Report::get_caused_by → Report::get_by_origin.
        s/\bget_caused_by\b/get_by_origin/g;

        # SpanKind::Poll { task } → SpanKind::Poll { async_span }.
        s/\bPoll \{(\s*)task(\s*):/Poll {$1async_span$2:/g;
        s/\bPoll \{(\s*)task(\s*)\}/Poll {$1async_span: task$2}/g;
        s/\bPoll \{ task,/Poll { async_span: task,/g;
        s/(\bPoll \{\s*(?:\/\/\/[^\n]*\n\s*)*)task: Option<u32>/$1async_span: Option<u32>/g;

        # AsyncCall → AsyncSpanGuard; the modules record::task and decode::tasks.
        s/\bAsyncCall\b/AsyncSpanGuard/g;
        s/\brecord::task\b/record::async_span/g;
        s/\brecord\/task\.rs\b/record\/async_span.rs/g;
        s/\bdecode\/tasks\.rs\b/decode\/async_spans.rs/g;
        s/^(\s*(?:pub(?:\(\w+\))? )?)mod task;/$1mod async_span;/mg;
        s/^(\s*(?:pub(?:\(\w+\))? )?)mod tasks;/$1mod async_spans;/mg;
        s/(?<![\w.])tasks::/async_spans::/g;
        s/\[`tasks`\]/[`async_spans`]/g;

        # The OTLP attribute of a span still open at stop.
        s/cut_at_stop/open_at_stop/g;

        # Capture files are .tscope.
        s/(?<=[\w}])\.tsc\b(?!\w)/.tscope/g;

        s{\x00KEPT(\d+)\x00\n}{$kept[$1]}g;
    '
