//! A single-file HTML report that opens offline: summary table, call tree, flame graph,
//! timeline, memory and session views, and with a baseline a diff view, all drawn by plain
//! JavaScript embedded in the file (no request of any kind when it opens: the page's content
//! security policy forbids them).
//!
//! ```no_run
//! use tickscope::export::html;
//!
//! let prof = tickscope::Profiler::start();
//! // ... the code to profile ...
//! prof.stop();
//! prof.write("run.html", &html::Options::new().title("nightly run"))?;
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! # What the file holds
//!
//! - a JSON block (`<script type="application/json" id="ts-meta">`): the names, threads,
//!   processes, the table's rows (by name and by thread, as [`Report`] computes them), the
//!   merged call tree, the table's footer, counters, instants, async calls, flows, a
//!   downsampled memory timeline and, with a baseline, the baseline's rows and tree and the
//!   [`Diff`] verdicts. `<`, `>`, `&`, U+2028 and U+2029 are written as `\u` escapes, so no
//!   name can close the block;
//! - a base64 block (`id="ts-blob"`): every scope of every thread, as four columns of
//!   LEB128 varints (name index; distance back to the parent, 0 for none; start minus the end
//!   of the previous sibling, or the parent's start for a first child, zigzag-coded; duration
//!   in ns, overhead compensation applied as in the table), gzipped when tickscope is built with its `gzip` feature (the browser inflates it
//!   with `DecompressionStream`). The layout and its size per scope are in docs/REPORT.md.

use std::collections::HashMap;
use std::io::{self, Write};
use std::sync::Arc;

use super::Format;
use crate::record::callsite::Callsite;
use crate::record::memory::MemoryMode;
use crate::report::compare::{self, Diff};
use crate::report::{Report, ScopeStats};
use crate::table::json_string;
use crate::trace::{Compensation, InstantScope, SpanKind, Trace};

const STYLE: &str = include_str!("report.css");
const SCRIPT: &str = include_str!("report.js");

/// The most points of the memory timeline kept (the maximum of each stretch of events).
const MEMORY_POINTS: usize = 4000;

/// Options of the HTML report: the [`Format`] to hand to
/// [`Profiler::write`](crate::Profiler::write) or [`write_file`](super::write_file), and the
/// argument of [`write()`].
#[must_use]
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// The page's title; "tickscope report" when empty.
    pub title: String,
    /// A baseline run: the report then has a diff view comparing the trace with it.
    pub baseline: Option<Arc<Trace>>,
    /// How the diff view judges each name ([`Diff::new`]); the defaults of `tickscope diff`.
    pub diff: compare::Options,
}

impl Options {
    /// The defaults: no title of its own, no baseline.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the page's title.
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.title = title.into();
        self
    }

    /// Compares the trace with `baseline` in a diff view.
    pub fn baseline(mut self, baseline: Arc<Trace>) -> Self {
        self.baseline = Some(baseline);
        self
    }

    /// How the diff view judges each name.
    pub fn diff_options(mut self, options: compare::Options) -> Self {
        self.diff = options;
        self
    }
}

impl Format for Options {
    fn write(&self, trace: &Trace, mut out: &mut dyn Write) -> io::Result<()> {
        write(trace, &mut out, self)
    }
}

