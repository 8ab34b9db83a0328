//! The report's JSON block: rows, call tree, session, events and the diff.

use std::borrow::Cow;
use std::collections::HashMap;

use crate::record::memory::MemoryMode;
use crate::report::compare::{self, Diff};
use crate::report::{Report, ScopeStats};
use crate::table::json_string;
use crate::trace::{Compensation, InstantScope, SpanKind, Trace};

use super::encode::{rel, sep, spans_blob};
use super::names::Names;
use super::options::Options;
use super::tree::TreeCols;

/// The most points of the memory timeline kept (the maximum of each stretch of events).
const MEMORY_POINTS: usize = 4000;

/// What the JSON block holds beyond the trace's own fields, made from the whole trace
/// ([`data`]) or from captures' sums and pieces (`stream::data_of`).
pub(super) struct Parts {
    /// Each thread's spans.
    pub(super) spans: Vec<usize>,
    /// Each thread's spans in the blob, when it holds only some (a level of detail).
    pub(super) shown: Option<Vec<u32>>,
    /// The rows by name, the rows by thread and the call tree, as JSON.
    pub(super) table: String,
    pub(super) by_thread: String,
    pub(super) tree: String,
    /// The table's footer.
    pub(super) footer: String,
    /// The flows, by (origin thread, span, follower thread, span) in the blob.
    pub(super) flows: String,
    /// `,"memory":...`: the downsampled memory timeline, or null.
    pub(super) memory: String,
    /// JSON members written before the names (`,"lod":...,"hist":...`), or nothing.
    pub(super) extra: String,
    /// The binary block: its bytes, whether gzipped, and its length before compression.
    pub(super) blob: BlobBytes,
    /// The async calls, when the trace does not hold them (streamed: `calls::streamed`).
    pub(super) calls: Option<CallsPart>,
}

/// The async calls of the JSON block written from captures' calls as they are read again.
pub(super) struct CallsPart {
    /// The calls in the trace (those shown are fewer past the budget).
    pub(super) count: u64,
    /// `"name":[...],...,"polls":[...]`: the members of the `async` object.
    pub(super) json: String,
}

/// The binary block: its bytes, whether gzipped, and its length before compression.
pub(super) type BlobBytes = (Vec<u8>, bool, usize);

/// The JSON block and the (compressed) binary block of the report of the whole `trace`.
pub(super) fn data(
    trace: &Trace,
    options: &Options,
    title: &str,
    names: &mut Names,
) -> (String, Vec<u8>) {
    let report = Report::new(trace);
    let mut table = String::new();
    rows_json(&mut table, trace, &report, names);
    let mut by_thread = String::new();
    rows_json(&mut by_thread, trace, &Report::by_thread(trace), names);
    let mut tree = String::new();
    tree_json(&mut tree, trace, names);
    let footer = crate::table::footer_text(trace, None, &report);
    let mut flows = String::new();
    let mut k = 0;
    for flow in &trace.flows {
        if let Some(origin) = flow.origin {
            sep(&mut flows, k);
            k += 1;
            flows.push_str(&format!(
                "{},{},{},{}",
                origin.thread, origin.span, flow.follower.thread, flow.follower.span
            ));
        }
    }
    let memory = match &trace.memory {
        Some(memory) if !memory.events.is_empty() => {
            let mut points = MemoryPoints::new(memory.events.len());
            for (event, live) in memory.events.iter().zip(memory.live_bytes()) {
                points.push(trace, event.ns, live);
            }
            points.json()
        }
        _ => ",\"memory\":null".to_owned(),
    };
    let parts = Parts {
        spans: trace.threads.iter().map(|t| t.spans.len()).collect(),
        shown: None,
        table,
        by_thread,
        tree,
        footer,
        flows,
        memory,
        extra: String::new(),
        blob: (Vec::new(), false, 0),
        calls: None,
    };
    let base = options.baseline.as_deref().map(|b| b as &dyn Baseline);
    compose(trace, parts, base, options, title, names, &mut |names| {
        spans_blob(trace, names)
    })
}

/// The run a report's diff view compares its trace with: decoded whole (a [`Trace`]), or of
/// captures (`base::OfCaptures`).
pub(super) trait Baseline {
    /// Its trace: with spans, or without (of captures, their sums').
    fn trace(&self) -> &Trace;
    /// Its rows by name, as [`rows_json`] writes them.
    fn rows(&self, j: &mut String, names: &mut Names);
    /// Its call tree, as [`tree_json`] writes it.
    fn tree(&self, j: &mut String, names: &mut Names);
    /// The diff of `trace` against it.
    fn diff(&self, trace: &Trace, options: &compare::Options) -> Cow<'_, Diff>;
}

impl Baseline for Trace {
    fn trace(&self) -> &Trace {
        self
    }

    fn rows(&self, j: &mut String, names: &mut Names) {
        rows_json(j, self, &Report::new(self), names);
    }

    fn tree(&self, j: &mut String, names: &mut Names) {
        tree_json(j, self, names);
    }

    fn diff(&self, trace: &Trace, options: &compare::Options) -> Cow<'_, Diff> {
        Cow::Owned(Diff::new(self, trace, options))
    }
}

