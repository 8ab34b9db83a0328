//! Async spans: begins, polls and ends seen on any thread, matched by span id.

use rustc_hash::FxHashMap;

use crate::record::callsite::Callsite;
use crate::trace::{AsyncSpan, Span, SpanKind, ThreadTrace};

/// An async record seen while pairing one thread, matched across threads afterwards.
pub(super) struct Mark {
    pub(super) ns: u64,
    pub(super) what: MarkKind,
    pub(super) callsite: &'static Callsite,
    pub(super) span: u32,
    /// Index of the thread in the trace.
    pub(super) thread: usize,
    /// For a begin: 0, or the start (ns) of the plain scope of the same callsite, on any
    /// thread, that is the call's first slice: the call then starts there. The `tracing`
    /// bridge records a span's first enter as a plain scope and, only when the span is entered
    /// again, begins an async call that names that first enter's tick, adopting it as its
    /// first poll.
    pub(super) adopts: u64,
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum MarkKind {
    Begin,
    /// A poll slice: its index in the thread's spans.
    Poll(u32),
    End,
}

/// Matches async begins, polls and ends of all threads by span id, in time order.
pub(super) fn match_async(
    mut marks: Vec<Mark>,
    threads: &mut [ThreadTrace],
    end_ns: u64,
) -> Vec<AsyncSpan> {
    // At equal times: begins, then polls, then ends (the variants' order).
    marks.sort_by_key(|m| (m.ns, m.what));
    let mut records: Vec<AsyncSpan> = Vec::new();
    let mut open: FxHashMap<u32, usize> = FxHashMap::default();
    for mark in marks {
        let current = open
            .get(&mark.span)
            .copied()
            .filter(|&r| std::ptr::eq(records[r].callsite, mark.callsite));
        match (mark.what, current) {
            (MarkKind::Begin, _) => {
                let r = records.len();
                open.insert(mark.span, r);
                records.push(AsyncSpan {
                    callsite: mark.callsite,
                    start_ns: mark.ns,
                    end_ns: mark.ns,
                    process: 0,
                    thread: threads[mark.thread].id,
                    end_thread: None,
                    polls: 0,
                    busy_ns: 0,
                    self_ns: 0,
                    open_at_stop: false,
                });
                if mark.adopts != 0 {
                    adopt(&mut records[r], r, &mark, threads);
                }
            }
            (MarkKind::Poll(index), Some(r)) => {
                let span = &mut threads[mark.thread].spans[index as usize];
                poll_of(&mut records[r], r, span);
            }
            (MarkKind::End, Some(r)) => {
                open.remove(&mark.span);
                let record = &mut records[r];
                record.end_ns = mark.ns.max(record.start_ns);
                record.end_thread = Some(threads[mark.thread].id);
            }
            // A poll or end of a call that began outside the window.
            (_, None) => {}
        }
    }
    for r in open.into_values() {
        let record = &mut records[r];
        record.end_ns = end_ns.max(record.start_ns);
        record.open_at_stop = true;
    }
    records
}

/// Makes `span` a poll of the async call `record` (at index `r`).
fn poll_of(record: &mut AsyncSpan, r: usize, span: &mut Span) {
    span.kind = SpanKind::Poll {
        task: Some(r as u32),
    };
    record.polls += 1;
    // Saturating: forged ticks (a capture file) may overlap anyhow.
    record.busy_ns = record.busy_ns.saturating_add(span.duration_ns());
    record.self_ns = record.self_ns.saturating_add(span.self_ns());
}

/// Makes the plain scope that `begin` adopts (see [`Mark::adopts`]) the first poll of
/// `record`, which then starts there, when a thread holds one.
fn adopt(record: &mut AsyncSpan, r: usize, begin: &Mark, threads: &mut [ThreadTrace]) {
    for thread in threads.iter_mut() {
        // Spans are in order of entry, so of start time.
        let from = thread.spans.partition_point(|s| s.start_ns < begin.adopts);
        let found = thread.spans[from..]
            .iter()
            .take_while(|s| s.start_ns == begin.adopts)
            .position(|s| s.kind == SpanKind::Scope && std::ptr::eq(s.callsite, begin.callsite));
        if let Some(at) = found {
            poll_of(record, r, &mut thread.spans[from + at]);
            record.start_ns = record.start_ns.min(begin.adopts);
            record.thread = thread.id;
            return;
        }
    }
}