/// Writes the report of `trace` as one HTML page into `out`.
pub fn write(trace: &Trace, out: &mut impl Write, options: &Options) -> io::Result<()> {
    let title = if options.title.is_empty() {
        "tickscope report"
    } else {
        options.title.as_str()
    };
    let mut names = Names::default();
    let (meta, blob) = data(trace, options, title, &mut names);
    out.write_all(b"<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n")?;
    // No request of any kind: only the inline style and script run, images only from data.
    out.write_all(
        b"<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; \
          script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:\">\n\
          <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
          <meta name=\"color-scheme\" content=\"light dark\">\n",
    )?;
    writeln!(out, "<title>{}</title>", escape_html(title))?;
    writeln!(out, "<style>\n{STYLE}</style>\n</head>\n<body>")?;
    out.write_all(
        b"<noscript>This report is drawn by JavaScript: allow scripts for this file.</noscript>\n\
          <div id=\"app\"><p id=\"loading\">Loading the report\xE2\x80\xA6</p></div>\n",
    )?;
    out.write_all(b"<script type=\"application/json\" id=\"ts-meta\">")?;
    out.write_all(script_safe(&meta).as_bytes())?;
    out.write_all(b"</script>\n<script type=\"application/octet-stream\" id=\"ts-blob\">")?;
    base64(&blob, out)?;
    out.write_all(b"</script>\n<script>\n")?;
    out.write_all(SCRIPT.as_bytes())?;
    out.write_all(b"</script>\n</body>\n</html>\n")
}

/// Name indices: every name the report shows once, in order of first use.
#[derive(Default)]
struct Names {
    index: HashMap<&'static str, u32>,
    list: Vec<&'static str>,
    /// The index of each callsite's name, by the callsite's address: a scope's name is found
    /// without hashing it (names can be long).
    callsites: HashMap<usize, u32>,
}

impl Names {
    fn id(&mut self, name: &'static str) -> u32 {
        *self.index.entry(name).or_insert_with(|| {
            self.list.push(name);
            (self.list.len() - 1) as u32
        })
    }

    fn of(&mut self, callsite: &'static Callsite) -> u32 {
        let key = std::ptr::from_ref(callsite) as usize;
        match self.callsites.get(&key) {
            Some(&id) => id,
            None => {
                let id = self.id(callsite.name());
                self.callsites.insert(key, id);
                id
            }
        }
    }
}

/// The JSON block and the (compressed) binary block of the report.
fn data(trace: &Trace, options: &Options, title: &str, names: &mut Names) -> (String, Vec<u8>) {
    let mut j = String::with_capacity(1 << 16);
    j.push_str("{\"version\":1,\"title\":");
    j.push_str(&json_string(title));
    let _ = write_fmt(
        &mut j,
        format_args!(
            ",\"start_unix_ns\":\"{}\",\"wall_ns\":{},\"covered_ns\":{}",
            trace.start_ns,
            trace.wall_ns(),
            trace.covered_ns()
        ),
    );
    j.push_str(",\"processes\":[");
    for (i, p) in trace.processes.iter().enumerate() {
        sep(&mut j, i);
        j.push_str(&format!(
            "{{\"label\":{},\"pid\":{},\"name\":{},\"host\":{}}}",
            json_string(&trace.process_label(i as u32)),
            p.id,
            json_string(&p.name),
            json_string(&p.host)
        ));
    }
    j.push_str("],\"threads\":[");
    for (i, t) in trace.threads.iter().enumerate() {
        sep(&mut j, i);
        j.push_str(&format!(
            "{{\"name\":{},\"process\":{},\"id\":{},\"spans\":{}}}",
            json_string(&t.display_name()),
            t.process,
            t.id,
            t.spans.len()
        ));
    }
    j.push(']');
    let report = Report::new(trace);
    j.push_str(",\"table\":");
    rows_json(&mut j, trace, &report, names);
    j.push_str(",\"by_thread\":");
    rows_json(&mut j, trace, &Report::by_thread(trace), names);
    j.push_str(",\"tree\":");
    tree_json(&mut j, trace, names);
    j.push_str(",\"footer\":");
    j.push_str(&json_string(&crate::table::footer_text(trace, &report)));
    session_json(&mut j, trace);
    events_json(&mut j, trace, names);
    match &options.baseline {
        Some(base) => {
            let base_report = Report::new(base);
            j.push_str(",\"base\":{\"wall_ns\":");
            j.push_str(&base.wall_ns().to_string());
            j.push_str(",\"processes\":");
            j.push_str(&base.processes.len().to_string());
            j.push_str(",\"table\":");
            rows_json(&mut j, base, &base_report, names);
            j.push_str(",\"tree\":");
            tree_json(&mut j, base, names);
            j.push('}');
            diff_json(&mut j, &Diff::new(base, trace, &options.diff), names);
        }
        None => j.push_str(",\"base\":null,\"diff\":null"),
    }
    let blob = spans_blob(trace, names);
    j.push_str(",\"names\":[");
    for (i, name) in names.list.iter().enumerate() {
        sep(&mut j, i);
        j.push_str(&json_string(name));
    }
    let _ = write_fmt(
        &mut j,
        format_args!("],\"blob\":{{\"gzip\":{},\"bytes\":{}}}}}", blob.1, blob.2),
    );
    (j, blob.0)
}