/// The JSON block of `trace` (without its spans when `parts` come from sums), with a diff
/// view against `base`, and the blob (`blob` makes it when `parts` do not hold it: after the
/// other names are numbered).
pub(super) fn compose(
    trace: &Trace,
    parts: Parts,
    base: Option<&dyn Baseline>,
    options: &Options,
    title: &str,
    names: &mut Names,
    blob: &mut dyn FnMut(&mut Names) -> BlobBytes,
) -> (String, Vec<u8>) {
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
            "{{\"name\":{},\"process\":{},\"id\":{},\"spans\":{}",
            json_string(&t.display_name()),
            t.process,
            t.id,
            parts.spans.get(i).copied().unwrap_or(0)
        ));
        if let Some(shown) = &parts.shown {
            let _ = write_fmt(
                &mut j,
                format_args!(",\"shown\":{}", shown.get(i).copied().unwrap_or(0)),
            );
        }
        j.push('}');
    }
    j.push(']');
    j.push_str(",\"table\":");
    j.push_str(&parts.table);
    j.push_str(",\"by_thread\":");
    j.push_str(&parts.by_thread);
    j.push_str(",\"tree\":");
    j.push_str(&parts.tree);
    j.push_str(",\"footer\":");
    j.push_str(&json_string(&parts.footer));
    let calls = parts.calls.as_ref();
    let count = calls.map_or(trace.async_spans.len() as u64, |c| c.count);
    session_json(&mut j, trace, parts.spans.iter().sum(), count);
    events_json(&mut j, trace, names, calls.map(|c| c.json.as_str()));
    j.push_str(",\"flows\":[");
    j.push_str(&parts.flows);
    j.push(']');
    j.push_str(&parts.memory);
    match base {
        Some(base) => {
            let base_trace = base.trace();
            j.push_str(",\"base\":{\"wall_ns\":");
            j.push_str(&base_trace.wall_ns().to_string());
            j.push_str(",\"processes\":");
            j.push_str(&base_trace.processes.len().to_string());
            j.push_str(",\"table\":");
            base.rows(&mut j, names);
            j.push_str(",\"tree\":");
            base.tree(&mut j, names);
            j.push('}');
            diff_json(&mut j, &base.diff(trace, &options.diff), names);
        }
        None => j.push_str(",\"base\":null,\"diff\":null"),
    }
    let blob = match parts.blob {
        (bytes, gzip, len) if len > 0 => (bytes, gzip, len),
        _ => blob(names),
    };
    j.push_str(&parts.extra);
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

/// The memory timeline downsampled to at most [`MEMORY_POINTS`] points, fed event by event:
/// of each stretch of events, the first one's time and the largest live bytes.
pub(super) struct MemoryPoints {
    per: usize,
    seen: usize,
    ts: Vec<String>,
    vs: Vec<u64>,
}

impl MemoryPoints {
    /// For a timeline of `events` allocations and frees.
    pub(super) fn new(events: usize) -> Self {
        Self {
            per: events.div_ceil(MEMORY_POINTS).max(1),
            seen: 0,
            ts: Vec::new(),
            vs: Vec::new(),
        }
    }

    /// The next event, at `ns`, with `live` bytes after it.
    pub(super) fn push(&mut self, trace: &Trace, ns: u64, live: u64) {
        if self.seen.is_multiple_of(self.per) {
            self.ts.push(rel(trace, ns).to_string());
            self.vs.push(live);
        } else if let Some(last) = self.vs.last_mut() {
            *last = (*last).max(live);
        }
        self.seen += 1;
    }

    /// `,"memory":{...}`.
    pub(super) fn json(self) -> String {
        let vs: Vec<String> = self.vs.iter().map(ToString::to_string).collect();
        format!(
            ",\"memory\":{{\"events\":{},\"t\":[{}],\"live\":[{}]}}",
            self.seen,
            self.ts.join(","),
            vs.join(",")
        )
    }
}

fn write_fmt(j: &mut String, args: std::fmt::Arguments<'_>) -> std::fmt::Result {
    std::fmt::Write::write_fmt(j, args)
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
pub(super) fn rows_json(j: &mut String, trace: &Trace, report: &Report, names: &mut Names) {
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

/// The call tree merged by path, one tree per thread ([`TreeCols`]).
fn tree_json(j: &mut String, trace: &Trace, names: &mut Names) {
    let mut tree = TreeCols::default();
    for (t, th) in trace.threads.iter().enumerate() {
        let mut node_of: Vec<u32> = Vec::with_capacity(th.spans.len());
        for span in &th.spans {
            let id = names.of(span.callsite);
            let p = span
                .parent
                .and_then(|p| node_of.get(p as usize))
                .map_or(-1, |&n| i64::from(n));
            let node = tree.node(p, t as u32, id, span.kind != SpanKind::Scope);
            tree.add(node, span);
            node_of.push(node);
        }
    }
    tree.json(j);
}

/// What the table's footer says, field by field.
fn session_json(j: &mut String, trace: &Trace, scopes: usize, async_calls: u64) {
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
            async_calls,
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

/// Counters, instants and async calls (the members of `async` given when streamed, else
/// the trace's).
fn events_json(j: &mut String, trace: &Trace, names: &mut Names, calls: Option<&str>) {
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
    j.push_str("]},\"async\":{");
    if let Some(calls) = calls {
        j.push_str(calls);
        j.push('}');
        return;
    }
    j.push_str("\"name\":[");
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
    j.push_str("]}");
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
