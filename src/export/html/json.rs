//! The report's JSON block: rows, call tree, session, events and the diff.

use std::collections::HashMap;

use crate::record::memory::MemoryMode;
use crate::report::compare::Diff;
use crate::report::{Report, ScopeStats};
use crate::table::json_string;
use crate::trace::{Compensation, InstantScope, SpanKind, Trace};

use super::encode::{rel, spans_blob};
use super::names::Names;
use super::options::Options;

/// The most points of the memory timeline kept (the maximum of each stretch of events).
const MEMORY_POINTS: usize = 4000;

/// The JSON block and the (compressed) binary block of the report.
pub(super) fn data(
    trace: &Trace,
    options: &Options,
    title: &str,
    names: &mut Names,
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