fn write_fmt(j: &mut String, args: std::fmt::Arguments<'_>) -> std::fmt::Result {
    std::fmt::Write::write_fmt(j, args)
}

fn sep(j: &mut String, i: usize) {
    if i > 0 {
        j.push(',');
    }
}

/// A JSON number for `v`: `null` when not finite.
fn float(v: f64) -> String {
    if v.is_finite() {
        format!("{v}")
    } else {
        "null".to_owned()
    }
}

/// The index in [`Trace::threads`] of each (process, thread id): the first entry of a thread
/// that several sessions recorded.
fn thread_indices(trace: &Trace) -> HashMap<(u32, u64), usize> {
    let mut map = HashMap::with_capacity(trace.threads.len());
    for (i, t) in trace.threads.iter().enumerate() {
        map.entry((t.process, t.id)).or_insert(i);
    }
    map
}

/// The rows of `report` as columns of the table (`Profiler::table()`'s, times in ns).
fn rows_json(j: &mut String, trace: &Trace, report: &Report, names: &mut Names) {
    let rows = report.rows();
    let threads = thread_indices(trace);
    let thread_index = |row: &ScopeStats| -> i64 {
        row.process_thread()
            .and_then(|key| threads.get(&key))
            .map_or(-1, |&i| i as i64)
    };
    let col = |j: &mut String, key: &str, f: &dyn Fn(&ScopeStats) -> String| {
        j.push_str(&format!("{}:[", json_string(key)));
        for (i, row) in rows.iter().enumerate() {
            sep(j, i);
            j.push_str(&f(row));
        }
        j.push(']');
    };
    let ids: Vec<u32> = rows.iter().map(|r| names.id(r.name)).collect();
    j.push_str(&format!("{{\"rows\":{},\"name\":[", rows.len()));
    for (i, id) in ids.iter().enumerate() {
        sep(j, i);
        j.push_str(&id.to_string());
    }
    j.push_str("],");
    col(j, "thread", &|r| thread_index(r).to_string());
    j.push(',');
    col(j, "calls", &|r| r.calls.to_string());
    j.push(',');
    col(j, "total_ns", &|r| r.total_ns.to_string());
    j.push(',');
    col(j, "self_ns", &|r| r.self_ns.to_string());
    j.push(',');
    col(j, "avg_ns", &|r| r.avg_ns().to_string());
    j.push(',');
    col(j, "min_ns", &|r| r.min_ns.to_string());
    j.push(',');
    col(j, "max_ns", &|r| r.max_ns.to_string());
    j.push(',');
    col(j, "p50_ns", &|r| r.p50_ns.to_string());
    j.push(',');
    col(j, "p99_ns", &|r| r.p99_ns.to_string());
    j.push(',');
    col(j, "total_percent", &|r| float(r.total_percent));
    j.push(',');
    col(j, "self_percent", &|r| float(r.self_percent));
    j.push(',');
    col(j, "open_at_stop", &|r| r.open_at_stop.to_string());
    if rows.iter().any(|r| r.busy_ns.is_some()) {
        j.push(',');
        col(j, "busy_ns", &|r| {
            r.busy_ns
                .map_or_else(|| "null".to_owned(), |b| b.to_string())
        });
        j.push(',');
        col(j, "busy_percent", &|r| {
            r.busy_ns.map_or_else(
                || "null".to_owned(),
                |b| float(crate::report::percent_of(b, r.total_ns)),
            )
        });
    }
    if trace.memory.is_some() {
        let mem = |f: fn(&crate::trace::MemoryStats) -> u64| {
            move |r: &ScopeStats| r.memory.as_ref().map_or(0, f).to_string()
        };
        j.push(',');
        col(j, "alloc_bytes", &mem(|m| m.alloc_bytes));
        j.push(',');
        col(j, "self_alloc_bytes", &mem(|m| m.self_alloc_bytes));
        j.push(',');
        col(j, "allocs", &mem(|m| m.allocs));
        j.push(',');
        col(j, "freed_bytes", &mem(|m| m.freed_bytes));
        j.push(',');
        col(j, "peak_bytes", &mem(|m| m.peak_bytes));
    }
    j.push('}');
}

/// The call tree merged by path, one tree per thread: columns of nodes (parent node or -1,
/// thread, name, whether the node is the polls of an async call (shown `(poll)`, as in the
/// table's tree), calls, total and self ns), parents before children.
fn tree_json(j: &mut String, trace: &Trace, names: &mut Names) {
    let mut index: HashMap<(i64, u32, u32, bool), u32> = HashMap::new();
    let (mut parent, mut thread, mut name) = (Vec::new(), Vec::new(), Vec::new());
    let mut poll: Vec<bool> = Vec::new();
    let (mut calls, mut total, mut self_ns) =
        (Vec::<u64>::new(), Vec::<u64>::new(), Vec::<u64>::new());
    for (t, th) in trace.threads.iter().enumerate() {
        let mut node_of: Vec<u32> = Vec::with_capacity(th.spans.len());
        for span in &th.spans {
            let id = names.of(span.callsite);
            let p = span
                .parent
                .and_then(|p| node_of.get(p as usize))
                .map_or(-1, |&n| i64::from(n));
            let is_poll = span.kind != SpanKind::Scope;
            let node = *index.entry((p, t as u32, id, is_poll)).or_insert_with(|| {
                parent.push(p);
                poll.push(is_poll);
                thread.push(t as u32);
                name.push(id);
                calls.push(0);
                total.push(0);
                self_ns.push(0);
                (parent.len() - 1) as u32
            });
            let n = node as usize;
            calls[n] += 1;
            // Saturating: a forged capture file may hold any duration.
            total[n] = total[n].saturating_add(span.duration_ns());
            self_ns[n] = self_ns[n].saturating_add(span.self_ns());
            node_of.push(node);
        }
    }
    let list = |j: &mut String, key: &str, items: &mut dyn Iterator<Item = String>| {
        j.push_str(&format!("{}:[", json_string(key)));
        for (i, item) in items.enumerate() {
            sep(j, i);
            j.push_str(&item);
        }
        j.push(']');
    };
    j.push('{');
    list(j, "parent", &mut parent.iter().map(ToString::to_string));
    j.push(',');
    list(j, "thread", &mut thread.iter().map(ToString::to_string));
    j.push(',');
    list(j, "name", &mut name.iter().map(ToString::to_string));
    j.push(',');
    list(
        j,
        "poll",
        &mut poll.iter().map(|&p| u8::from(p).to_string()),
    );
    j.push(',');
    list(j, "calls", &mut calls.iter().map(ToString::to_string));
    j.push(',');
    list(j, "total_ns", &mut total.iter().map(ToString::to_string));
    j.push(',');
    list(j, "self_ns", &mut self_ns.iter().map(ToString::to_string));
    j.push('}');
}

/// What the table's footer says, field by field.
fn session_json(j: &mut String, trace: &Trace) {
    let clock = trace
        .clock_source
        .map_or_else(|| "null".to_owned(), |c| json_string(&c.to_string()));
    let compensation = match trace.compensation {
        None => "null".to_owned(),
        Some(c @ Compensation::Off) => json_string(&c.to_string()),
        Some(c) => json_string(&format!("{c} subtracted")),
    };
    let memory = match trace.memory.as_ref().map(|m| m.mode) {
        Some(MemoryMode::Timeline) => "\"timeline\"",
        Some(MemoryMode::Counts) => "\"counts\"",
        Some(MemoryMode::Off) | None => "null",
    };
    let s = &trace.salvage;
    let scopes: usize = trace.threads.iter().map(|t| t.spans.len()).sum();
    let _ = write_fmt(
        j,
        format_args!(
            ",\"session\":{{\"clock\":{clock},\"compensation\":{compensation},\
             \"dropped_events\":{},\"overwritten_events\":{},\"event_count\":{},\"scopes\":{scopes},\
             \"thread_count\":{},\"async_calls\":{},\"memory\":{memory},\
             \"cut_start_ns\":{},\"salvage\":{{\"sessions\":{},\"lost_bytes\":{},\
             \"open_scopes\":{},\"threads_without_records\":{}}}}}",
            trace.dropped_events,
            trace.overwritten_events,
            trace.event_count,
            trace.thread_count(),
            trace.async_spans.len(),
            trace
                .cut_start_ns
                .map_or_else(|| "null".to_owned(), |c| rel(trace, c).to_string()),
            s.sessions,
            s.lost_bytes,
            s.open_scopes,
            s.threads_without_records
        ),
    );
}

/// `ns` (since the Unix epoch) from the trace's start.
fn rel(trace: &Trace, ns: u64) -> i64 {
    (i128::from(ns) - i128::from(trace.start_ns)).clamp(i128::from(i64::MIN), i128::from(i64::MAX))
        as i64
}

/// Counters, instants, async calls, flows and the memory timeline.
fn events_json(j: &mut String, trace: &Trace, names: &mut Names) {
    let threads = thread_indices(trace);
    let thread_of =
        |process: u32, id: u64| -> i64 { threads.get(&(process, id)).map_or(-1, |&i| i as i64) };
    j.push_str(",\"counters\":[");
    for (i, c) in trace.counters.iter().enumerate() {
        sep(j, i);
        let id = names.id(c.name);
        j.push_str(&format!(
            "{{\"name\":{id},\"process\":{},\"t\":[",
            c.process
        ));
        for (k, s) in c.samples.iter().enumerate() {
            sep(j, k);
            j.push_str(&rel(trace, s.ns).to_string());
        }
        j.push_str("],\"v\":[");
        for (k, s) in c.samples.iter().enumerate() {
            sep(j, k);
            j.push_str(&float(s.value.as_f64()));
        }
        j.push_str("]}");
    }
    j.push_str("],\"instants\":{\"name\":[");
    for (i, e) in trace.instants.iter().enumerate() {
        sep(j, i);
        j.push_str(&names.id(e.name()).to_string());
    }
    j.push_str("],\"t\":[");
    for (i, e) in trace.instants.iter().enumerate() {
        sep(j, i);
        j.push_str(&rel(trace, e.ns).to_string());
    }
    j.push_str("],\"thread\":[");
    for (i, e) in trace.instants.iter().enumerate() {
        sep(j, i);
        let t = match e.scope {
            InstantScope::Thread => thread_of(e.process, e.thread),
            InstantScope::Process => -1,
        };
        j.push_str(&t.to_string());
    }
    j.push_str("],\"process\":[");
    for (i, e) in trace.instants.iter().enumerate() {
        sep(j, i);
        j.push_str(&e.process.to_string());
    }
    j.push_str("]},\"async\":{\"name\":[");
    for (i, a) in trace.async_spans.iter().enumerate() {
        sep(j, i);
        j.push_str(&names.id(a.name()).to_string());
    }
    j.push_str("],\"start\":[");
    for (i, a) in trace.async_spans.iter().enumerate() {
        sep(j, i);
        j.push_str(&rel(trace, a.start_ns).to_string());
    }
    j.push_str("],\"end\":[");
    for (i, a) in trace.async_spans.iter().enumerate() {
        sep(j, i);
        j.push_str(&rel(trace, a.end_ns).to_string());
    }
    j.push_str("],\"process\":[");
    for (i, a) in trace.async_spans.iter().enumerate() {
        sep(j, i);
        j.push_str(&a.process.to_string());
    }
    j.push_str("],\"polls\":[");
    for (i, a) in trace.async_spans.iter().enumerate() {
        sep(j, i);
        j.push_str(&a.polls.to_string());
    }
    j.push_str("]},\"flows\":[");
    let mut k = 0;
    for flow in &trace.flows {
        if let Some(origin) = flow.origin {
            sep(j, k);
            k += 1;
            j.push_str(&format!(
                "{},{},{},{}",
                origin.thread, origin.span, flow.follower.thread, flow.follower.span
            ));
        }
    }
    j.push(']');
    match &trace.memory {
        Some(memory) if !memory.events.is_empty() => {
            let live = memory.live_bytes();
            let per = live.len().div_ceil(MEMORY_POINTS).max(1);
            let (mut ts, mut vs) = (Vec::new(), Vec::new());
            for (events, lives) in memory.events.chunks(per).zip(live.chunks(per)) {
                ts.push(rel(trace, events[0].ns).to_string());
                vs.push(lives.iter().max().copied().unwrap_or(0).to_string());
            }
            j.push_str(&format!(
                ",\"memory\":{{\"events\":{},\"t\":[{}],\"live\":[{}]}}",
                memory.events.len(),
                ts.join(","),
                vs.join(",")
            ));
        }
        _ => j.push_str(",\"memory\":null"),
    }
}

/// The verdict of each name, from [`Diff`].
fn diff_json(j: &mut String, diff: &Diff, names: &mut Names) {
    let opt = |v: Option<f64>| v.map_or_else(|| "null".to_owned(), float);
    j.push_str(&format!(
        ",\"diff\":{{\"judged\":{},\"row_confidence\":{},\"threshold\":{},\"min_change_ns\":{},\
         \"metric\":{},\"rows\":[",
        diff.judged,
        float(diff.row_confidence),
        float(diff.options.threshold),
        float(diff.options.min_change_ns),
        json_string(diff.options.metric.name())
    ));
    for (i, row) in diff.rows.iter().enumerate() {
        sep(j, i);
        let (lo, hi) = row.interval_ns.unzip();
        j.push_str(&format!(
            "[{},{},{},{},{},{}]",
            names.id(row.name),
            json_string(row.verdict.name()),
            opt(row.change_ns),
            opt(lo),
            opt(hi),
            opt(row.change_ns.and_then(|c| row.relative(c)))
        ));
    }
    j.push_str("]}");
}

/// Every scope of every thread as four varint columns (see the module docs), gzipped when the
/// `gzip` feature is on: the bytes, whether gzipped, and the length before compression.
fn spans_blob(trace: &Trace, names: &mut Names) -> (Vec<u8>, bool, usize) {
    let scopes: usize = trace.threads.iter().map(|t| t.spans.len()).sum();
    let mut cols: [Vec<u8>; 4] = std::array::from_fn(|_| Vec::with_capacity(scopes * 2));
    for thread in &trace.threads {
        let mut last_child_end: Vec<Option<i64>> = vec![None; thread.spans.len()];
        let mut last_root_end = 0i64;
        for (i, span) in thread.spans.iter().enumerate() {
            let start = rel(trace, span.start_ns);
            // The duration the table counts (overhead compensation applied), so that the
            // report's histograms agree with its rows.
            let duration = span.duration_ns().min(i64::MAX as u64);
            let end = start.saturating_add(duration as i64);
            let parent = span.parent.map(|p| p as usize).filter(|&p| p < i);
            let reference = match parent {
                Some(p) => {
                    last_child_end[p].unwrap_or_else(|| rel(trace, thread.spans[p].start_ns))
                }
                None => last_root_end,
            };
            varint(&mut cols[0], u64::from(names.of(span.callsite)));
            varint(&mut cols[1], parent.map_or(0, |p| (i - p) as u64));
            varint(&mut cols[2], zigzag(start.wrapping_sub(reference)));
            varint(&mut cols[3], duration);
            match parent {
                Some(p) => last_child_end[p] = Some(end),
                None => last_root_end = end,
            }
        }
    }
    let raw_len: usize = cols.iter().map(Vec::len).sum();
    let mut raw = Vec::with_capacity(raw_len + 32);
    for col in &cols {
        varint(&mut raw, col.len() as u64);
    }
    for col in cols {
        raw.extend_from_slice(&col);
    }
    compress(raw)
}

#[cfg(feature = "gzip")]
fn compress(raw: Vec<u8>) -> (Vec<u8>, bool, usize) {
    use flate2::Compression;
    use flate2::write::GzEncoder;
    let len = raw.len();
    let mut enc = GzEncoder::new(Vec::with_capacity(len / 3 + 64), Compression::fast());
    // Writing into a `Vec` cannot fail.
    match enc.write_all(&raw).and_then(|()| enc.finish()) {
        Ok(gz) => (gz, true, len),
        Err(_) => (raw, false, len),
    }
}

#[cfg(not(feature = "gzip"))]
fn compress(raw: Vec<u8>) -> (Vec<u8>, bool, usize) {
    let len = raw.len();
    (raw, false, len)
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// `json` made safe inside a `<script>` element: `<`, `>` and `&` (which only occur in
/// strings) and the line separators JavaScript once refused in strings become `\u` escapes.
fn script_safe(json: &str) -> String {
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

/// `s` as HTML text.
fn escape_html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Writes `bytes` in base64 (standard alphabet, padded), in lines of 4096 characters.
fn base64(bytes: &[u8], out: &mut impl Write) -> io::Result<()> {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut line = Vec::with_capacity(4097);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        line.push(ALPHABET[(n >> 18) as usize & 63]);
        line.push(ALPHABET[(n >> 12) as usize & 63]);
        line.push(if chunk.len() > 1 {
            ALPHABET[(n >> 6) as usize & 63]
        } else {
            b'='
        });
        line.push(if chunk.len() > 2 {
            ALPHABET[n as usize & 63]
        } else {
            b'='
        });
        if line.len() >= 4096 {
            line.push(b'\n');
            out.write_all(&line)?;
            line.clear();
        }
    }
    out.write_all(&line)
}

#[cfg(test)]
mod tests {
    use super::{base64, script_safe, varint, zigzag};

    #[test]
    fn base64_pads() {
        let enc = |b: &[u8]| {
            let mut out = Vec::new();
            base64(b, &mut out).unwrap();
            String::from_utf8(out).unwrap()
        };
        assert_eq!(enc(b""), "");
        assert_eq!(enc(b"f"), "Zg==");
        assert_eq!(enc(b"fo"), "Zm8=");
        assert_eq!(enc(b"foo"), "Zm9v");
        assert_eq!(enc(b"foobar"), "Zm9vYmFy");
    }

    #[test]
    fn varints_and_zigzag() {
        let mut out = Vec::new();
        varint(&mut out, 300);
        assert_eq!(out, [0xac, 0x02]);
        assert_eq!(zigzag(0), 0);
        assert_eq!(zigzag(-1), 1);
        assert_eq!(zigzag(1), 2);
        assert_eq!(zigzag(i64::MIN), u64::MAX);
    }

    #[test]
    fn script_blocks_cannot_be_closed() {
        assert_eq!(
            script_safe(r#"["</script>&\u2028"]"#),
            r#"["\u003c/script\u003e\u0026\u2028"]"#
        );
        assert_eq!(script_safe("\u{2028}"), "\\u2028");
    }
}
